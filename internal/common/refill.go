package common

import "time"

// PolicyRefills returns, for a limiter of package limit (a *limit.Limiter,
// *limit.Tier or *limit.Multi), how long an empty key takes to get each of
// its policies' bursts back as the limiter holds them, in Policies'
// order; nil for anything else (0 for an Inf policy). Package limit sets
// it when it is initialized; httplimit reads it for RateLimit-Policy's w,
// which for an inexact policy is a little longer than Burst/Limit. It is
// not in limit.Policy so that Policy stays the comparable triple users
// build by hand. Each refill comes with the rate and burst it is for (read
// with it, from one version of the policy), so that a caller pairing it
// with a Policy read separately can tell a policy changed in between.
var PolicyRefills func(l any) []Refill

// Refill is one policy's refill time, with the rate and burst it is for.
type Refill struct {
	Limit  float64
	Burst  int
	Refill time.Duration
}
