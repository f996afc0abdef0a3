package sketchtest_test

import (
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit125FixedFakeClockWrapsAtInt64 (audit 125; fixed at stop 63, the text below says what was wrong): FakeClock's scale is Unix
// milliseconds in an int64, and Set/Advance add to it with no overflow
// check (sketch/sketchtest/clock.go:68 c.ms.Add(whole + carry), :73 Set).
// Set(MaxInt64 - 10) then Advance(time.Second) reads -9223372036854774819:
// a one-second step forward silently becomes a step of 292 million years
// back, which every sketch reads as "no time passed" (no decay, no
// rotation) - a silent wrong answer rather than a saturated reading or a
// "sketchtest:" panic. The module saturates such times elsewhere
// (internal/core/clock.go addSat, docs/migrating.md row on UnixMilli
// wrapping). Likewise Set(MinInt64 + 10) then Advance(-time.Second) jumps
// to the far future. Expected: the reading stays monotone with the move
// (saturates at the int64 range) or the call panics "sketchtest: ...".
// Fix: saturating add in Advance (clock.go:60-69).
func TestAudit125FixedFakeClockWrapsAtInt64(t *testing.T) {
	c := sketchtest.NewFakeClock()
	c.Set(math.MaxInt64 - 10)
	before := c.NowMillis()
	c.Advance(time.Second)
	if got := c.NowMillis(); got < before {
		t.Errorf("Set(MaxInt64-10); Advance(1s): NowMillis = %d, below %d: the clock wrapped backwards", got, before)
	}
	c.Set(math.MinInt64 + 10)
	before = c.NowMillis()
	c.Advance(-time.Second)
	if got := c.NowMillis(); got > before {
		t.Errorf("Set(MinInt64+10); Advance(-1s): NowMillis = %d, above %d: the clock wrapped forwards", got, before)
	}
}

// TestAudit125FakeClockLargeMovesExact: large but representable moves are
// exact, the zero value reads the epoch, and a negative Advance moves back.
func TestAudit125FakeClockLargeMovesExact(t *testing.T) {
	for _, c := range []struct {
		name  string
		moves []time.Duration
		want  int64
	}{
		{"zero", nil, 0},
		{"MaxInt64 twice", []time.Duration{math.MaxInt64, math.MaxInt64}, 18446744073709},
		{"MinInt64 once", []time.Duration{math.MinInt64}, -9223372036855},
		{"sub-ms accumulates", []time.Duration{400 * time.Microsecond, 400 * time.Microsecond, 400 * time.Microsecond}, 1},
		{"back", []time.Duration{time.Second, -3 * time.Second}, -2000},
	} {
		var clk sketchtest.FakeClock
		for _, d := range c.moves {
			clk.Advance(d)
		}
		if got := clk.NowMillis(); got != c.want {
			t.Errorf("%s: NowMillis = %d, want %d", c.name, got, c.want)
		}
		if got := clk.Now().UnixMilli(); got != clk.NowMillis() {
			t.Errorf("%s: Now().UnixMilli() = %d, NowMillis = %d", c.name, got, clk.NowMillis())
		}
	}
}
