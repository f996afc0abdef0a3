package limit

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/lfgrudge/grudge/internal/hw"
)

// Reservation is a debit taken now for requests that may act later, as
// golang.org/x/time/rate's Reservation: OK reports whether it was taken,
// Delay how long to wait before acting, Cancel gives it back. A
// Reservation is safe for concurrent use; Cancel is idempotent. The zero
// Reservation is not OK.
type Reservation struct {
	ok        bool
	lim       *Limiter
	timeToAct time.Time // on the limiter's clock
	res       receipt
	canceled  atomic.Bool
}

// OK reports whether the limiter can provide the requested tokens within
// MaxDebt. A Reservation that is not OK has Delay InfDuration and Cancel
// does nothing.
func (r *Reservation) OK() bool { return r.ok }

// Delay is DelayFrom at the limiter clock's current reading (Now): with
// WithClock, a fake clock's time, not time.Now.
func (r *Reservation) Delay() time.Duration {
	if !r.ok {
		return InfDuration
	}
	return r.DelayFrom(r.lim.Now())
}

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

// Cancel gives the reservation back, all or nothing per cell: a cell of the key that no other request has
// written since the reservation gets its previous value back (the key
// reads as if the reservation had never been taken, the part drained
// since included; on a limiter that is not Exact, that value drained to
// the reservation's millisecond and rounded up as a cell stores it, as
// every write is (package doc, "Exactness"): a Reserve+Cancel pair every
// few ms on a debt whose float32 step is more than a few ms of drain
// keeps it from draining, Every(24h) at burst 30 by 256 ms a step,
// though never above what it was), and with the count-min so does one written since only
// within the same millisecond, below MaxDebt; any other cell keeps the
// debit, on the safe side (a key is never given back more than its own
// reservation, nor anything of another key's, even once MaxDebt has cut
// another key's debit). The Buckets engine's cell is the key's entry: it
// is given back exactly when nothing has written it since (no request of
// the key, nor of a key sharing its fingerprint and a line), and
// otherwise keeps the debit, within the same millisecond too, since its
// entries hold the largest of racing debts, not their sum
// (docs/design.md, section 8); a reservation larger than the engine
// gives back in one step (its window's slack less two epochs: 3 tokens
// for limit.New(10, 20)) is given back in steps, and a request of the
// key (or of a key sharing its fingerprint and a line) that lands
// between two of them keeps the part not yet given back, on the safe
// side; and a reservation that had to evict another key's entry (both of
// the key's lines full) leaves the eviction floor it raised, which the
// evicted key's debt still needs, so the key may read up to that floor
// after Cancel. A reservation that filled the key to
// MaxDebt is never given back (either engine), nor, on the count-min, is
// the part in a cell it left at the clamp (MaxDebt) because other keys
// share that cell (a clamp may have cut their debits too, so the cell
// cannot tell the reservation's part from theirs), nor is any under the
// count-min's conservative update (WithConservativeUpdate: a
// conservative cell holds the largest of its keys' debts, so the key's
// own debit cannot be told apart in it), nor, on the count-min, one
// cancelled once the limiter's time has moved 2^31 ms (24.8 days) or more
// past the reservation's (any call moves it, Delay and calls on other
// keys included): its cells' 32-bit stamps could no longer be put back
// inside the sketch's time window, so the debit stays (only debts that
// outlast 24.8 days meet this: Every(24h) with a burst of 25 or more, a
// monthly quota), nor, on either engine, a reservation taken before the
// limiter was restored from a snapshot (ReadFrom): the snapshot's debts
// replace everything the reservation wrote. x/time/rate's CancelAt
// restores the tokens no later reservation has used; docs/readings.md
// compares the two. Cancel a reservation only when its request did not
// act: after its act time Cancel still gives the tokens back (the undo
// does not depend on the time), where x/time/rate's CancelAt gives
// nothing. Only the first call does anything.
func (r *Reservation) Cancel() {
	if !r.ok || r.lim.none() || !r.canceled.CompareAndSwap(false, true) {
		return
	}
	r.lim.refund(&r.res)
}

// ReserveN debits n tokens for key at time t if the key's debt plus n is
// within MaxDebt, and returns a Reservation whose Delay says when the
// requests may act (debt drained back to the burst). It panics if n <= 0.
// A reservation for n > burst, or beyond MaxDebt, is not OK and debits
// nothing (on an Inf limiter every reservation is OK, at once). ReserveN ignores the decision mode: it always decides with
// TryUpdate (strict), so queued reservations never exceed MaxDebt. The
// time to act is measured from the time the limiter decided at: t, or
// later for a stale t (a t before a time the limiter already used), never
// earlier, so a stale t never makes the requests act early; a t after the
// clock's reading counts as that reading (see AllowN). Delay is derived
// from the debt the take itself left: this reservation and every one of
// the key taken before it, none after. So reservations of one key racing
// with each other get exactly the delays of a serial order, as
// x/time/rate's (which computes them under its lock); a collision can
// only make them later (see "Error side" in the package doc).
func (l *Limiter) ReserveN(t time.Time, key string, n int) *Reservation {
	checkN("ReserveN", n)
	return l.reserve(l.p.Load(), t, key, n, l.maxDebtU)
}

// Reserve is ReserveN at the clock's reading with n = 1.
func (l *Limiter) Reserve(key string) *Reservation { return l.ReserveN(l.Now(), key, 1) }

// reserve is ReserveN under the policy p with the debt after the
// reservation capped at capU units (<= maxDebtU): WaitN's deadline
// lowers the cap, so that a reservation it could not wait for is refused
// before anything is debited.
// It counts for Stats.
func (l *Limiter) reserve(p *params, t time.Time, key string, n int, capU float64) *Reservation {
	r := l.book(p, t, key, n, capU)
	l.counts.count(r.ok)
	return r
}

// book is reserve without the count.
func (l *Limiter) book(p *params, t time.Time, key string, n int, capU float64) *Reservation {
	r := &Reservation{lim: l}
	if l.none() {
		r.ok = l.unset()
		r.timeToAct = t
		if now := l.Now(); t.After(now) {
			r.timeToAct = now
		}
		return r
	}
	if n > p.burst {
		return r
	}
	nU := p.cost(float64(n))
	res, ok := l.reserveAt(t, key, nU, capU)
	if !ok {
		return r
	}
	r.ok, r.res = true, res
	// The debt the take left (this reservation and every one before it,
	// none after) drains back within the burst x ms after the take.
	at, after := l.reserved(&r.res)
	r.timeToAct = at.Add(l.ms(l.msUntilBelow(after, p.burstU)))
	return r
}

// Wait is WaitN with n = 1.
func (l *Limiter) Wait(ctx context.Context, key string) error { return l.WaitN(ctx, key, 1) }

// The errors of WaitN (and of Multi's windows, which have no WaitN):
// match them with errors.Is; a *WaitError carries the details.
var (
	// ErrAboveBurst: n exceeds the burst, so the request can never be
	// admitted (not on an Inf limiter, which admits every n).
	ErrAboveBurst = errors.New("limit: n exceeds the burst")
	// ErrMaxDebt: the reservation would take the key's debt past MaxDebt
	// (too many requests already queued).
	ErrMaxDebt = errors.New("limit: the reservation would exceed MaxDebt")
	// ErrPastDeadline: the wait would outlast the context's deadline. It
	// also matches context.DeadlineExceeded.
	ErrPastDeadline = fmt.Errorf("limit: the wait would outlast the context deadline: %w", context.DeadlineExceeded)
	// ErrNoTimer: the limiter's clock (WithClock) can neither wait nor be
	// trusted to run at real speed: give it a NewTimer (see Clock). Also
	// the error of a wait whose real timer fired long before the default
	// clock moved by its delay, as inside a testing/synctest bubble (fake
	// timers, a real clock): the reservation is cancelled, as on a done
	// context, and the limiter wants a clock on the bubble's time
	// (limittest.TimeClock).
	ErrNoTimer = errors.New("limit: the clock cannot wait (see limit.Clock)")
)

// WaitError is the error of a WaitN that returned before waiting. Err is
// one of ErrAboveBurst, ErrMaxDebt, ErrPastDeadline and ErrNoTimer;
// errors.Is matches it (and context.DeadlineExceeded for ErrPastDeadline).
type WaitError struct {
	Err   error
	N     int           // the request's n
	Burst int           // the limiter's burst
	Wait  time.Duration // for ErrPastDeadline: the time left to the deadline
}

func (e *WaitError) Error() string {
	switch e.Err {
	case ErrAboveBurst:
		return fmt.Sprintf("limit: WaitN(n=%d) exceeds the burst %d", e.N, e.Burst)
	case ErrMaxDebt:
		return fmt.Sprintf("limit: WaitN(n=%d) would exceed MaxDebt", e.N)
	case ErrPastDeadline:
		return fmt.Sprintf("limit: WaitN(n=%d) would wait past the context deadline (in %v)", e.N, e.Wait)
	case ErrNoTimer:
		return fmt.Sprintf("limit: WaitN(n=%d): the limiter's clock cannot wait on its timers (give it a NewTimer: see limit.Clock; in a testing/synctest bubble, limittest.TimeClock)", e.N)
	}
	return fmt.Sprintf("limit: WaitN(n=%d): %v", e.N, e.Err)
}

// Unwrap returns Err.
func (e *WaitError) Unwrap() error { return e.Err }

// WaitN blocks until n tokens for key are available and returns nil, or
// returns an error, as x/time/rate's WaitN: a *WaitError before waiting
// (n above the burst, a wait past the context's deadline, which also
// matches context.DeadlineExceeded, or past MaxDebt), having debited
// nothing; or ctx.Err() when the context ends during the wait, after
// cancelling the reservation (Cancel's rule: all of it back unless another
// request touched the key's cells since, or, on the count-min, the wait
// began 24.8 days or more of the limiter's time before, in which cases it
// stays, on the safe side). It reads and waits on the limiter's clock (WithClock). It
// panics if n <= 0 or ctx is nil.
func (l *Limiter) WaitN(ctx context.Context, key string, n int) error {
	if l.tb == nil {
		checkN("WaitN", n)
		panic(errZero)
	}
	return l.waitN(l.p.Load(), ctx, key, n)
}

// waitN is WaitN under the policy p.
func (l *Limiter) waitN(p *params, ctx context.Context, key string, n int) error {
	checkN("WaitN", n)
	if ctx == nil {
		// As the standard library: a nil Context is a bug, but one named
		// here rather than a nil dereference in ctx.Done.
		panic("limit: WaitN: nil Context (pass context.Background() or context.TODO())")
	}
	if n > p.burst && !l.inf {
		l.counts.count(false)
		return &WaitError{Err: ErrAboveBurst, N: n, Burst: p.burst}
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	default:
	}
	if l.inf {
		l.counts.count(true)
		return nil
	}
	if l.newTimer == nil {
		return &WaitError{Err: ErrNoTimer, N: n, Burst: p.burst}
	}
	// The deadline and the timer run on the clock's reading; the limiter
	// decides at its latest time used, high, which lies after the reading
	// when the clock stepped back, and a debt drains only from high on.
	now := l.Now()
	high := l.tb.Time(l.tb.HighWater())
	capU, why, left := l.maxDebtU, ErrMaxDebt, time.Duration(0)
	dl, hasDeadline := ctx.Deadline()
	var leftMs float64 // the whole ms from high to the deadline
	if hasDeadline {
		// The request may act at whole ms up to the deadline: admit it
		// only if its debt drains within the burst by then.
		left = dl.Sub(now)
		if left < 0 {
			return &WaitError{Err: ErrPastDeadline, N: n, Burst: p.burst, Wait: left}
		}
		if dl.Before(high) {
			// Even a request that fits acts at high, after the deadline.
			return &WaitError{Err: ErrPastDeadline, N: n, Burst: p.burst, Wait: left}
		}
		leftMs = float64(dl.Sub(high) / time.Millisecond)
		if c := p.burstU + l.drop(leftMs); c < capU {
			capU, why = c, ErrPastDeadline
		}
	}
	r := l.reserve(p, now, key, n, capU)
	if !r.ok {
		return &WaitError{Err: why, N: n, Burst: p.burst, Wait: left}
	}
	act := r.timeToAct
	if hasDeadline {
		// The cap lets the reservation's own debt drain back within the
		// burst in at most leftMs from the time the limiter
		// decided at, which is no later than the high-water mark read
		// here. r's time to act comes from a read of the key after the
		// reservation, which under concurrency may count reservations
		// made after it (they queue behind it, not ahead): so the wait
		// ends at that bound at the latest, and a reservation the cap
		// admitted is not waited out past the deadline.
		if by := l.tb.Time(l.tb.HighWater()).Add(l.ms(leftMs)); by.Before(act) {
			act = by
		}
	}
	// From the clock's reading: its timer runs on it. A timer counts from
	// the reading when it is made, so a clock that steps back meanwhile
	// (or while it runs) would release the wait early: the reading is
	// checked again when the timer fires (unobserved: waking moves no
	// key's time), and the rest waited for.
	now = l.Now()
	for {
		delay := act.Sub(now)
		if delay <= 0 {
			return nil
		}
		var armed int64 // the runtime's clock when a real timer was armed
		if l.realTimers {
			armed = hw.Nanotime()
		}
		ch, stop := l.newTimer(delay)
		select {
		case <-ch:
			stop()
			if l.realTimers && time.Duration(hw.Nanotime()-armed) < delay/2 {
				// A real timer of delay fires once the runtime's monotonic
				// clock (the one the default clock reads) has moved by at
				// least delay: it moved by less than half of it, so the
				// timers run on another time, a testing/synctest bubble's
				// fake one. Waiting on would re-arm timers that fire at
				// once, spinning while the bubble's time races ahead.
				r.Cancel()
				return &WaitError{Err: ErrNoTimer, N: n, Burst: p.burst}
			}
			now = l.tb.Time(l.tb.Peek())
		case <-ctx.Done():
			stop()
			r.Cancel()
			return ctx.Err()
		}
	}
}
