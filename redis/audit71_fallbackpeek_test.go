package redis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// Under LocalFallback with the server down, peeks (AllowN(key, 0))
// change nothing: a twin limiter that peeks before and after every
// request at every ms decides every request exactly as one that never
// peeks (AllowN: "n = 0 only reads ... it writes nothing, on the server
// and in the LocalFallback alike"), and a peek right after a request
// reports that request's Remaining and ResetAfter.
func TestAudit71FallbackPeekTwin(t *testing.T) {
	ctx := context.Background()
	for li, lim := range []Limit{PerSecond(1000.0/13, 7), PerSecond(10, 10), PerSecond(0.7, 7), PerSecond(3, 2.5), PerSecond(1e-3, 9)} {
		ca, cb := sketchtest.NewFakeClock(), sketchtest.NewFakeClock()
		ca.Set(5_000_000)
		cb.Set(5_000_000)
		a := a69DownLimiter(t, "a71a", lim, LocalFallback, 3, ca)
		b := a69DownLimiter(t, "a71b", lim, LocalFallback, 3, cb)
		rng := rand.New(rand.NewPCG(uint64(li), 71))
		for step := 0; step < 300; step++ {
			dt := int64(rng.IntN(int(400/lim.Rate) + 2))
			ca.Set(ca.NowMillis() + dt)
			cb.Set(cb.NowMillis() + dt)
			key := fmt.Sprint("k", rng.IntN(3))
			n := float64(1 + rng.IntN(2))
			for p := 0; p < 3; p++ {
				pd, _ := a.AllowN(ctx, key, 0)
				if !pd.Allowed {
					t.Fatalf("peek denied: %+v", pd)
				}
			}
			da, _ := a.AllowN(ctx, key, n)
			db, _ := b.AllowN(ctx, key, n)
			if da != db {
				t.Fatalf("%+v step %d key %s n %v: with peeks %+v, without %+v", lim, step, key, n, da, db)
			}
			pd, _ := a.AllowN(ctx, key, 0)
			if n > lim.Burst/3 {
				continue // no decision (FailClosed's): nothing to compare
			}
			if pd.Remaining != da.Remaining || pd.ResetAfter != da.ResetAfter {
				t.Errorf("%+v step %d: peek after the request: Remaining %v ResetAfter %v, request's %v %v", lim, step, pd.Remaining, pd.ResetAfter, da.Remaining, da.ResetAfter)
			}
		}
	}
}
