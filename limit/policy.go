package limit

import "context"

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
