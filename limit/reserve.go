package limit

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/lfgrudge/grudge/rotator"
)

// Reservation is a debit taken now for requests that may act later, as
// golang.org/x/time/rate's Reservation: OK reports whether it was taken,
// Delay how long to wait before acting, Cancel gives it back. A
// Reservation is safe for concurrent use; Cancel is idempotent.
type Reservation struct {
	ok        bool
	lim       *Limiter
	timeToAct time.Time
	res       rotator.Reservation
	canceled  atomic.Bool
}

// OK reports whether the limiter can provide the requested tokens within
// MaxDebt. A Reservation that is not OK has Delay InfDuration and Cancel
// does nothing.
func (r *Reservation) OK() bool { return r.ok }

// Delay is DelayFrom(time.Now()).
func (r *Reservation) Delay() time.Duration { return r.DelayFrom(time.Now()) }

// DelayFrom returns how long after t the reserved requests may act: 0 if
// they may act at t, InfDuration if the reservation is not OK.
func (r *Reservation) DelayFrom(t time.Time) time.Duration {
	if !r.ok {
		return InfDuration
	}
	d := r.timeToAct.Sub(t)
	if d < 0 {
		return 0
	}
	return d
}

// Cancel gives the reservation back: what is left of its debit (the
// additive law: the part already drained by time is not returned, and a
// refund never takes another key's debt) is taken off the key's cells in
// every live generation. Only the first call does anything.
func (r *Reservation) Cancel() {
	if !r.ok || r.lim.r == nil || !r.canceled.CompareAndSwap(false, true) {
		return
	}
	r.lim.r.Refund(&r.res)
}

// ReserveN debits n tokens for key at time t if the key's debt plus n is
// within MaxDebt, and returns a Reservation whose Delay says when the
// requests may act (debt drained back to the burst). It panics if n <= 0.
// A reservation for n > burst, or beyond MaxDebt, is not OK and debits
// nothing. ReserveN ignores the decision mode: it always decides with
// TryUpdate (strict), so queued reservations never exceed MaxDebt.
func (l *Limiter) ReserveN(t time.Time, key []byte, n int) *Reservation {
	return l.reserveN(t, bytesView(key), n)
}

// ReserveNString is ReserveN for a string key.
func (l *Limiter) ReserveNString(t time.Time, key string, n int) *Reservation {
	return l.reserveN(t, key, n)
}

func (l *Limiter) reserveN(t time.Time, key string, n int) *Reservation {
	checkN("ReserveN", n)
	r := &Reservation{lim: l}
	if l.r == nil {
		r.ok, r.timeToAct = true, t
		return r
	}
	if n > l.burst {
		return r
	}
	nf := float64(n)
	res, ok := l.r.TryReserveStringAt(t, key, nf, l.maxDebt)
	if !ok {
		return r
	}
	r.ok, r.res = true, res
	after := l.r.QueryStringAt(t, key) // includes this reservation
	wait := time.Duration(0)
	if after > l.burstF {
		wait = l.retryAfter(after-nf, nf)
	}
	r.timeToAct = t.Add(wait)
	return r
}

// WaitN blocks until n tokens for key are available, the context ends, or
// the wait would outlast the context's deadline; it returns nil when the
// requests may proceed. On an error nothing stays debited (the
// reservation is cancelled). It panics if n <= 0.
func (l *Limiter) WaitN(ctx context.Context, key []byte, n int) error {
	return l.waitN(ctx, bytesView(key), n)
}

// WaitNString is WaitN for a string key.
func (l *Limiter) WaitNString(ctx context.Context, key string, n int) error {
	return l.waitN(ctx, key, n)
}

func (l *Limiter) waitN(ctx context.Context, key string, n int) error {
	checkN("WaitN", n)
	if n > l.burst && l.r != nil {
		return fmt.Errorf("limit: WaitN(n=%d) exceeds the burst %d", n, l.burst)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	now := l.Now()
	r := l.reserveN(now, key, n)
	if !r.OK() {
		return fmt.Errorf("limit: WaitN(n=%d) would exceed MaxDebt %v", n, l.maxDebt)
	}
	delay := r.DelayFrom(now)
	if delay == 0 {
		return nil
	}
	if dl, ok := ctx.Deadline(); ok && dl.Sub(now) < delay {
		r.Cancel()
		return fmt.Errorf("limit: WaitN(n=%d) would wait %v, past the context deadline", n, delay)
	}
	tm := time.NewTimer(delay)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		r.Cancel()
		return ctx.Err()
	}
}
