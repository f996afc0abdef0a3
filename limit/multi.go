package limit

import (
	"fmt"
	"math"
	"time"
)

// Multi checks several limiters (windows) in one all-or-nothing call: 10/s
// and 1000/h for one key, or per-user and per-tenant with one key each. A
// request is admitted only if every window admits it; a denial by any
// window gives back what the windows before it took (all of it, unless a
// concurrent request touched the same cells, or made a later window deny
// after a take that cannot come back: see below).
//
// How: each window in order takes its share as a strict ReserveN does
// (exact under contention); when one denies, the
// windows already taken are refunded (Cancel's rule: exactly where
// nothing else touched the key's cells since, or, on the count-min, only
// in the same millisecond below MaxDebt; otherwise the take stays, on
// the safe side; never another key's debt). Every window after the
// first is read before anything is taken, and a request one of them
// denies takes nothing (the first window in order that denies on that
// read is the one that denies, and charges its RejectCost): a take that
// filled a window to MaxDebt (with MaxDebt = burst, any take that empties
// it) never comes back, a conservative count-min's never does (see
// WithConservativeUpdate), and a Buckets take fails to whenever another
// request of the key wrote the window's cells on top of it, so
// concurrent denials of one key would
// otherwise keep their takes. What remains is a race: another request
// (of any key whose cells it shares) can fill a later window between
// that read and the window's take, which then denies after the windows
// before it took, and a take that cannot come back (as above, or one
// that another caller's admission landed on) stays, on the safe side:
// the key is denied more for up to that take's drain, never admitted
// more (audit 85 forced it with MaxDebt = burst). A concurrent reader can therefore
// observe, for the moment between a take and its refund, the debit of a
// request that ends up denied: it can only make that reader deny more,
// never admit more.
//
// A decision of a Multi of at most four windows does not allocate when
// every count-min window keeps at most two generations (the default);
// each window with more allocates the receipts of its younger
// generations, and a fifth window on allocates the decision's
// bookkeeping.
//
// A Multi is safe for concurrent use. Its windows' own options apply
// except the mode: a Multi always decides strictly. Each window's
// RejectCost is charged only by the window that denies. The zero Multi
// is not usable: its methods panic with "limit: zero Multi; use
// NewMulti".
type Multi struct {
	ls     []*Limiter
	counts counters // the Multi's decisions since NewMulti, for Stats
}

// NewMulti returns a Multi over the given windows, checked in order (put
// the most likely to deny first: a denial there takes nothing). It
// returns a *sketch.ConfigError, prefixed "limit: ", if there are none or
// one is nil or a zero Limiter.
func NewMulti(windows ...*Limiter) (*Multi, error) {
	if len(windows) == 0 {
		return nil, bad("Windows", 0, "NewMulti needs at least one window")
	}
	for i, l := range windows {
		if l == nil || l.tb == nil {
			return nil, bad("Windows", i, "NewMulti: window %d is nil or a zero Limiter", i)
		}
	}
	return &Multi{ls: append([]*Limiter(nil), windows...)}, nil
}

// Windows returns the limiters, in order.
func (m *Multi) Windows() []*Limiter { return append([]*Limiter(nil), m.ls...) }

// Allow is AllowN at the first window's clock reading with n = 1.
func (m *Multi) Allow(key string) bool {
	if len(m.ls) == 0 {
		panic("limit: zero Multi; use NewMulti")
	}
	return m.AllowN(m.ls[0].Now(), key, 1)
}

// AllowN reports whether n requests are admitted at t by every window,
// for one key in all of them. It panics if n <= 0.
func (m *Multi) AllowN(t time.Time, key string, n int) bool {
	return m.DecideKeys(t, n, key).Allowed
}

// DecideKeys decides n requests at t against every window: with one key,
// that key in every window; otherwise keys[i] in window i (len(keys) must
// equal the number of windows, or it panics). It panics if n <= 0.
//
// The Decision is the conjunction of the windows': Remaining is the
// least, ResetAfter and NextAfter the time when the window(s) holding
// that least have grown (NextAfter 0 when one of them is full: the least
// then never grows), RetryAfter (on a denial) the time when every
// window admits the request, so a retry at t+RetryAfter is admitted by
// all of them (if nothing else happens to the keys) and one 1 ms earlier
// is not; Never if n exceeds any window's burst. Limit and Burst are
// those of the window that sets Remaining (on an admission) or
// RetryAfter (on a denial), and Policy its name.
func (m *Multi) DecideKeys(t time.Time, n int, keys ...string) Decision {
	d := m.decideKeys(t, n, keys...)
	m.counts.count(d.Allowed)
	return d
}

func (m *Multi) decideKeys(t time.Time, n int, keys ...string) Decision {
	checkN("Multi.DecideKeys", n)
	if len(m.ls) == 0 {
		panic("limit: zero Multi; use NewMulti")
	}
	if len(keys) != 1 && len(keys) != len(m.ls) {
		panic(fmt.Sprintf("limit: Multi.DecideKeys: want 1 or %d keys; got %d", len(m.ls), len(keys)))
	}
	key := func(i int) string {
		if len(keys) == 1 {
			return keys[0]
		}
		return keys[i]
	}
	// Each window's policy, read once: a SetLimit racing the decision
	// is seen wholly or not at all.
	var pin [4]*params
	ps := pin[:0]
	for _, l := range m.ls {
		ps = append(ps, l.p.Load())
	}
	var inline [4]receipt
	taken := inline[:0]
	denied := m.precheck(ps, t, n, key)
	if denied >= 0 {
		if p := ps[denied]; p.rejectU > 0 {
			m.ls[denied].addAt(t, key(denied), p.rejectU)
		}
	}
	for i, l := range m.ls {
		if denied >= 0 {
			break
		}
		if l.none() {
			taken = append(taken, receipt{})
			continue
		}
		ok := false
		var res receipt
		p := ps[i]
		if n <= p.burst {
			res, ok = l.reserveAt(t, key(i), p.cost(float64(n)), p.burstU)
		}
		if !ok {
			for j := range taken {
				if lj := m.ls[j]; !lj.none() {
					lj.refund(&taken[j])
				}
			}
			denied = i
			if p.rejectU > 0 {
				l.addAt(t, key(i), p.rejectU)
			}
			break
		}
		taken = append(taken, res)
	}
	// Every window's state after the decision (a read).
	first := ps[max(denied, 0)]
	d := Decision{Limit: first.limit, Burst: first.burst, Policy: first.name, Remaining: math.MaxInt}
	// An Inf window never binds: it keeps no state and would report its
	// whole burst as Remaining. It names the Decision only when every
	// window is Inf.
	allInf := true
	for _, l := range m.ls {
		allInf = allInf && l.inf
	}
	for i, l := range m.ls {
		if l.inf && !allInf {
			continue
		}
		w := l.state(ps[i], t, key(i), n)
		switch {
		case denied < 0:
			if w.Remaining < d.Remaining {
				d.Limit, d.Burst, d.Policy = w.Limit, w.Burst, w.Policy
			}
		case w.Never:
			if !d.Never {
				d.Never, d.RetryAfter, d.Limit, d.Burst, d.Policy = true, InfDuration, w.Limit, w.Burst, w.Policy
			}
		case !d.Never && (w.RetryAfter > d.RetryAfter || i == denied && d.RetryAfter == 0):
			d.RetryAfter, d.Limit, d.Burst, d.Policy = w.RetryAfter, w.Limit, w.Burst, w.Policy
		}
		d.Remaining, d.ResetAfter, d.NextAfter = combine(d, w)
	}
	if d.Allowed = denied < 0; !d.Allowed && d.RetryAfter == 0 {
		// Every window fits the request now: the denial raced a drain or
		// a refund. As a single window does, say 1 ms.
		d.RetryAfter = time.Millisecond
	}
	return d
}

// precheck returns the first window, in order, that denies n to its key
// on a read, when a window after the first one does; or -1. A take
// comes back only where nothing else has written the key's cells since
// (Buckets: see Reservation.Cancel), never under the count-min's
// conservative update, and never one that filled a window to MaxDebt
// (with MaxDebt = burst, any take that empties it), so a request that a
// later window denies must take nothing from the earlier ones: reading
// the later windows first, it takes nothing. The earlier windows are
// then read too, so that the denying window, the one whose RejectCost
// is charged, is the first in order that denies, whatever the engines.
func (m *Multi) precheck(ps []*params, t time.Time, n int, key func(int) string) int {
	denies := func(i int) bool {
		l, p := m.ls[i], ps[i]
		return !l.none() && (n > p.burst || l.queryAt(t, key(i))+p.cost(float64(n)) > p.burstU)
	}
	for i := 1; i < len(m.ls); i++ {
		if denies(i) {
			for j := range i {
				if denies(j) {
					return j
				}
			}
			return i
		}
	}
	return -1
}

// state returns what the key has at t under the policy p, without a
// write: Remaining, ResetAfter and NextAfter of its debt now, Allowed
// whether n more fit, and if not RetryAfter (or Never).
func (l *Limiter) state(p *params, t time.Time, key string, n int) Decision {
	d := Decision{Limit: p.limit, Burst: p.burst, Policy: p.name}
	if l.none() {
		d.Allowed, d.Remaining = l.unset(), p.burst
		return d
	}
	debt := l.queryAt(t, key)
	gap := l.gap(t)
	nU := p.cost(float64(n))
	switch {
	case n > p.burst:
		d.Never, d.RetryAfter = true, InfDuration
	case debt+nU <= p.burstU:
		d.Allowed = true
	default:
		d.RetryAfter = plus(gap, l.ms(max(l.msUntilFits(p, debt, nU), 1)))
	}
	l.fill(p, &d, debt, gap)
	return d
}

// combine returns the Remaining, ResetAfter and NextAfter of two windows'
// Decisions taken together: the least Remaining; the later ResetAfter
// (both full); and the time the least Remaining grows: the later
// NextAfter of the windows that hold it, or 0 if one of them is full
// (NextAfter 0): that least never grows, and a next token promised by
// the other window would be false (audit 52).
func combine(a, b Decision) (int, time.Duration, time.Duration) {
	reset := max(a.ResetAfter, b.ResetAfter)
	switch {
	case a.Remaining < b.Remaining:
		return a.Remaining, reset, a.NextAfter
	case b.Remaining < a.Remaining:
		return b.Remaining, reset, b.NextAfter
	case a.NextAfter == 0 || b.NextAfter == 0:
		return a.Remaining, reset, 0
	}
	return a.Remaining, reset, max(a.NextAfter, b.NextAfter)
}
