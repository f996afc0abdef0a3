package limit

import (
	"context"
	"math"

	"github.com/lfgrudge/grudge/internal/atom"
	"github.com/lfgrudge/grudge/internal/common"
)

// Policy describes one token bucket a limiter enforces: its name
// (WithName), rate and burst. httplimit announces it in the
// RateLimit-Policy header field.
type Policy struct {
	Name  string
	Limit Limit
	Burst int
}

// Policies returns the limiter's one Policy; nil for a nil or zero
// Limiter.
func (l *Limiter) Policies() []Policy {
	if l == nil || l.tb == nil {
		return nil
	}
	return l.p.Load().policies()
}

// DecideContext is DecideN at the clock's reading, in the shape of a
// limiter that can fail (httplimit.Limiter, the Redis module's Limiter):
// the error is always nil and ctx is not used. It panics if n <= 0.
func (l *Limiter) DecideContext(_ context.Context, key string, n int) (Decision, error) {
	return l.DecideN(l.Now(), key, n), nil
}

// Policies returns the windows' policies, in order; nil for a nil or
// zero Multi.
func (m *Multi) Policies() []Policy {
	if m == nil {
		return nil
	}
	var p []Policy
	for _, l := range m.ls {
		p = append(p, l.Policies()...)
	}
	return p
}

// DecideContext is DecideKeys at the first window's clock reading with
// one key for every window, in the shape of a limiter that can fail
// (httplimit.Limiter): the error is always nil and ctx is not used. It
// panics if n <= 0.
func (m *Multi) DecideContext(_ context.Context, key string, n int) (Decision, error) {
	if len(m.ls) == 0 {
		panic("limit: zero Multi; use NewMulti")
	}
	return m.DecideKeys(m.ls[0].Now(), n, key), nil
}

func init() { common.RegisterRefills(policyRefills) }

// policyRefills is common.PolicyRefills for this package's limiters.
func policyRefills(x any) []common.Refill {
	switch v := x.(type) {
	case *Limiter:
		if v != nil && v.tb != nil {
			return []common.Refill{v.refill(v.p.Load())}
		}
	case *Tier:
		if v != nil && v.l != nil {
			return []common.Refill{v.l.refill(&v.p)}
		}
	case *Multi:
		if v != nil {
			var r []common.Refill
			for _, l := range v.ls {
				r = append(r, policyRefills(l)...)
			}
			return r
		}
	}
	return nil
}

// refill is how long an empty key takes to get p's whole burst back, as
// ResetAfter counts a full burst's debt: whole ms, rounded up (a quotient
// within 4 ulps of a whole ms is that ms, common.SnapWhole: the float
// division of an exact policy's units; a relative 1e-9 rounded long
// windows down, audit 52). The count-min stores that debt in a float32
// cell, rounded up: above 2^24 units that is more than the burst, and the
// refill is the rounded debt's (audit 52: Every(3s) x 999999 announced
// 0.2 s less than a full burst took to come back). 0 without an engine
// (Inf) or a burst. It comes with p's rate and burst.
func (l *Limiter) refill(p *params) common.Refill {
	r := common.Refill{Limit: float64(p.limit), Burst: p.burst}
	if l.none() || p.burst <= 0 {
		return r
	}
	debt := p.burstU
	if l.b == nil {
		debt = float64(atom.RoundUp(debt))
	}
	r.Refill = l.ms(math.Ceil(common.SnapWhole(debt / l.drain)))
	return r
}
