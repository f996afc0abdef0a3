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
// How: each window takes its share as a strict ReserveN does (exact
// under contention); when one denies, the windows already taken are
// refunded (Cancel's rule: exactly where nothing else touched the key's
// cells since, or, on the count-min, only in the same millisecond below
// MaxDebt; otherwise the take stays, on the safe side; never another
// key's debt). The windows take in order, except that those whose take
// may not come back (a conservative count-min, a policy whose burst is
// its limiter's MaxDebt) take after the others. Every window but the
// one that takes first is read before anything is taken, and a request
// one of them denies takes nothing (the first window in order that
// denies is the one that denies, and charges its RejectCost); windows
// that are one limiter with one key are read with all of their costs. A
// take that filled a window to MaxDebt (with MaxDebt = burst, any take
// that empties it) never comes back, a conservative count-min's never
// does (see WithConservativeUpdate), a count-min take that left a cell
// shared with other keys at the clamp does not (Reservation.Cancel),
// and a Buckets take fails to whenever another request of the key wrote
// the window's cells on top of it, so concurrent denials of one key
// would otherwise keep their takes.
//
// What remains is a race: another request (of any key whose cells it
// shares) can fill a window between that read and the window's take,
// which then denies (and charges its RejectCost) after the windows
// before it in that order took, and a take among them that cannot come
// back stays, on the safe side: one that another caller's admission
// landed on, one that left a shared count-min cell at the clamp, and
// each of the kind that takes last, when the denying window is of that
// kind too. Without a race, too, a window can deny at its take when its
// key shares a count-min cell with another window's key in the same
// limiter, a cell that window's take raised after the read. A key is
// then denied more for up to that take's drain, never admitted more.
// A concurrent reader can therefore observe, for the
// moment between a take and its refund, the debit of a request that ends
// up denied: it can only make that reader deny more, never admit more.
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
	shared bool     // a limiter is two windows or more (precheck sums their costs)
	counts counters // the Multi's decisions since NewMulti, for Stats
}

// NewMulti returns a Multi over the given windows, checked in order (the
// first that denies is the one that charges its RejectCost). It
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
	m := &Multi{ls: append([]*Limiter(nil), windows...)}
	for i, l := range m.ls {
		for _, o := range m.ls[:i] {
			m.shared = m.shared || o == l
		}
	}
	return m, nil
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
// is not; Never if n exceeds any window's burst. Windows that are one
// limiter with one key count together: a request takes n from that
// limiter once per such window, so its Remaining counts requests of that
// many tokens, and Never holds when their sum exceeds its burst. Limit
// and Burst are
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
	taken := inline[:0] // taken[k]: the receipt of window order[k]
	var byOrder [4]int
	order := m.takeOrder(ps, byOrder[:0])
	denied := m.precheck(ps, t, n, key, order[0])
	if denied >= 0 {
		if p := ps[denied]; p.rejectU > 0 {
			m.ls[denied].addAt(t, key(denied), p.rejectU)
		}
		order = order[:0]
	}
	for _, i := range order {
		l := m.ls[i]
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
			for k := range taken {
				if lk := m.ls[order[k]]; !lk.none() {
					lk.refund(&taken[k])
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
		k := 1 // the windows that are l with key(i): each request takes n from each
		if m.shared {
			k = 0
			for j, lj := range m.ls {
				if lj == l && key(j) == key(i) {
					k++
				}
			}
		}
		w := l.state(ps[i], t, key(i), n, k)
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

// takeOrder appends to order the windows' indices in the order the
// windows take: first those whose take comes back whenever nothing else
// wrote the key's cells since, in order, then those whose take may not
// (a conservative count-min: none comes back; a policy whose burst is
// the limiter's MaxDebt: a take that empties it fills the cells to
// their clamp, where no roll-back can tell what the take added), in
// order. A later window filled between the precheck and its take then
// finds nothing unrefundable taken before it, unless two windows are of
// the second kind.
func (m *Multi) takeOrder(ps []*params, order []int) []int {
	for i, l := range m.ls {
		if !l.keepsTakes(ps[i]) {
			order = append(order, i)
		}
	}
	if len(order) < len(m.ls) {
		for i, l := range m.ls {
			if l.keepsTakes(ps[i]) {
				order = append(order, i)
			}
		}
	}
	return order
}

// keepsTakes reports whether a strict take under p may not come back:
// see takeOrder.
func (l *Limiter) keepsTakes(p *params) bool {
	return l.cu || !l.none() && p.burstU >= l.maxDebtU
}

// precheck returns the first window, in order, that denies n to its key
// on a read, when a window other than skip (the one that takes first,
// order[0]) does; or -1. A take comes back only where nothing
// else has written the key's cells since (Buckets: see
// Reservation.Cancel), never under the count-min's conservative update,
// and never one that filled a window to MaxDebt (with MaxDebt = burst,
// any take that empties it), so a request that a window denies must take
// nothing from the others: reading every window but the one that takes
// first, it takes nothing, and that one takes nothing when it denies.
// The windows before a denying one are then read too, so that the
// denying window, the one whose RejectCost is charged, is the first in
// order that denies, whatever the engines and the take order. Windows
// that are one limiter with one key take from one debt: each is read
// with all of their costs.
func (m *Multi) precheck(ps []*params, t time.Time, n int, key func(int) string, skip int) int {
	denies := func(i int) bool {
		l, p := m.ls[i], ps[i]
		if l.none() {
			return false
		}
		if n > p.burst {
			return true
		}
		cost := p.cost(float64(n))
		if m.shared {
			for j, lj := range m.ls {
				if j != i && lj == l && key(j) == key(i) {
					cost += ps[j].cost(float64(n))
				}
			}
		}
		return l.queryAt(t, key(i))+cost > p.burstU
	}
	for i := range m.ls {
		if i != skip && denies(i) {
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
// whether n more fit, and if not RetryAfter (or Never). A request takes
// n tokens k times (k windows of the Multi are this limiter with this
// key): Never when n x k exceeds the burst, RetryAfter until n x k fit,
// and Remaining counts requests of k tokens.
func (l *Limiter) state(p *params, t time.Time, key string, n, k int) Decision {
	d := Decision{Limit: p.limit, Burst: p.burst, Policy: p.name}
	if l.none() {
		d.Allowed, d.Remaining = l.unset(), p.burst
		return d
	}
	debt := l.queryAt(t, key)
	gap := l.gap(t)
	nU := p.cost(float64(n) * float64(k)) // both whole: exact below 2^53
	switch {
	case n > p.burst/k: // n x k > burst, without forming n x k (it may wrap)
		d.Never, d.RetryAfter = true, InfDuration
	case debt+nU <= p.burstU:
		d.Allowed = true
	default:
		d.RetryAfter = plus(gap, l.ms(max(l.msUntilFits(p, debt, nU), 1)))
	}
	l.fillK(p, &d, debt, gap, k)
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
