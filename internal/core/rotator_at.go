package core

import (
	"time"
)

// The At twins take the time as their first argument, as
// golang.org/x/time/rate's AllowN(t, n) does, and convert it once through
// the rotator's Timebase (see Timebase: a t before a time already
// used counts as that time, a t after the clock's current reading counts
// as that reading). The time drives decay and rotation alike.

// Timebase returns the time scale every generation shares.
func (r *Rotator) Timebase() *Timebase { return r.tb }

// acquireAt is acquire at time t.
func (r *Rotator) acquireAt(t time.Time) (*genSet, time.Time) {
	r.built()
	return r.settle(r.cur.Load(), r.tb.Millis(t))
}

// Rotate retires the primary now and builds a fresh newest generation,
// whatever the deadline; the next deadline is one Period from now. It is
// how a Manual rotator rotates (grudge's Ticker), and may be called on
// any rotator. Safe for concurrent use: concurrent calls each rotate once.
func (r *Rotator) Rotate() {
	r.built()
	for {
		gs := r.cur.Load()
		if !gs.claimed.CompareAndSwap(false, true) {
			continue // a promotion is being published; take the next set
		}
		now := r.tb.NowMillis()
		next := r.successorN(gs, 1, now)
		next.deadline, next.endless = deadlineAfter(now, r.periodMs)
		r.publish(gs, next)
		r.promotions.Add(1)
		r.periods.Add(1)
		return
	}
}

// UpdateAt is Update at time t.
func (r *Rotator) UpdateAt(t time.Time, key []byte, delta float64) {
	gs, t := r.acquireAt(t)
	r.update(gs, t, bytesView(key), delta)
}

// UpdateStringAt is UpdateString at time t.
func (r *Rotator) UpdateStringAt(t time.Time, key string, delta float64) {
	gs, t := r.acquireAt(t)
	r.update(gs, t, key, delta)
}

// QueryAt is Query at time t.
func (r *Rotator) QueryAt(t time.Time, key []byte) float64 {
	gs, t := r.acquireAt(t)
	return gs.gens[0].QueryAt(t, key)
}

// QueryStringAt is QueryString at time t.
func (r *Rotator) QueryStringAt(t time.Time, key string) float64 {
	gs, t := r.acquireAt(t)
	return gs.gens[0].QueryStringAt(t, key)
}

// UpdateAndQueryAt is UpdateAndQuery at time t.
func (r *Rotator) UpdateAndQueryAt(t time.Time, key []byte, delta float64) float64 {
	gs, t := r.acquireAt(t)
	return r.updateAndQuery(gs, t, bytesView(key), delta)
}

// UpdateAndQueryStringAt is UpdateAndQueryString at time t.
func (r *Rotator) UpdateAndQueryStringAt(t time.Time, key string, delta float64) float64 {
	gs, t := r.acquireAt(t)
	return r.updateAndQuery(gs, t, key, delta)
}

// TryUpdateAt is TryUpdate at time t.
func (r *Rotator) TryUpdateAt(t time.Time, key []byte, delta, limit float64) bool {
	return r.tryUpdate(&t, bytesView(key), delta, limit, nil, nil)
}

// TryUpdateStringAt is TryUpdateString at time t.
func (r *Rotator) TryUpdateStringAt(t time.Time, key string, delta, limit float64) bool {
	return r.tryUpdate(&t, key, delta, limit, nil, nil)
}

// TryUpdateAndQueryStringAt is TryUpdateStringAt that also returns the
// key's estimate right after the decision: for an admission, what the
// call itself left in the primary (its increment and every earlier
// one, none of a call that came after it: Sketch.Reserved), for a
// denial the primary's estimate read at the call's time.
func (r *Rotator) TryUpdateAndQueryStringAt(t time.Time, key string, delta, limit float64) (bool, float64) {
	var after float64
	ok := r.tryUpdate(&t, key, delta, limit, nil, &after)
	return ok, after
}

// Reservation is what an admitted TryReserve added to the generations it
// was admitted by, so that Refund can take it back (a limiter's Cancel, or
// a multi-window decision undone). The zero Reservation refunds nothing.
// It holds the receipts of the first two generations inline, so a
// reservation on a rotator of two generations (package limit's default)
// does not allocate; more generations allocate the rest. Refund one
// value only: a copy carries its own receipts of the first two
// generations (as a copy of a Sketch's Receipt does), so refunding two
// copies may give back twice where a cell still allows it (audit 59);
// package limit keeps one and refunds it once.
type Reservation struct {
	gs    *genSet
	first [2]Receipt // generations 0 and 1
	rest  []Receipt  // generations 2 and later
}

// rc returns the receipt of generation i.
func (res *Reservation) rc(i int) *Receipt {
	if i < len(res.first) {
		return &res.first[i]
	}
	return &res.rest[i-len(res.first)]
}

// TryReserveAt is TryUpdateAt that also returns a Reservation of what
// the admitted call added. It allocates only on a rotator of more than
// two generations (see Reservation).
func (r *Rotator) TryReserveAt(t time.Time, key []byte, delta, limit float64) (Reservation, bool) {
	var res Reservation
	ok := r.tryUpdate(&t, bytesView(key), delta, limit, &res, nil)
	return res, ok
}

// TryReserveStringAt is TryReserveAt for a string key.
func (r *Rotator) TryReserveStringAt(t time.Time, key string, delta, limit float64) (Reservation, bool) {
	var res Reservation
	ok := r.tryUpdate(&t, key, delta, limit, &res, nil)
	return res, ok
}

// Reserved is Sketch.Reserved for the primary generation res was
// admitted by (the one that decided): the key's estimate there right
// after the call, and its time. With non-negative histories (Lo >= 0, as
// package limit's), a promotion since only lowers what a Query reads (the
// next primary holds less history), so the answer is never below it; a
// forgotten negative history raises it instead (audit24). The zero
// Reservation's answer means nothing.
func (r *Rotator) Reserved(res *Reservation) (ms int64, v float64) {
	if res.gs == nil {
		return 0, 0
	}
	return res.gs.gens[0].Reserved(res.rc(0))
}

// Refund takes back what res added to each generation that is still
// live, cell by cell as Sketch.Refund does: exactly where the cell
// still holds the word the reservation stored, not at all where anything
// else wrote it since (an over-estimate, never another key's mass).
// Generations retired since need nothing. It reports whether everything
// still live was given back; a second Refund of res does nothing.
func (r *Rotator) Refund(res *Reservation) bool {
	if res.gs == nil {
		return true
	}
	all := true
	live := r.cur.Load().gens
	for i, s := range res.gs.gens {
		for _, l := range live {
			if l == s {
				all = s.Refund(res.rc(i)) && all
				break
			}
		}
	}
	return all
}
