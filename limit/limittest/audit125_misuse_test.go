package limittest_test

import (
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit/limittest"
)

// TestAudit125FixedFakeClockWrapsAtInt64 (audit 125; fixed at stop 63, the text below says what was wrong): limittest.FakeClock.Advance
// adds d.Milliseconds() to the reading with no overflow check
// (limit/limittest/clock.go:42). Set(MaxInt64 - 10) then
// Advance(time.Second) reads -9223372036854774819: a step forward silently
// becomes 292 million years back, which a Limiter reads as no time passing
// (no refill), and a timer due at the far future never fires. Expected:
// a saturated (monotone) reading or a "limittest:" panic. Fix: saturating add
// at clock.go:42.
func TestAudit125FixedFakeClockWrapsAtInt64(t *testing.T) {
	c := limittest.NewFakeClock()
	c.Set(math.MaxInt64 - 10)
	before := c.NowMillis()
	c.Advance(time.Second)
	if got := c.NowMillis(); got < before {
		t.Errorf("Set(MaxInt64-10); Advance(1s): NowMillis = %d, below %d: the clock wrapped backwards", got, before)
	}
}
