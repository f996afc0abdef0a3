package redis

import (
	"context"
	"time"
)

// setRebaseAt lowers the epoch-rebase threshold so tests reach it
// without waiting 2^31 ms.
func (s *Sketch) setRebaseAt(ms int64) { s.rebaseAt = ms }

// debtTokens is the server's debt for key in tokens: the sketch counts
// in the limiter's units, Hi of them being Burst tokens.
func (l *Limiter) debtTokens(ctx context.Context, key string) (float64, error) {
	q, err := l.Sketch().Query(ctx, key)
	return q * l.limit.Burst / l.Sketch().Config().Hi, err
}

// rebaseLate bounds how late the server may make a wait of w so that it is
// never early across its rebases (sketch.lua's rebaseSlack) at the
// production threshold; rebaseLateAt at a threshold of rebaseAt ms.
func rebaseLate(w time.Duration) time.Duration { return rebaseLateAt(w, defaultRebaseAt) }

// rebaseLateAt: rebaseSlackBound, doubled for the tests' margin.
func rebaseLateAt(w time.Duration, rebaseAt int64) time.Duration {
	return time.Duration(2*rebaseSlackBound(w.Milliseconds(), rebaseAt)) * time.Millisecond
}
