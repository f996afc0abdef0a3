package redis

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestFallbackWaitsExact: LocalFallback with the server down, at limits
// that count in tokens (no exact units) and whose drain a float64 does
// not hold, over 1, 3 and 7 instances. After every denial the same
// request is denied 1 ms before its RetryAfter and admitted at it, and
// after every decision the key is empty at its ResetAfter and not 1 ms
// before: each wait is the least one, as the fallback's own TryUpdate
// decays the key's cells. The clock only moves forward and every drain
// is far below the horizon sweep's 2^29 ms, so no slack applies.
//
// Before the waits came from the cells (core.Outlook.FitsIn) they
// were computed by draining Query's decayed debt, which rounds twice:
// at 1000/13 per s over 3 instances a retry at RetryAfter was now and
// then denied, owing an ulp of a token (the limitation Decision.RetryAfter
// documented until stop 53).
func TestFallbackWaitsExact(t *testing.T) {
	t.Parallel() // its own server, killed at once; fake clocks
	e := newEnv(t, "rueidis", "standalone")
	ctx := context.Background()
	limits := []Limit{
		PerSecond(1000.0/13, 3e6), // Every(13ms), huge burst: tokens
		PerSecond(0.3, 100001),    // slow
		PerSecond(10, 100.0/3),    // Burst not a float32
		PerSecond(math.Pi, 1e5+0.7),
		PerSecond(1000*math.E, 1e6+0.1),
		PerSecond(7.0/3, 1e5),
	}
	var rigs []fallbackRig
	for i, lim := range limits {
		for _, N := range []uint32{1, 3, 7} {
			r := newFallbackRig(t, e, fmt.Sprintf("fbw%d_%d", i, N), lim, N, nil)
			if r.l.fbSlack != 0 {
				t.Fatalf("%v /%d: sweep slack %v; the test needs none", lim, N, r.l.fbSlack)
			}
			rigs = append(rigs, r)
		}
	}
	e.srv.kill()
	rng := rand.New(rand.NewPCG(53, 5353))
	retries, resets := 0, 0
	for _, r := range rigs {
		l, clk := r.l, r.clk
		fbB, fbR := divDown(r.lim.Burst, r.N), divDown(r.lim.Rate, r.N) // the fallback's, rounded down (audit 149)
		drainMs := fbB / fbR * 1000
		allow := func(n float64) Decision {
			d, err := l.AllowN(ctx, "k", n)
			if !errors.Is(err, ErrDegraded) {
				t.Fatalf("want degraded: %v", err)
			}
			return d
		}
		for p := range 60 {
			clk.Advance(time.Duration(rng.Float64()*drainMs/float64(1+rng.IntN(40))) * time.Millisecond)
			n := fallbackRequest(rng, fbB)
			now := clk.NowMillis()
			d := allow(n)
			if rng.IntN(2) == 0 && d.ResetAfter > 0 {
				// The key's debt is 0 at ResetAfter, not a ms before (read
				// from the fallback itself: Remaining, Burst/N less the
				// debt, rounds a debt of an ulp away). A peek (n = 0) and
				// a Query only read, so the state stays as it is.
				reset := d.ResetAfter.Milliseconds()
				clk.Set(now + reset - 1)
				if debt := l.fallback.QueryString("k"); debt == 0 {
					t.Errorf("%v /%d step %d: ResetAfter %v, but the debt is 0 1 ms before it", r.lim, r.N, p, d.ResetAfter)
				}
				clk.Set(now + reset)
				if a := allow(0); a.Remaining != fbB || l.fallback.QueryString("k") != 0 {
					t.Errorf("%v /%d step %d: at ResetAfter %v Remaining %v of %v, debt %v", r.lim, r.N, p, d.ResetAfter, a.Remaining, fbB, l.fallback.QueryString("k"))
				}
				resets++
				continue
			}
			if d.Allowed || d.RetryAfter <= 0 {
				continue
			}
			// Denied 1 ms before RetryAfter (a denial writes nothing),
			// admitted at it.
			ra := d.RetryAfter.Milliseconds()
			clk.Set(now + ra - 1)
			if b := allow(n); b.Allowed {
				t.Errorf("%v /%d step %d: n=%v RetryAfter %v, but admitted 1 ms before it", r.lim, r.N, p, n, d.RetryAfter)
				continue
			}
			clk.Set(now + ra)
			if a := allow(n); !a.Allowed {
				t.Errorf("%v /%d step %d: n=%v denied with RetryAfter %v (Remaining %v); denied again at it: %+v; Decision.RetryAfter: \"never early\"",
					r.lim, r.N, p, n, d.RetryAfter, d.Remaining, a)
			}
			retries++
		}
	}
	if retries < 100 || resets < 100 {
		t.Errorf("checked %d retries and %d resets; want at least 100 of each", retries, resets)
	}
	t.Logf("checked %d retries, %d resets", retries, resets)
}

// fallbackRequest draws a request for a fallback of Burst/N fbB: a whole
// share of it, a fraction of a third of it, all of it, or a whole tenth.
func fallbackRequest(rng *rand.Rand, fbB float64) float64 {
	var n float64
	switch rng.IntN(4) {
	case 0:
		n = math.Max(1, math.Floor(rng.Float64()*fbB))
	case 1:
		n = rng.Float64() * fbB / 3
	case 2:
		n = fbB
	default:
		n = math.Max(1, math.Floor(rng.Float64()*fbB/10))
	}
	return math.Min(n, fbB)
}

// fallbackRig is a LocalFallback limiter over N instances on its own
// fake clock (set to 1,000,000 ms), made on e's server without a check:
// kill the server and every call is the fallback's.
type fallbackRig struct {
	l   *Limiter
	clk *sketchtest.FakeClock
	lim Limit
	N   uint32
}

// newFallbackRig makes a fallbackRig named name; edit, if not nil,
// changes its configuration first.
func newFallbackRig(t *testing.T, e *env, name string, lim Limit, N uint32, edit func(*LimiterConfig)) fallbackRig {
	t.Helper()
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	cfg := LimiterConfig{Name: name, Limit: lim, Clock: clk,
		Policy: LocalFallback, Instances: N, ServerCheck: CheckSkip, Timeout: time.Second}
	if edit != nil {
		edit(&cfg)
	}
	return fallbackRig{e.limiter(t, cfg), clk, lim, N}
}
