package redis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch"
)

// TestAudit61FallbackRandomWaits: LocalFallback with the server down,
// odd limits, each over Instances 1, 3 or 7, the SipHash Hasher on
// half of them, the clock stepping back at times: random requests (whole, fractional, the full Burst/N) at random
// times; after a denial, the same request retried exactly at its
// RetryAfter (or 1 ms later) is admitted, and at its ResetAfter the key
// is empty (a 0 request finds Remaining = Burst/N). Decision.RetryAfter
// (limiter.go): "never early"; the fallback's waits are only late.
func TestAudit61FallbackRandomWaits(t *testing.T) {
	t.Parallel() // its own server (or none), a fake clock: only the longest oracles run side by side
	e := newEnv(t, "rueidis", "standalone")
	ctx := context.Background()
	var rigs []fallbackRig
	for i, lim := range audit61Limits {
		for j, N := range []uint32{[]uint32{1, 3, 7}[i%3]} {
			rigs = append(rigs, newFallbackRig(t, e, fmt.Sprintf("a61fb%d_%d", i, j), lim, N, func(cfg *LimiterConfig) {
				if (i+j)%2 == 0 {
					cfg.Hasher, cfg.Seed = sketch.SipHash(), 0xA61
				}
			}))
		}
	}
	e.srv.kill()
	rng := rand.New(rand.NewPCG(61, 6161))
	checks := 0
	for _, r := range rigs {
		l, clk := r.l, r.clk
		fbB, fbR := divDown(r.lim.Burst, r.N), divDown(r.lim.Rate, r.N) // the fallback's, rounded down (audit 149)
		drainMs := fbB / fbR * 1000
		for p := range 25 {
			if rng.IntN(10) == 0 {
				clk.Set(clk.NowMillis() - 1 - rng.Int64N(3000)) // the clock steps back
			} else {
				clk.Advance(time.Duration(rng.Float64()*drainMs/float64(1+rng.IntN(30))) * time.Millisecond)
			}
			n := fallbackRequest(rng, fbB)
			now := clk.NowMillis()
			d, err := l.AllowN(ctx, "k", n)
			if !errors.Is(err, ErrDegraded) {
				t.Fatalf("want degraded: %v", err)
			}
			if d.Allowed || d.RetryAfter <= 0 {
				continue
			}
			switch rng.IntN(3) {
			case 0, 1:
				extra := int64(rng.IntN(2))
				clk.Set(now + d.RetryAfter.Milliseconds() + extra)
				d2, _ := l.AllowN(ctx, "k", n)
				checks++
				if !d2.Allowed {
					t.Errorf("%v /%d step %d: n=%v denied at %d with RetryAfter %v (Remaining %v); retried %d ms after it: denied, %+v; Decision.RetryAfter: \"never early\"",
						r.lim, r.N, p, n, now, d.RetryAfter, d.Remaining, extra, d2)
				}
			default:
				clk.Set(now + d.ResetAfter.Milliseconds())
				d2, _ := l.AllowN(ctx, "k", 0)
				checks++
				if d2.Remaining != fbB {
					t.Errorf("%v /%d step %d: denial at %d said ResetAfter %v; at it Remaining %v of %v: %+v", r.lim, r.N, p, now, d.ResetAfter, d2.Remaining, fbB, d2)
				}
			}
		}
	}
	t.Logf("checks %d", checks)
}
