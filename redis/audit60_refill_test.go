package redis

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/common"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// audit60Limits are odd rates and bursts: Every(999ms) on both sides of
// its exact-units bound (16793 tokens of 999 units), 0.3/s, fractional
// and float32-unrepresentable bursts, tiny rates and the largest drain.
var audit60Limits = []Limit{
	PerSecond(1000.0/999, 10), PerSecond(1000.0/999, 16793), PerSecond(1000.0/999, 16794),
	PerSecond(1000.0/999, 1<<24+1), PerSecond(1000.0/999, 1e9+1),
	PerSecond(0.3, 7), PerSecond(0.3, 2.5), PerSecond(0.3, 30000001), PerSecond(0.3, 1e9+1),
	PerSecond(1, 9e9), PerSecond(1e-6, 1000.3), PerSecond(0.123456789, 1<<24+1),
	PerSecond(1e6, 1e15+1), PerSecond(1000.0/7, 3.3),
}

// audit60Drain builds a limiter for lim on e (fake clock, small sketch so
// that rebases are cheap), takes the full Burst from a fresh key at t0,
// and returns the limiter, its clock and t0.
func audit60Drain(t *testing.T, e *env, name string, lim Limit, cache bool) (*Limiter, *sketchtest.FakeClock, int64) {
	t.Helper()
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	cfg := LimiterConfig{Name: name, Limit: lim, Clock: clk, Timeout: 5 * time.Second,
		Levels: 4, CellsPerLevel: 64}
	if cache {
		cfg.DenyCacheCells, cfg.PreCheck = 256, true
	}
	l := e.limiter(t, cfg)
	ctx := context.Background()
	// A write on another key first: the generation's epoch is now.
	if err := l.Sketch().Update(ctx, "a60-other", 0); err != nil {
		t.Fatal(err)
	}
	t0 := clk.NowMillis()
	d, err := l.AllowN(ctx, "a60-key", lim.Burst)
	if err != nil || !d.Allowed {
		t.Fatalf("%v: the full burst from a fresh key: %+v, %v", lim, d, err)
	}
	return l, clk, t0
}

// audit60StepTo moves clk to ms in steps of at most 2^30 ms, writing
// another key (delta 0) on the server at each step so that every rebase
// of the generation that can come (one per 2^30 ms at most) comes.
func audit60StepTo(t *testing.T, l *Limiter, clk *sketchtest.FakeClock, ms int64) int {
	t.Helper()
	ctx := context.Background()
	writes := 0
	for clk.NowMillis() < ms {
		next := min(ms, clk.NowMillis()+1<<30)
		clk.Set(next)
		if next < ms {
			if err := l.Sketch().Update(ctx, "a60-other", 0); err != nil {
				t.Fatal(err)
			}
			writes++
		}
	}
	return writes
}

// TestAudit60RefillCoversServerRefill: the refill the Limiter registers
// (common.RegisterRefills; httplimit's RateLimit-Policy w is its ceiling
// in seconds) is never shorter than the real one: a key drained fully
// (the whole Burst taken) gets the whole Burst back exactly Refill after,
// with every rebase of the generation (production threshold, 2^31 ms)
// that can come meanwhile coming; and the server's RetryAfter for the
// whole Burst (and its ResetAfter), asked right after draining, is never
// above Refill.
func TestAudit60RefillCoversServerRefill(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	ctx := context.Background()
	for i, lim := range audit60Limits {
		for _, cache := range []bool{false, true} {
			l, clk, t0 := audit60Drain(t, e, fmt.Sprintf("a60r%d%v", i, cache), lim, cache)
			refs := common.PolicyRefills(l)
			if len(refs) != 1 || refs[0].Refill != l.refill().Refill {
				t.Fatalf("%v: PolicyRefills %+v; refill %+v", lim, refs, l.refill())
			}
			ref := refs[0].Refill
			d, err := l.AllowN(ctx, "a60-key", lim.Burst)
			if err != nil || d.Allowed {
				t.Fatalf("%v: a second full burst at once: %+v, %v", lim, d, err)
			}
			// A deny cache's answer (it learns the key at its cap) may be
			// late by its local sweeps' slack (LimiterConfig's doc),
			// and by 1 ms of its own rounding of the cap's excess.
			bound := ref
			if cache {
				bound += l.cache.slack + time.Millisecond
			}
			if d.ResetAfter > bound {
				t.Errorf("%v: the server's ResetAfter right after draining is %v, above the registered Refill %v", lim, d.ResetAfter, ref)
			}
			if d.RetryAfter > bound {
				t.Errorf("%v: the server's RetryAfter for the whole Burst right after draining is %v, above the registered Refill %v", lim, d.RetryAfter, ref)
			}
			writes := audit60StepTo(t, l, clk, t0+ref.Milliseconds())
			d, err = l.AllowN(ctx, "a60-key", lim.Burst)
			if err != nil {
				t.Fatal(err)
			}
			if !d.Allowed {
				t.Errorf("%v (deny cache %v): the whole Burst exactly Refill (%v) after draining the key (%d rebasing writes meanwhile): denied, RetryAfter %v, Remaining %v, %+v; httplimit doc: w is the time to refill it from empty as the limiter holds it",
					lim, cache, ref, writes, d.RetryAfter, d.Remaining, l.Stats())
			} else {
				t.Logf("%v (deny cache %v): Refill %v (burst/rate %.3f s), %d writes: admitted", lim, cache, ref, lim.Burst/lim.Rate, writes)
			}
		}
	}
}

// TestAudit60HTTPLimitWindowOddRates: behind httplimit (audit 52's
// helper), a full burst (floor(Burst) tokens) exactly RateLimit-Policy's
// w seconds after emptying the bucket is admitted, for every limit of
// audit60Limits whose whole burst is at least 1.
func TestAudit60HTTPLimitWindowOddRates(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	for i, lim := range audit60Limits {
		pol, code, ra, d := audit52Window(t, e, fmt.Sprintf("a60w%d", i), lim)
		if code != 200 {
			t.Errorf("%v: RateLimit-Policy %s; a full burst w seconds after emptying: %d (Retry-After %q, %+v)", lim, pol, code, ra, d)
		} else {
			t.Logf("%v: %s", lim, pol)
		}
	}
}
