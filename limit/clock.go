package limit

import (
	"time"

	"github.com/lfgrudge/grudge/internal/hw"
	"github.com/lfgrudge/grudge/sketch"
)

// Clock is a sketch.Clock that can also wait: WithClock takes any
// sketch.Clock, and one that implements Clock drives WaitN's timers on its
// own scale, so that a fake clock (limittest.FakeClock) makes waiting
// deterministic: WaitN returns when the fake clock is advanced past the
// wait, without sleeping. Now must be the time.Time of NowMillis's
// reading, whole milliseconds (as limittest.FakeClock's is): a limiter
// decides at whole milliseconds and counts its waits, and Delay, from
// that reading, and NewTimer's d counts from Now.
type Clock interface {
	sketch.Clock
	Now() time.Time
	// NewTimer returns a timer that fires once, on its channel, when the
	// clock reaches d from now (at once for d <= 0), as time.NewTimer.
	NewTimer(d time.Duration) Timer
}

// Timer is a Clock's timer, as *time.Timer: C fires once at the timer's
// time; Stop prevents that and reports whether it did.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
}

// timerOf returns how WaitN waits on clock c: on c's timers if it is a
// Clock, on real timers for the clocks that run at real speed (nil, the
// default monotonic clock, and the benchmarks' tick clock; real reports
// those), and nil for any other clock (WaitN then returns ErrNoTimer
// rather than sleep real time against a clock that may not run).
func timerOf(c sketch.Clock) (newTimer func(time.Duration) (<-chan time.Time, func() bool), real bool) {
	switch c := c.(type) {
	case Clock:
		return func(d time.Duration) (<-chan time.Time, func() bool) {
			t := c.NewTimer(d)
			return t.C(), t.Stop
		}, false
	case nil, *hw.Clock:
		return func(d time.Duration) (<-chan time.Time, func() bool) {
			t := time.NewTimer(d)
			return t.C, t.Stop
		}, true
	}
	return nil, false
}
