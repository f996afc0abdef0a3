package grudgetest

import (
	"sync"
	"sync/atomic"
	"time"
)

// handledWait bounds how long Tick waits for a reader to take its tick:
// only a FakeTicker that no rotator reads waits this long. Once taken,
// Tick waits for the rotation however long it takes (audit 50).
const handledWait = time.Second

// FakeTicker is a grudge.Ticker that ticks only when Tick is called. Attach
// it to one Rotator (RotatorConfig.Ticker). The zero value is ready to
// use, as NewFakeTicker's is. Safe for concurrent use.
type FakeTicker struct {
	once    sync.Once // makes the channels of a zero FakeTicker
	c       chan time.Time
	sent    atomic.Int64 // ticks delivered to the channel
	handled atomic.Int64 // rotations reported through TickHandled
	sendMu  sync.Mutex   // a tick's send and its number, together
	mu      sync.Mutex
	wake    chan struct{} // closed (and replaced) by each TickHandled: wakes every waiting Tick
	stop    chan struct{} // closed by the first Stop
	stopped atomic.Bool
}

// NewFakeTicker returns a FakeTicker that has not ticked.
func NewFakeTicker() *FakeTicker {
	t := new(FakeTicker)
	t.init()
	return t
}

// init makes t's channels, once; every method calls it first, so the
// zero FakeTicker works.
func (t *FakeTicker) init() {
	t.once.Do(func() {
		t.c = make(chan time.Time)
		t.wake = make(chan struct{})
		t.stop = make(chan struct{})
	})
}

// C returns the tick channel.
func (t *FakeTicker) C() <-chan time.Time {
	t.init()
	return t.c
}

// Stop records that the ticker was stopped (Rotator.Close calls it); a
// Tick waiting then returns at once, and later Ticks do nothing. It is
// idempotent.
func (t *FakeTicker) Stop() {
	t.init()
	if t.stopped.CompareAndSwap(false, true) {
		close(t.stop)
	}
}

// Stopped reports whether Stop has been called.
func (t *FakeTicker) Stopped() bool { return t.stopped.Load() }

// Tick delivers one tick, which makes the attached Rotator rotate once,
// and returns when that rotation is done, so Rotations() read right after
// sees it, however long the rotation takes (building a large generation
// may take seconds). Concurrent Ticks each rotate once. A tick that no
// rotator takes within a second (none attached, or Close called) is
// dropped. A tick taken by a reader that is not a grudge Rotator, which
// does not report its rotations, keeps Tick waiting until Stop. After
// Stop it does nothing.
func (t *FakeTicker) Tick() {
	t.init()
	if t.stopped.Load() {
		return
	}
	// The send and its number are one step: two racing Ticks numbered
	// out of their send order let the one sent second return after the
	// first one's rotation, before its own (audit 64).
	t.sendMu.Lock()
	timer := time.NewTimer(handledWait)
	select {
	case t.c <- time.Now():
	case <-t.stop:
		t.sendMu.Unlock()
		timer.Stop()
		return
	case <-timer.C:
		t.sendMu.Unlock()
		return // nobody reads the ticker
	}
	timer.Stop()
	want := t.sent.Add(1)
	t.sendMu.Unlock()
	for {
		t.mu.Lock()
		wake := t.wake // taken before handled is read: no wake-up is missed
		t.mu.Unlock()
		if t.handled.Load() >= want {
			return
		}
		select {
		case <-wake:
		case <-t.stop:
			return
		}
	}
}

// TickHandled is called by the Rotator after each rotation it made for a
// tick of t; tests need not call it.
func (t *FakeTicker) TickHandled() {
	t.init()
	t.handled.Add(1)
	t.mu.Lock()
	close(t.wake)
	t.wake = make(chan struct{})
	t.mu.Unlock()
}
