package limittest_test

import (
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit/limittest"
)

// TestAudit129SaturatedTimerWaitsForAMove: a timer made while NowMillis
// reads MaxInt64 gets the saturated time MaxInt64, the current reading,
// yet stays pending until the next move (firing at once would make a
// WaitN at the end of int64 ms spin on fresh timers); the next forward
// Advance fires it with the tick MaxInt64. (Left as is by audit 129: the
// same timer would also fire on Advance(0), or on Advance(-1ns) with a
// fraction left, which keeps NowMillis at MaxInt64.)
func TestAudit129SaturatedTimerWaitsForAMove(t *testing.T) {
	c := limittest.NewFakeClock()
	c.Set(math.MaxInt64)
	c.Advance(500 * time.Microsecond)
	tm := c.NewTimer(time.Hour)
	select {
	case <-tm.C():
		t.Fatal("fired at NewTimer")
	default:
	}
	if c.Timers() != 1 {
		t.Fatalf("Timers() = %d", c.Timers())
	}
	c.Advance(time.Millisecond)
	select {
	case tick := <-tm.C():
		if tick.UnixMilli() != math.MaxInt64 {
			t.Fatalf("tick %v", tick)
		}
	default:
		t.Fatal("not fired on a forward Advance at the end")
	}
}

// TestAudit129NowIsWholeMsOfNowMillis: limittest's Now is
// time.UnixMilli(NowMillis()) after every kind of move, sub-ms parts,
// SetTime fractions and both saturated ends included, and a timer's tick
// is the whole ms of the reading it fired at.
func TestAudit129NowIsWholeMsOfNowMillis(t *testing.T) {
	c := limittest.NewFakeClock()
	check := func(what string) {
		t.Helper()
		ms := c.NowMillis()
		if n := c.Now(); !n.Equal(time.UnixMilli(ms)) || n.UnixMilli() != ms {
			t.Fatalf("%s: Now %v, NowMillis %d", what, n, ms)
		}
	}
	c.SetTime(time.Unix(0, 1_700_000_123_456_789))
	check("SetTime with a fraction")
	tm := c.NewTimer(1500 * time.Microsecond) // from 1_700_000_123 ms: at +2
	for range 4 {
		c.Advance(400 * time.Microsecond)
		check("Advance(400µs)")
	}
	select {
	case tick := <-tm.C():
		if tick.UnixMilli() != 1_700_000_125 || !tick.Equal(time.UnixMilli(1_700_000_125)) {
			t.Fatalf("tick %v", tick)
		}
	default:
		t.Fatalf("not fired at NowMillis %d", c.NowMillis())
	}
	c.SetTime(time.UnixMilli(math.MaxInt64).Add(time.Millisecond)) // one ms past the end
	check("SetTime past the end")
	c.Advance(-time.Nanosecond)
	check("back 1 ns from the end")
	c.SetTime(time.UnixMilli(math.MinInt64).Add(-1))
	check("SetTime before the start")
	c.Advance(time.Nanosecond)
	check("forward 1 ns from the start")
}
