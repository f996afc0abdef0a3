package redis

import (
	"context"
	"fmt"
	"math"
	"testing"
)

// TestAudit61OverBurstWithCache: with the deny cache (PreCheck on and
// off), n one ulp above Burst (and 2 x Burst) is never admitted and
// answers RetryAfter -1, whether the key is fresh, owes something, or
// is held by the cache at its cap; the reply (learned as a denial)
// leaves the cache sound: a request of 1 the server admits right after
// is admitted (Decision.RetryAfter: "-1 also when n > Burst (it never
// fits)").
func TestAudit61OverBurstWithCache(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	ctx := context.Background()
	for i, lim := range []Limit{PerSecond(10, 5.14), PerSecond(0.3, 30000001), PerSecond(1000.0/13, 7), PerSecond(1000.0/3600, 5.02)} {
		for _, pre := range []bool{false, true} {
			r := newAudit61Rig(t, e, fmt.Sprintf("a61ob%d%v", i, pre), lim, pre, false)
			l := r.lc
			for _, n := range []float64{math.Nextafter(lim.Burst, math.Inf(1)), 2 * lim.Burst} {
				for _, key := range []string{"fresh", "owing", "full"} {
					switch key {
					case "owing":
						if _, err := l.AllowN(ctx, key, 1); err != nil {
							t.Fatal(err)
						}
					case "full":
						if _, err := l.AllowN(ctx, key, lim.Burst); err != nil {
							t.Fatal(err)
						}
						l.AllowN(ctx, key, 1) // learned at the cap
					}
					d, err := l.AllowN(ctx, key, n)
					if err != nil {
						t.Fatal(err)
					}
					if d.Allowed || d.RetryAfter != -1 {
						t.Errorf("%v pre=%v key %s: AllowN(%v > Burst) = %+v; want denied, RetryAfter -1", lim, pre, key, n, d)
					}
					// Soundness after the reply was learned.
					sd, err := r.plain.AllowN(ctx, key, 0)
					if err != nil {
						t.Fatal(err)
					}
					if sd.Remaining >= 1 {
						before := l.Stats().CacheDenials
						if d, _ := l.AllowN(ctx, key, 1); !d.Allowed && l.Stats().CacheDenials != before {
							t.Errorf("%v pre=%v key %s: the server has Remaining %v; the cache denied 1: %+v", lim, pre, key, sd.Remaining, d)
						}
					}
					r.clk.Advance(1 << 40)
				}
			}
		}
	}
}
