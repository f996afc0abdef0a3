package redis

import (
	"strconv"
	"testing"
)

// TestAudit55HTTPLimitWindowRedisSweep: for Redis limiters at exact and
// inexact rates, small and above-2^24 bursts, a full burst exactly w
// seconds (RateLimit-Policy) after emptying the bucket is admitted
// (httplimit doc.go: w is "the time to refill it from empty as the
// limiter holds it"; the redis refill registered through
// common.RegisterRefills).
func TestAudit55HTTPLimitWindowRedisSweep(t *testing.T) {
	lims := []Limit{
		PerSecond(0.7, 3), PerSecond(1.0/3, 5), PerSecond(3, 7), PerSecond(1/0.14, 50),
		PerSecond(0.3, 1<<24+1), PerSecond(7, 1<<25+3), PerSecond(1e6, 1<<30), PerSecond(0.123456789, 99999),
	}
	forEachClient(t, func(t *testing.T, e *env) {
		for i, lim := range lims {
			pol, code, ra, d := audit52Window(t, e, "a55w"+strconv.Itoa(i), lim)
			if code != 200 {
				t.Errorf("%v: RateLimit-Policy %s; a full burst w seconds after emptying: %d (Retry-After %q, %+v)", lim, pol, code, ra, d)
			} else {
				t.Logf("%v: %s ok", lim, pol)
			}
		}
	})
}
