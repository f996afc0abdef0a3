package core

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/lfgrudge/grudge/internal/hw"
	"golang.org/x/sys/cpu"
)

// systemMillis is the default clock: the runtime's monotonic clock
// (runtime nanotime, the clock behind time.Since) in milliseconds. It
// never steps with wall-clock adjustments. hw.NewClock() may be passed
// as Config.Clock instead (docs/design.md, "Clock").
func systemMillis() int64 { return hw.Nanotime() / 1e6 }

// systemClock is the default Clock.
type systemClock struct{}

func (systemClock) NowMillis() int64 { return systemMillis() }

// timeClock is implemented by clocks that can also tell the time.Time of
// their current reading (sketchtest.FakeClock, hw.Clock does not). A
// Timebase anchors such a clock's scale to its own Now, so that a
// time.Time from that clock converts exactly.
type timeClock interface {
	Clock
	Now() time.Time
}

// Timebase is a sketch's time scale: a Clock, the time.Time that its
// reading at creation stands for, and a high-water mark of every time the
// sketch has used. It is the one time type of the module: a sketch owns
// one, a rotator shares one among its generations (pass it as
// Config.Clock), and the mutex reference uses the same type.
//
// Conversions. NowMillis reads the clock. Millis converts a time.Time to
// the clock's scale: through the monotonic reading when both t and the
// anchor have one (time.Now()), through the wall clock otherwise (a fake
// clock's Now(), a stored time). Either way t means what it says.
//
// Ordering. Every time passes through the high-water mark, so time never
// runs backwards: a reading or a t earlier than one already used counts
// as that later time (zero elapsed, never growth). A t later than the
// clock's current reading counts as the current reading: a time in the
// future cannot move the sketch ahead of its clock, so one bad argument
// never stops decay for other keys.
//
// A Timebase is safe for concurrent use. The zero value is not usable:
// use NewTimebase.
type Timebase struct {
	clock    Clock     // never nil
	anchor   time.Time // the time.Time of clock reading anchorMs
	anchorMs int64
	_        cpu.CacheLinePad
	hw       atomic.Int64 // the largest time used; math.MinInt64 before the first
	_        cpu.CacheLinePad
}

// NewTimebase returns a Timebase over c (nil means the default monotonic
// system clock). A *Timebase passed as c is returned as is.
func NewTimebase(c Clock) *Timebase {
	if tb, ok := c.(*Timebase); ok {
		return tb
	}
	if c == nil {
		c = systemClock{}
	}
	tb := &Timebase{clock: c}
	tb.hw.Store(math.MinInt64)
	tb.anchorMs = c.NowMillis()
	if tc, ok := c.(timeClock); ok {
		tb.anchor = tc.Now()
	} else {
		tb.anchor = time.Now()
	}
	return tb
}

// NowMillis returns the clock's reading through the high-water mark. It
// implements Clock, so a Timebase can be shared as Config.Clock.
func (tb *Timebase) NowMillis() int64 { return tb.observe(tb.clock.NowMillis()) }

// Millis returns t on the clock's scale, through the high-water mark and
// capped at the clock's current reading (see Timebase).
func (tb *Timebase) Millis(t time.Time) int64 {
	ms := tb.convert(t)
	h := tb.hw.Load()
	if ms <= h {
		return h // the common case for a composite: no clock read
	}
	if c := tb.clock.NowMillis(); ms > c {
		ms = c
	}
	return tb.observe(ms)
}

// convert maps t to the clock's scale without filtering.
func (tb *Timebase) convert(t time.Time) int64 {
	return tb.anchorMs + t.Sub(tb.anchor).Milliseconds()
}

// Time returns the time.Time of reading ms (the inverse of Millis for
// times that were not capped). Its monotonic reading is present when the
// anchor has one.
func (tb *Timebase) Time(ms int64) time.Time {
	return tb.anchor.Add(time.Duration(ms-tb.anchorMs) * time.Millisecond)
}

// Now returns the time.Time of the current reading.
func (tb *Timebase) Now() time.Time { return tb.Time(tb.NowMillis()) }

// HighWater returns the largest time used so far, or math.MinInt64.
func (tb *Timebase) HighWater() int64 { return tb.hw.Load() }

// observe records ms and returns max(ms, every earlier ms observed). The
// mark sits on its own cache line and is written only when time advances
// (at most once per distinct millisecond), so a busy sketch pays one load
// of a line every core keeps shared.
func (tb *Timebase) observe(ms int64) int64 {
	h := tb.hw.Load()
	for ms > h {
		if tb.hw.CompareAndSwap(h, ms) {
			return ms
		}
		h = tb.hw.Load()
	}
	return h
}
