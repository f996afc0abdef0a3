// Package limittest holds a fake clock that can wait, for deterministic
// tests of code that waits on a limit.Limiter (WaitN, Reservation.Delay).
package limittest

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/lfgrudge/grudge/limit"
)

// FakeClock is a manually driven limit.Clock: sketchtest.FakeClock's
// scale (Unix milliseconds: NowMillis() == Now().UnixMilli(); the zero
// value and NewFakeClock read 0 ms) plus timers that fire when Advance,
// Set or SetTime moves the clock to or past their time. Nothing sleeps:
// a WaitN on a limiter built WithClock(c) returns once the test has moved
// c past the wait. Safe for concurrent use.
type FakeClock struct {
	ms      atomic.Int64 // current time in Unix milliseconds
	mu      sync.Mutex
	timers  map[*timer]struct{} // pending timers; guarded by mu
	changed *sync.Cond          // broadcast when a timer is added; uses mu
}

// NewFakeClock returns a clock that reads 0 ms until moved.
func NewFakeClock() *FakeClock { return &FakeClock{} }

// NowMillis implements sketch.Clock.
func (c *FakeClock) NowMillis() int64 { return c.ms.Load() }

// Now returns the current reading as a time.Time (no monotonic reading).
func (c *FakeClock) Now() time.Time { return time.UnixMilli(c.ms.Load()) }

// Advance moves the clock by d (truncated to whole milliseconds) and
// fires the timers due; a negative d moves it backwards. Concurrent
// Advances add up (each reads and moves the time under the lock; audit
// 55: reading it outside lost moves).
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setLocked(c.ms.Load() + d.Milliseconds())
}

// SetTime puts the clock at t and fires the timers due.
func (c *FakeClock) SetTime(t time.Time) { c.Set(t.UnixMilli()) }

// Set puts the clock at ms and fires the timers due.
func (c *FakeClock) Set(ms int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setLocked(ms)
}

// setLocked is Set with c.mu held.
func (c *FakeClock) setLocked(ms int64) {
	c.ms.Store(ms)
	for t := range c.timers {
		if t.at <= ms {
			delete(c.timers, t)
			t.c <- time.UnixMilli(ms)
		}
	}
}

// NewTimer implements limit.Clock: the timer fires once the clock reads
// at least d (rounded up to the millisecond) after now; d <= 0 fires at
// once.
func (c *FakeClock) NewTimer(d time.Duration) limit.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.ms.Load()
	t := &timer{clock: c, at: now + (d + time.Millisecond - 1).Milliseconds(), c: make(chan time.Time, 1)}
	if d <= 0 {
		t.c <- time.UnixMilli(now)
		return t
	}
	if c.timers == nil {
		c.timers = map[*timer]struct{}{}
	}
	c.timers[t] = struct{}{}
	c.cond().Broadcast()
	return t
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
