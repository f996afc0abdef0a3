// Package limittest holds a fake clock that can wait, for deterministic
// tests of code that waits on a limit.Limiter (WaitN, Reservation.Delay),
// and TimeClock, a clock on package time for tests in a testing/synctest
// bubble.
package limittest

import (
	"math"
	"sync"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// FakeClock is a manually driven limit.Clock: a sketchtest.FakeClock
// (Unix milliseconds; the zero value and NewFakeClock read 0 ms; Advance
// keeps sub-millisecond parts, which accumulate, and saturates at the
// ends of int64 ms) plus timers that fire when Advance, Set or SetTime
// moves the clock to or past their time. Now is the whole millisecond
// NowMillis reads (time.UnixMilli(NowMillis())), as limit.Clock asks: a
// limiter decides at whole milliseconds and counts its waits from that
// reading, so the fraction the Advances left only carries into
// NowMillis. Nothing sleeps: a WaitN on a limiter
// built WithClock(c) returns once the test has moved c past the wait.
// Safe for concurrent use.
type FakeClock struct {
	c       sketchtest.FakeClock // the reading; moved only with mu held
	mu      sync.Mutex
	timers  map[*timer]struct{} // pending timers; guarded by mu
	changed *sync.Cond          // broadcast when a timer is added; uses mu
}

// NewFakeClock returns a clock that reads 0 ms until moved.
func NewFakeClock() *FakeClock { return &FakeClock{} }

// NowMillis implements sketch.Clock.
func (c *FakeClock) NowMillis() int64 { return c.c.NowMillis() }

// Now returns the current reading as a time.Time of whole milliseconds
// (no monotonic reading): time.UnixMilli(NowMillis()). A limiter's
// Delay and WaitN count from it (audit 127: with the fraction, WaitN
// came 1 ms late and Delay was long by it).
func (c *FakeClock) Now() time.Time { return time.UnixMilli(c.c.NowMillis()) }

// Advance moves the clock by d and fires the timers due; a negative d
// moves it backwards. As sketchtest.FakeClock's, the sub-millisecond
// parts accumulate: ten Advance(100 * time.Microsecond) move NowMillis by
// one. Concurrent Advances add up (audit 55: a move read outside the
// lock was lost).
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.c.Advance(d)
	c.fireLocked()
}

// SetTime puts the clock at t (its sub-millisecond fraction carries into
// later Advances) and fires the timers due.
func (c *FakeClock) SetTime(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.c.SetTime(t)
	c.fireLocked()
}

// Set puts the clock at ms, with no sub-millisecond fraction, and fires
// the timers due.
func (c *FakeClock) Set(ms int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.c.Set(ms)
	c.fireLocked()
}

// fireLocked fires the timers due at the current reading. Caller holds
// c.mu.
func (c *FakeClock) fireLocked() {
	ms := c.c.NowMillis()
	for t := range c.timers {
		if t.at <= ms {
			delete(c.timers, t)
			t.c <- time.UnixMilli(ms)
		}
	}
}

// NewTimer implements limit.Clock: the timer fires once Now reads at
// least d after its reading now (NowMillis + d rounded up to the
// millisecond, saturated at the end of int64 ms: audit 126 found it
// wrapped, so a timer made there fires on the next move that leaves the
// clock there); d <= 0 fires at once.
func (c *FakeClock) NewTimer(d time.Duration) limit.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &timer{clock: c, at: c.deadline(d), c: make(chan time.Time, 1)}
	if d <= 0 {
		t.c <- c.Now()
		return t
	}
	if c.timers == nil {
		c.timers = map[*timer]struct{}{}
	}
	c.timers[t] = struct{}{}
	c.cond().Broadcast()
	return t
}

// deadline is the first NowMillis at which Now is at least d after the
// current reading: NowMillis + d rounded up to the millisecond,
// saturated at MaxInt64. Caller holds c.mu.
func (c *FakeClock) deadline(d time.Duration) int64 {
	ms := c.c.NowMillis()
	if d <= 0 {
		return ms
	}
	add := int64(d / time.Millisecond)
	if d%time.Millisecond != 0 {
		add++
	}
	if ms > math.MaxInt64-add {
		return math.MaxInt64
	}
	return ms + add
}

// Timers returns the number of timers waiting to fire.
func (c *FakeClock) Timers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// BlockUntilTimers blocks until at least n timers are waiting to fire:
// a test starts a WaitN in a goroutine, waits here for its timer, then
// advances the clock.
func (c *FakeClock) BlockUntilTimers(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.timers) < n {
		c.cond().Wait()
	}
}

// cond returns c.changed, creating it. Caller holds c.mu.
func (c *FakeClock) cond() *sync.Cond {
	if c.changed == nil {
		c.changed = sync.NewCond(&c.mu)
	}
	return c.changed
}

// timer is a FakeClock's timer.
type timer struct {
	clock *FakeClock
	at    int64          // fires when the clock reads at least at
	c     chan time.Time // buffered: one send, never blocks
}

func (t *timer) C() <-chan time.Time { return t.c }

// Stop prevents the timer from firing and reports whether it was
// waiting.
func (t *timer) Stop() bool {
	t.clock.mu.Lock()
	defer t.clock.mu.Unlock()
	if _, ok := t.clock.timers[t]; !ok {
		return false
	}
	delete(t.clock.timers, t)
	return true
}

var _ limit.Clock = (*FakeClock)(nil)

// TimeClock is a limit.Clock on package time: NowMillis is
// time.Now().UnixMilli(), Now that millisecond, and NewTimer
// time.NewTimer. Inside a testing/synctest bubble all three run on the
// bubble's fake time, so a limiter built WithClock(TimeClock{}) decides,
// drains and waits on it as golang.org/x/time/rate does there; the
// default clock reads the runtime's monotonic clock, which a bubble does
// not fake (limit.ErrNoTimer). Outside a bubble it is the wall clock,
// which may step (NTP, a manual change): a limiter follows its rule for a
// clock that stepped back (it decides at the latest time it has used).
// The zero value is ready to use; safe for concurrent use.
type TimeClock struct{}

// NowMillis implements sketch.Clock: time.Now's Unix millisecond.
func (TimeClock) NowMillis() int64 { return time.Now().UnixMilli() }

// Now implements limit.Clock: the start of time.Now's Unix millisecond.
func (TimeClock) Now() time.Time { return time.UnixMilli(time.Now().UnixMilli()) }

// NewTimer implements limit.Clock with time.NewTimer.
func (TimeClock) NewTimer(d time.Duration) limit.Timer { return timeTimer{time.NewTimer(d)} }

// timeTimer is a *time.Timer as a limit.Timer.
type timeTimer struct{ t *time.Timer }

func (t timeTimer) C() <-chan time.Time { return t.t.C }
func (t timeTimer) Stop() bool          { return t.t.Stop() }
