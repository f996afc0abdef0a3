package redis

import "context"

// setRebaseAt lowers the epoch-rebase threshold so tests reach it
// without waiting 2^31 ms.
func (s *Sketch) setRebaseAt(ms int64) { s.rebaseAt = ms }

// debtTokens is the server's debt for key in tokens: the sketch counts
// in the limiter's units, Hi of them being Burst tokens.
func (l *Limiter) debtTokens(ctx context.Context, key string) (float64, error) {
	q, err := l.Sketch().Query(ctx, key)
	return q * l.limit.Burst / l.Sketch().Config().Hi, err
}
