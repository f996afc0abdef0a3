package redis

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit61RebaseInsideCacheWaitAtCap: one instance, the deny cache,
// limits counting tokens whose Burst a float32 does not hold (capExcess
// > 0). A key taken to its full Burst 10 s before its generation's first
// rebase can come; the server's denial of n is learned at the cap; the
// cache then denies n locally (RetryAfter from a debt at the cap:
// capExcess and the rebase slack bound added). A write of another key
// rebases the generation inside that wait (at several offsets); a retry
// exactly at the cache's RetryAfter is admitted (Decision.RetryAfter:
// "never early"), and at the cache's ResetAfter the key is empty.
func TestAudit61RebaseInsideCacheWaitAtCap(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	ctx := context.Background()
	const c0 = 1_780_000_000_000
	run := 0
	for _, lim := range []Limit{PerSecond(1000*math.Pi, 1e6+0.3), PerSecond(3000.3, 16777217)} {
		for _, off := range []int64{10_001, 10_500, 12_345, 30_000} {
			for _, pre := range []bool{false, true} {
				run++
				clk := sketchtest.NewFakeClock()
				clk.Set(c0)
				cfg := LimiterConfig{Name: fmt.Sprintf("a61rc%d", run), Limit: lim, Clock: clk, Levels: 2, CellsPerLevel: 64, DenyCacheCells: 1024, PreCheck: pre}
				l := e.limiter(t, cfg)
				or := newAudit60Oracle(t, e, l)
				if l.cache == nil || l.cache.excess <= 0 || l.unit != 1 {
					t.Fatalf("setup: %v: excess %v unit %v", lim, l.cache.excess, l.unit)
				}
				other := a28Disjoint(t, l, "k")
				if d, err := l.AllowN(ctx, other, 1e-6); err != nil || !d.Allowed {
					t.Fatal(d, err)
				}
				T := int64(c0 + defaultRebaseAt - 10_000)
				clk.Set(T)
				if d, err := l.AllowN(ctx, "k", lim.Burst); err != nil || !d.Allowed {
					t.Fatal(d, err)
				}
				n := lim.Rate * 40 // 40 s of drain
				if d, err := l.AllowN(ctx, "k", n); err != nil || d.Allowed {
					t.Fatal(d, err)
				}
				d, err := l.AllowN(ctx, "k", n)
				if err != nil || d.Allowed || l.Stats().CacheDenials == 0 {
					t.Fatalf("setup: want a cache denial: %+v %v %+v", d, err, l.Stats())
				}
				clk.Set(T + off)
				if err := l.Sketch().Update(ctx, other, 0); err != nil {
					t.Fatal(err)
				}
				at := T + d.RetryAfter.Milliseconds()
				if q := or.debtAt(t, "k", at); q+n > lim.Burst {
					t.Errorf("%v pre=%v rebase at +%d ms: the cache's RetryAfter %v is early: at it the server's debt %v + n %v > Burst (by %v)", lim, pre, off, d.RetryAfter, q, n, q+n-lim.Burst)
				}
				if q := or.debtAt(t, "k", T+d.ResetAfter.Milliseconds()); q > 0 {
					t.Errorf("%v pre=%v rebase at +%d ms: the cache's ResetAfter %v is early: at it the server's debt is %v", lim, pre, off, d.ResetAfter, q)
				}
				clk.Set(at)
				if d2, err := l.AllowN(ctx, "k", n); err != nil || !d2.Allowed {
					t.Errorf("%v pre=%v rebase at +%d ms: the retry at the cache's RetryAfter %v: %+v %v", lim, pre, off, d.RetryAfter, d2, err)
				}
			}
		}
	}
}
