package redis

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// audit60Oracle is a second Sketch on the limiter's server sketch with a
// clock of its own: Query at any time (op Q writes nothing).
type audit60Oracle struct {
	s   *Sketch
	clk *sketchtest.FakeClock
}

func newAudit60Oracle(t *testing.T, e *env, l *Limiter) audit60Oracle {
	cfg := l.Sketch().Config()
	clk := sketchtest.NewFakeClock()
	cfg.Clock = clk
	return audit60Oracle{e.sketch(t, cfg), clk}
}

// debtAt is the server's estimate (units) for key at ms.
func (o audit60Oracle) debtAt(t *testing.T, key string, ms int64) float64 {
	t.Helper()
	o.clk.Set(ms)
	q, err := o.s.Query(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// TestAudit60DenyCacheSoundRandom: a limiter with a deny cache (with and
// without PreCheck) at odd rates and huge bursts, one key, random
// requests (whole and fractional n) at random times, the generation
// rebased (production threshold) along the way. Every cache denial is
// one the server makes at that instant (the server's estimate + n >
// Burst), and every denial's RetryAfter, cache or server, is never early:
// at now + RetryAfter the server has room for n (denycache.go: "the cache
// never admits, and it is stale only toward denial"; Decision.RetryAfter:
// "never early").
func TestAudit60DenyCacheSoundRandom(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	ctx := context.Background()
	lims := []Limit{
		PerSecond(1000.0/999, 16794), PerSecond(0.3, 30000002), PerSecond(0.3, 7.5),
		PerSecond(0.123456789, 1<<24+2), PerSecond(1e-6, 1000.5), PerSecond(1000.0/999, 10),
	}
	rng := rand.New(rand.NewPCG(60, 60))
	for i, lim := range lims {
		for _, pre := range []bool{false, true} {
			clk := sketchtest.NewFakeClock()
			clk.Set(1_000_000)
			l, _ := audit60CacheLimiter(t, e, fmt.Sprintf("a60s%d%v", i, pre), lim, clk, pre)
			or := newAudit60Oracle(t, e, l)
			if err := l.Sketch().Update(ctx, "a60-other", 0); err != nil {
				t.Fatal(err)
			}
			drainMs := lim.Burst / lim.Rate * 1000
			cacheDenials := 0
			for p := range 150 {
				// Time: mostly small steps (fractions of the drain),
				// sometimes a rebase-sized jump with a write.
				switch rng.IntN(10) {
				case 0:
					clk.Advance(time.Duration(1<<30+rng.Int64N(1<<20)) * time.Millisecond)
					if err := l.Sketch().Update(ctx, "a60-other", 0); err != nil {
						t.Fatal(err)
					}
				default:
					clk.Advance(time.Duration(rng.Float64()*drainMs/20) * time.Millisecond)
				}
				var n float64
				switch rng.IntN(3) {
				case 0:
					n = math.Ceil(rng.Float64() * lim.Burst)
				case 1:
					n = rng.Float64() * lim.Burst / 3
				default:
					n = math.Max(1, math.Floor(rng.Float64()*lim.Burst/10))
				}
				n = math.Min(n, lim.Burst)
				before := l.Stats().CacheDenials
				now := clk.NowMillis()
				d, err := l.AllowN(ctx, "k", n)
				if err != nil {
					t.Fatal(err)
				}
				fromCache := l.Stats().CacheDenials != before
				nU := n * l.unit
				if fromCache {
					cacheDenials++
					if q := or.debtAt(t, "k", now); q+nU <= l.burstU {
						t.Errorf("%v pre=%v probe %d: the deny cache denied n=%v at %d, the server has room (debt %v units + %v <= %v)", lim, pre, p, n, now, q, nU, l.burstU)
					}
				}
				if !d.Allowed && d.RetryAfter > 0 {
					at := now + d.RetryAfter.Milliseconds()
					if q := or.debtAt(t, "k", at); q+nU > l.burstU {
						t.Errorf("%v pre=%v probe %d: denial (cache %v) of n=%v at %d: RetryAfter %v early: at it the server's debt is %v units, +%v > %v", lim, pre, p, fromCache, n, now, d.RetryAfter, q, nU, l.burstU)
					}
				}
			}
			t.Logf("%v pre=%v: %d cache denials, %+v", lim, pre, cacheDenials, l.Stats())
		}
	}
}
