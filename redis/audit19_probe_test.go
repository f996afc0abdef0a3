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

// TestAudit19ProbeWaitsOnCopies: the server's waits are "the least whole
// ms at which a later call fits" (docs/distributed.md: RetryAfter is
// "the smallest whole ms r at which the key's stored cells, decayed as a
// later read decays them ... leave room for n under Burst"), for any
// configuration, exact or not. Model-free: after each denial the
// generation string is copied (COPY) under another limiter name, and that
// copy is asked at now+RetryAfter-1 (denied), now+RetryAfter (admitted),
// and queried at now+ResetAfter-1 (debt > 0) and now+ResetAfter (debt 0).
// Odd and extreme configurations (float32 above Hi at PerSecond(1,
// 9e9), rates of 1e-9/s and 1e12/s, pi, fractional n), few cells (keys
// collide: Min over cells of different stamps), clock steps forward and
// back (waits counted from the clock).
func TestAudit19ProbeWaitsOnCopies(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	ctx := context.Background()
	for ci, lim := range []Limit{
		PerSecond(1, 9e9),
		PerSecond(1e-9, 9),
		PerSecond(math.Pi, 17.5),
		PerSecond(1e12, 3e12),
		PerSecond(3, 7),
		PerSecond(0.7, 1e6),
		PerSecond(1.0/3600, 1),
		PerSecond(10, 1),
		PerSecond(123456.789, 0.001),
	} {
		t.Run(fmt.Sprintf("%v/%v", lim.Rate, lim.Burst), func(t *testing.T) {
			name := fmt.Sprintf("a19pr%d", ci)
			clk := sketchtest.NewFakeClock()
			clk.Set(1_000_000_000)
			cfg := LimiterConfig{Name: name, Limit: lim, Clock: clk, Levels: 3, CellsPerLevel: 4}
			l := e.limiter(t, cfg)
			pclk := sketchtest.NewFakeClock()
			pcfg := cfg
			pcfg.Name, pcfg.Clock = name+"p", pclk
			p := e.limiter(t, pcfg)
			r := rand.New(rand.NewPCG(uint64(ci), 1919))
			tokMs := 1000 / lim.Rate
			keys := []string{"a", "b", "c", "d", "e", "f"}
			probes, saturated := 0, 0
			for step := range 120 {
				switch x := r.IntN(10); {
				case x < 5:
					clk.Advance(time.Duration(r.Float64()*min(4*tokMs, 1e13)) * time.Millisecond)
				case x < 7:
					clk.Advance(-time.Duration(r.Float64()*min(4*tokMs, 1e12)) * time.Millisecond)
				}
				var n float64
				switch y := r.IntN(8); {
				case y == 0:
					n = lim.Burst
				case y == 1:
					n = lim.Burst * r.Float64()
				default:
					n = min(lim.Burst, float64(1+r.IntN(3)))
				}
				k := keys[r.IntN(len(keys))]
				now := clk.NowMillis()
				d, err := l.AllowN(ctx, k, n)
				if err != nil {
					t.Fatalf("step %d: AllowN(%s, %v) at %d: %v", step, k, n, now, err)
				}
				if d.RetryAfter < -1 || d.ResetAfter < 0 {
					t.Fatalf("step %d: AllowN(%s, %v) = %+v: negative wait", step, k, n, d)
				}
				if d.Allowed || d.RetryAfter <= 0 {
					continue
				}
				probes++
				if err := e.do(t, "COPY", "{"+name+"}:g", "{"+name+"p}:g", "REPLACE").Error(); err != nil {
					t.Fatalf("COPY: %v", err)
				}
				at := func(w time.Duration) int64 { return now + w.Milliseconds() }
				q := func(ms int64) float64 {
					pclk.Set(ms)
					v, err := p.Sketch().Query(ctx, k)
					if err != nil {
						t.Fatal(err)
					}
					return v
				}
				if d.ResetAfter > 0 {
					// Late by at most the server's rebase slack.
					if v := q(at(d.ResetAfter) - 1 - rebaseLate(d.ResetAfter).Milliseconds()); !(v > 0) {
						t.Errorf("step %d: %s's debt 1 ms + rebaseLate before ResetAfter %v = %v; want > 0 (ResetAfter late)", step, k, d.ResetAfter, v)
					}
				}
				// A wait past the largest Duration saturates there
				// (localtime.go): a 9e9 s bucket plus a lag.
				if d.ResetAfter == math.MaxInt64 {
					saturated++
				} else if v := q(at(d.ResetAfter)); v != 0 {
					t.Errorf("step %d: %s's debt at ResetAfter %v = %v; want 0 (ResetAfter early)", step, k, d.ResetAfter, v)
				}
				if d.RetryAfter == math.MaxInt64 {
					saturated++
					continue
				}
				// Late by at most the server's rebase slack (rebaseLate),
				// else exact: 1 ms before, the wait left is 1 ms.
				late := rebaseLate(d.RetryAfter)
				pclk.Set(at(d.RetryAfter) - 1 - late.Milliseconds())
				if d2, err := p.AllowN(ctx, k, n); err != nil || d2.Allowed {
					t.Errorf("step %d: AllowN(%s, %v) 1 ms + %v before RetryAfter %v = %+v, %v; want denied (RetryAfter late)", step, k, n, late, d.RetryAfter, d2, err)
				} else if d2.RetryAfter < time.Millisecond || d2.RetryAfter > late+time.Millisecond+rebaseLate(late) {
					t.Errorf("step %d: AllowN(%s, %v) 1 ms + %v before RetryAfter %v = %+v; want RetryAfter about 1ms + %v", step, k, n, late, d.RetryAfter, d2, late)
				}
				pclk.Set(at(d.RetryAfter))
				if d2, err := p.AllowN(ctx, k, n); err != nil || !d2.Allowed {
					t.Errorf("step %d: AllowN(%s, %v) at RetryAfter %v (from %d) = %+v, %v; want admitted (RetryAfter early)", step, k, n, d.RetryAfter, now, d2, err)
				}
			}
			t.Logf("%d probes, %d saturated ResetAfter", probes, saturated)
		})
	}
}
