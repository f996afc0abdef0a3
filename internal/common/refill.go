package common

import (
	"math"
	"time"
)

// PolicyRefills returns, for a limiter whose package registered a refill
// reader (package limit: a *limit.Limiter, *limit.Tier or *limit.Multi;
// the redis module: a *redis.Limiter), how long an empty key takes to get
// each of its policies' bursts back as the limiter holds it, in Policies'
// order; nil for anything else (0 for an Inf policy). httplimit reads it
// for RateLimit-Policy's w, which for an inexact policy is a little
// longer than Burst/Limit. It is not in limit.Policy so that Policy stays
// the comparable triple users build by hand. Each refill comes with the
// rate and burst it is for (read with it, from one version of the
// policy), so that a caller pairing it with a Policy read separately can
// tell a policy changed in between.
func PolicyRefills(l any) []Refill {
	for _, f := range refillers {
		if r := f(l); r != nil {
			return r
		}
	}
	return nil
}

// refillers are the registered refill readers, in registration order.
// Written only by package initialization, before any read.
var refillers []func(any) []Refill

// RegisterRefills adds f to the readers PolicyRefills asks: f returns
// the refills of a limiter of its package, nil for any other value. Call
// it only from an init function.
func RegisterRefills(f func(any) []Refill) { refillers = append(refillers, f) }

// Refill is one policy's refill time, with the rate and burst it is for.
type Refill struct {
	Limit  float64
	Burst  int
	Refill time.Duration
}

// SnapWhole returns the whole number within 4 ulps of x (x >= 0), else x:
// a refill time or window that is whole for a rate the limiter holds
// exactly comes out of a float division a few ulps off it, and rounded up
// from there would be a unit too long. Package limit snaps its refill in
// ms, httplimit the RateLimit-Policy window in seconds.
func SnapWhole(x float64) float64 {
	if r := math.Round(x); math.Abs(x-r) <= 4*(math.Nextafter(r, math.Inf(1))-r) {
		return r
	}
	return x
}
