package limit_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// TestAudit51InfUnderClockJumps: an Inf limiter (and Every(0)) under a
// clock stepping back and forward by up to years, with stale and future
// t: every decision admits with the whole burst left and no wait, every
// reservation may act at once from the clock's reading, WaitN returns at
// once, SetBurst changes what Remaining says, and a Multi of an Inf
// window and a finite one decides as the finite one alone.
func TestAudit51InfUnderClockJumps(t *testing.T) {
	for _, r := range []limit.Limit{limit.Inf, limit.Every(0)} {
		clk := limittest.NewFakeClock()
		clk.Set(1_700_000_000_000)
		l := limit.MustNew(r, 3, limit.WithClock(clk))
		fin := limit.MustNew(10, 5, limit.WithClock(clk), limit.WithEngine(limit.Buckets), limit.WithSeed(2))
		twin := limit.MustNew(10, 5, limit.WithClock(clk), limit.WithEngine(limit.Buckets), limit.WithSeed(2))
		m, err := limit.NewMulti(l, fin)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(1, 2))
		burst := 3
		for step := range 3000 {
			clk.Set(clk.NowMillis() + []int64{-1, -5000, -86_400_000, -365 * 86_400_000, 1, 70, 1 << 31, 1 << 32, 3 * 365 * 86_400_000, 300}[rng.IntN(10)])
			c := clk.Now()
			tt := c.Add(time.Duration(rng.IntN(5000)-2500) * time.Millisecond)
			n := 1 + rng.IntN(10)
			if d := l.DecideN(tt, "k", n); !d.Allowed || d.Remaining != burst || d.RetryAfter != 0 || d.ResetAfter != 0 || d.NextAfter != 0 || d.Never {
				t.Fatalf("%v step %d: DecideN(n=%d) %+v; want admitted, Remaining %d, no waits", r, step, n, d, burst)
			}
			if res := l.ReserveN(tt, "k", n); !res.OK() || res.DelayFrom(c) != 0 || res.Delay() != 0 {
				t.Fatalf("%v step %d: ReserveN ok %v delay from the reading %v, Delay %v", r, step, res.OK(), res.DelayFrom(c), res.Delay())
			}
			if tk := l.TokensAt(tt, "k"); tk != float64(burst) {
				t.Fatalf("%v step %d: TokensAt %v want %d", r, step, tk, burst)
			}
			if rng.IntN(50) == 0 {
				burst = 1 + rng.IntN(9)
				if err := l.SetBurst(burst); err != nil {
					t.Fatal(err)
				}
			}
			k := 1 + rng.IntN(3)
			md := m.DecideKeys(tt, k, "k")
			wd := twin.DecideN(tt, "k", k)
			if md.Allowed != wd.Allowed || md.RetryAfter != wd.RetryAfter || md.Remaining != wd.Remaining || md.ResetAfter != wd.ResetAfter || md.Never != wd.Never {
				t.Fatalf("%v step %d: Multi(Inf, 10/5) %+v, the finite window alone %+v", r, step, md, wd)
			}
		}
		if s := l.Stats(); s.Saturation != 0 || s.Rotations != 0 {
			t.Errorf("%v: Stats %+v", r, s)
		}
	}
}
