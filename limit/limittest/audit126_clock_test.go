package limittest_test

import (
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit/limittest"
)

// TestAudit126FixedTimerFiresBeforeItsDuration (audit 126; fixed at stop 63, the text below says what was wrong): since stop 63 Advance
// keeps sub-millisecond parts (Now carries them), but NewTimer still
// takes "now" as the whole ms reading (limit/limittest/clock.go:86: at =
// NowMillis() + ceil(d)), so a timer made at 0.9 ms for 500 µs fires
// when the clock reaches 1.1 ms: 200 µs after it was made by the clock's
// own Now, and its tick reads earlier than Now-at-creation + d. A timer
// must never fire before d has passed: limit.Clock's contract
// (limit/clock.go:19, "fires ... when the clock reaches d from now ...,
// as time.NewTimer") and NewTimer's doc ("fires once the clock reads at
// least d ... after now"); a WaitN on such a clock can return before its
// reservation's time. Fix: at clock.go:86 compute at from
// the full reading, at = ceil((Now() + d) in ms) (e.g. with Now's
// UnixNano), so the fraction counts.
func TestAudit126FixedTimerFiresBeforeItsDuration(t *testing.T) {
	c := limittest.NewFakeClock()
	c.Advance(900 * time.Microsecond)
	start := c.Now()
	tm := c.NewTimer(500 * time.Microsecond)
	c.Advance(200 * time.Microsecond)
	select {
	case at := <-tm.C():
		if el := at.Sub(start); el < 500*time.Microsecond {
			t.Errorf("a 500µs timer fired after %v of the clock's time (made at %v, fired at %v)", el, start.Sub(time.UnixMilli(0)), at.Sub(time.UnixMilli(0)))
		}
	default:
	}
}

// TestAudit126FixedTimerDeadlineWraps (audit 126; fixed at stop 63, the text below says what was wrong): NewTimer computes its deadline
// as now + (d + 1ms - 1).Milliseconds() with no overflow check
// (limit/limittest/clock.go:86; pre-existing, left as it was when stop
// 63 made Advance saturate, audit 125).
// A clock Set near the end of time (or a d near MaxInt64: d + 1ms - 1
// wraps negative) gets a deadline in the far past, so the timer fires at
// the next move of the clock, by 1 ms, not after d. Fix: saturate the
// deadline at MaxInt64 (a timer due past the end of time never fires),
// as sketchtest's addSat does.
func TestAudit126FixedTimerDeadlineWraps(t *testing.T) {
	for _, c := range []struct {
		name  string
		start int64
		d     time.Duration
	}{
		{"clock near MaxInt64, 1h timer", math.MaxInt64 - 10, time.Hour},
		{"clock at 0, MaxInt64 timer", 0, math.MaxInt64},
	} {
		clk := limittest.NewFakeClock()
		clk.Set(c.start)
		tm := clk.NewTimer(c.d)
		clk.Advance(time.Millisecond)
		select {
		case <-tm.C():
			t.Errorf("%s: the timer fired after the clock moved 1ms", c.name)
		default:
		}
	}
}
