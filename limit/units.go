package limit

// maxRate is the largest finite limit New accepts: above it one token
// would be under 1e-19 ms of drain, below the precision a float32 cell
// keeps next to the millisecond steps of the clock.
const maxRate = 1e22

// Exact reports whether the limiter is exact: whether every decision,
// RetryAfter, ResetAfter and Remaining it gives for a key alone in its
// cells is that of the rational token bucket at millisecond resolution
// (see the package documentation, "Exactness"), under its current
// policy (New's, or SetLimit's and SetBurst's: see Tier.Exact), and
// RejectCost on the engine's grid (WithRejectCost). Inf is exact; the
// zero Limiter is not.
func (l *Limiter) Exact() bool {
	p := l.p.Load()
	return l.inf || p != nil && p.exact
}
