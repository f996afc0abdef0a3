package grudgetest

import (
	"sync/atomic"
	"time"
)

// handledWait bounds how long Tick waits for the rotator to report its
// rotation; it returns earlier as soon as the rotation is done. Only a
// FakeTicker that no rotator reads waits this long.
const handledWait = time.Second

// FakeTicker is a grudge.Ticker that ticks only when Tick is called. Attach
// it to one Rotator (RotatorConfig.Ticker). Safe for concurrent use.
type FakeTicker struct {
	c       chan time.Time
	sent    atomic.Int64  // ticks delivered to the channel
	handled atomic.Int64  // rotations reported through TickHandled
	notify  chan struct{} // wakes a Tick waiting for handled to catch up
	stopped atomic.Bool
}

// NewFakeTicker returns a FakeTicker that has not ticked.
func NewFakeTicker() *FakeTicker {
	return &FakeTicker{c: make(chan time.Time, 1), notify: make(chan struct{}, 1)}
}

// C returns the tick channel.
func (t *FakeTicker) C() <-chan time.Time { return t.c }

// Stop records that the ticker was stopped (Rotator.Close calls it); later
// Ticks return at once. It is idempotent.
func (t *FakeTicker) Stop() { t.stopped.Store(true) }

// Stopped reports whether Stop has been called.
func (t *FakeTicker) Stopped() bool { return t.stopped.Load() }

// Tick delivers one tick, which makes the attached Rotator rotate once,
// and returns when that rotation is done, so Rotations() read right after
// sees it. If a tick is still undelivered (nobody reads the ticker), this
// one is dropped, as time.Ticker drops ticks for a slow reader. After Stop
// it does nothing.
func (t *FakeTicker) Tick() {
	if t.stopped.Load() {
		return
	}
	select {
	case t.c <- time.Now():
	default:
		return
	}
	want := t.sent.Add(1)
	timer := time.NewTimer(handledWait)
	defer timer.Stop()
	for t.handled.Load() < want && !t.stopped.Load() {
		select {
		case <-t.notify:
		case <-timer.C:
			return
		}
	}
}

// TickHandled is called by the Rotator after each rotation it made for a
// tick of t; tests need not call it.
func (t *FakeTicker) TickHandled() {
	t.handled.Add(1)
	select {
	case t.notify <- struct{}{}:
	default:
	}
}
