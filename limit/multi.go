package limit

import (
	"fmt"
	"time"

	"github.com/lfgrudge/grudge/rotator"
)

// Multi checks several limiters (windows) in one all-or-nothing call: 10/s
// and 1000/h for one key, or per-user and per-tenant with one key each. A
// request is admitted only if every window admits it; a denial by any
// window debits none of them.
//
// How: each window in order takes its share with the rotator's
// TryReserve (strict, exact under contention); when one denies, the
// windows already taken are refunded (rotator.Refund: what is left of
// each increment, never another key's debt). A concurrent reader can
// therefore observe, for the moment between a take and its refund, the
// debit of a request that ends up denied: it can only make that reader
// deny more, never admit more. Refunded at the same millisecond, the
// take is given back exactly; later, the part already drained by time
// stays (the additive law), which again errs on the denying side.
//
// A Multi is safe for concurrent use. Its windows' own options apply
// except the mode: a Multi always decides strictly. Each window's
// RejectCost is charged only by the window that denies.
type Multi struct {
	ls []*Limiter
}

// NewMulti returns a Multi over the given windows, checked in order (put
// the most likely to deny first: a denial there takes nothing). It
// returns an error, prefixed "limit: ", if there are none or one is nil.
func NewMulti(windows ...*Limiter) (*Multi, error) {
	if len(windows) == 0 {
		return nil, fmt.Errorf("limit: NewMulti needs at least one window")
	}
	for i, l := range windows {
		if l == nil {
			return nil, fmt.Errorf("limit: NewMulti: window %d is nil", i)
		}
	}
	return &Multi{ls: append([]*Limiter(nil), windows...)}, nil
}

// Windows returns the limiters, in order.
func (m *Multi) Windows() []*Limiter { return append([]*Limiter(nil), m.ls...) }

// AllowN reports whether n requests are admitted at t by every window,
// for one key in all of them. It panics if n <= 0.
func (m *Multi) AllowN(t time.Time, key string, n int) bool {
	return m.DecideKeys(t, n, key).Allowed
}

// DecideKeys decides n requests at t against every window: with one key,
// that key in every window; otherwise keys[i] in window i (len(keys) must
// equal the number of windows, or it panics). The Decision is the
// denying window's (the first, in order) or, when admitted, the window
// with the fewest Remaining. It panics if n <= 0.
func (m *Multi) DecideKeys(t time.Time, n int, keys ...string) Decision {
	checkN("Multi.DecideKeys", n)
	if len(keys) != 1 && len(keys) != len(m.ls) {
		panic(fmt.Sprintf("limit: Multi.DecideKeys: want 1 or %d keys; got %d", len(m.ls), len(keys)))
	}
	key := func(i int) string {
		if len(keys) == 1 {
			return keys[0]
		}
		return keys[i]
	}
	var inline [4]rotator.Reservation
	taken := inline[:0]
	var best Decision
	for i, l := range m.ls {
		k := key(i)
		if l.r == nil {
			taken = append(taken, rotator.Reservation{})
			continue
		}
		ok := false
		var res rotator.Reservation
		if n <= l.burst {
			res, ok = l.r.TryReserveStringAt(t, k, float64(n), l.burstF)
		}
		if !ok {
			for j := range taken {
				if lj := m.ls[j]; lj.r != nil {
					lj.r.Refund(&taken[j])
				}
			}
			return l.decide(t, k, n, false).withDenial(l, t, k, n)
		}
		taken = append(taken, res)
	}
	for i, l := range m.ls {
		d := Decision{Allowed: true, Limit: l.limit, Burst: l.burst, Remaining: l.burst}
		if l.r != nil {
			debt := l.r.QueryStringAt(t, key(i))
			d.Remaining, d.ResetAfter = l.remaining(debt), l.drainTime(debt)
		}
		if i == 0 || d.Remaining < best.Remaining {
			best = d
		}
	}
	return best
}

// withDenial turns a Peek of a request that window l denied into its
// denial: charges l's RejectCost and recomputes RetryAfter with it.
func (d Decision) withDenial(l *Limiter, t time.Time, key string, n int) Decision {
	d.Allowed = false
	if d.Never {
		if l.rejectCost > 0 {
			debt := l.r.UpdateAndQueryStringAt(t, key, l.rejectCost)
			d.Remaining, d.ResetAfter = l.remaining(debt), l.drainTime(debt)
		}
		return d
	}
	debt := l.r.QueryStringAt(t, key)
	if l.rejectCost > 0 {
		debt = l.r.UpdateAndQueryStringAt(t, key, l.rejectCost)
	}
	d.RetryAfter = l.retryAfter(debt, float64(n))
	d.Remaining, d.ResetAfter = l.remaining(debt), l.drainTime(debt)
	return d
}
