package limit_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// A Multi of inexact windows (New(Pi, 20) and New(Sqrt2/2, 5), both on the
// count-min, beside an exact Buckets New(10, 20)), RejectCost on each:
// "RetryAfter (on a denial) the time when every window admits the
// request, so a retry at t+RetryAfter is admitted by all of them (if
// nothing else happens to the keys) and one 1 ms earlier is not"
// (multi.go); and "NextAfter ... On a denial it is at most RetryAfter"
// (decision.go). Checked with each window's PeekN at the clock moved to
// t+RetryAfter-1 ms and t+RetryAfter.
func TestAudit78MultiInexactRetryAfterTight(t *testing.T) {
	clk := limittest.NewFakeClock()
	now := a78Start
	clk.Set(now)
	ws := []*limit.Limiter{
		limit.MustNew(limit.Limit(math.Pi), 20, limit.WithClock(clk), limit.WithSeed(1), limit.WithRejectCost(0.5)),
		limit.MustNew(limit.Limit(math.Sqrt2/2), 5, limit.WithClock(clk), limit.WithSeed(2), limit.WithRejectCost(1)),
		limit.MustNew(10, 20, limit.WithClock(clk), limit.WithSeed(3), limit.WithRejectCost(2), limit.WithEngine(limit.Buckets)),
	}
	for i, l := range ws[:2] {
		if l.Exact() {
			t.Fatalf("window %d is exact on %v", i, l.Engine())
		}
	}
	m, _ := limit.NewMulti(ws...)
	rng := rand.New(rand.NewPCG(7, 8))
	denials := 0
	for step := range 600 {
		now += int64(rng.IntN(400))
		clk.Set(now)
		n := 1 + rng.IntN(5)
		d := m.DecideKeys(clk.Now(), n, "k")
		if d.Allowed || d.Never {
			continue
		}
		denials++
		if d.NextAfter > d.RetryAfter {
			t.Fatalf("step %d: NextAfter %v > RetryAfter %v", step, d.NextAfter, d.RetryAfter)
		}
		ra := d.RetryAfter.Milliseconds()
		if ra > 1 && rng.IntN(2) == 0 {
			clk.Set(now + ra - 1)
			all := true
			for _, l := range ws {
				all = all && l.PeekN(clk.Now(), "k", n).Allowed
			}
			if all {
				t.Fatalf("step %d: every window admits n=%d 1 ms before RetryAfter %d ms", step, n, ra)
			}
		}
		if rng.IntN(2) == 0 {
			now += ra
			clk.Set(now)
			for i, l := range ws {
				if !l.PeekN(clk.Now(), "k", n).Allowed {
					t.Fatalf("step %d: window %d denies n=%d at RetryAfter %d ms", step, i, n, ra)
				}
			}
		}
	}
	if denials < 50 {
		t.Fatalf("only %d denials", denials)
	}
}
