package limit_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// a51Decider is a Limiter or a Tier.
type a51Decider interface {
	DecideN(t time.Time, key string, n int) limit.Decision
	PeekN(t time.Time, key string, n int) limit.Decision
	TokensAt(t time.Time, key string) float64
	Burst() int
}

// TestAudit51InexactWaitsPredictUnderSteps: inexact policies (a count-min
// at 3π/s, a tier at 10/3 of a Buckets 10/s, SetLimit to 0.7/s and back)
// under a clock stepping back (up to a year) and forward (up to years):
// every denial's RetryAfter predicts the limiter's own next decision to
// the millisecond (doc.go "Exactness": "a retry at t+RetryAfter is
// admitted and one 1 ms earlier is not"; "An inexact policy is never
// early against its own bucket, and its RetryAfter still predicts its own
// next decision to the millisecond"), ResetAfter is when the bucket is
// full, and NextAfter when Remaining grows by one.
func TestAudit51InexactWaitsPredictUnderSteps(t *testing.T) {
	testsize.Serial(t)
	type cfg struct {
		name  string
		build func(clk *limittest.FakeClock) (*limit.Limiter, a51Decider)
		flips []limit.Limit
	}
	cfgs := []cfg{
		{"countmin-3pi", func(clk *limittest.FakeClock) (*limit.Limiter, a51Decider) {
			l := limit.MustNew(limit.Limit(3*math.Pi), 7, limit.WithClock(clk), limit.WithEngine(limit.CountMin), limit.WithSize(4, 1024), limit.WithPeriod(100000*time.Hour), limit.WithSeed(3))
			return l, l
		}, nil},
		{"buckets-tier-10/3", func(clk *limittest.FakeClock) (*limit.Limiter, a51Decider) {
			l := limit.MustNew(10, 20, limit.WithClock(clk), limit.WithEngine(limit.Buckets), limit.WithMaxDebt(80), limit.WithSeed(4))
			tr, err := l.Tier("t", 10.0/3, 9)
			if err != nil {
				panic(err)
			}
			return l, tr
		}, nil},
		{"countmin-setlimit", func(clk *limittest.FakeClock) (*limit.Limiter, a51Decider) {
			l := limit.MustNew(2, 6, limit.WithClock(clk), limit.WithEngine(limit.CountMin), limit.WithSize(4, 1024), limit.WithPeriod(100000*time.Hour), limit.WithMaxDebt(40), limit.WithSeed(5))
			return l, l
		}, []limit.Limit{0.7, 2, 1.3, limit.Limit(math.Sqrt2)}},
	}
	for _, c := range cfgs {
		t.Run(c.name, func(t *testing.T) {
			clk := limittest.NewFakeClock()
			clk.Set(1_700_000_000_000)
			l, dec := c.build(clk)
			rng := rand.New(rand.NewPCG(51, uint64(len(c.name))))
			hw := clk.NowMillis()
			checked, nbad := 0, 0
			at := func(ms int64) time.Time { clk.Set(ms); hw = max(hw, ms); return time.UnixMilli(ms) }
			for step := 0; step < 5000 && nbad < 5; step++ {
				// move the clock
				switch r := rng.IntN(10); {
				case r == 0:
					clk.Set(clk.NowMillis() - []int64{5, 300, 3_600_000, 86_400_000, 365 * 86_400_000}[rng.IntN(5)])
				case r == 1:
					clk.Set(max(clk.NowMillis(), hw) + []int64{1 << 29, 1 << 31, 1 << 32, 3 * 365 * 86_400_000}[rng.IntN(4)])
				case r < 4 && clk.NowMillis() < hw:
					clk.Set(hw + int64(rng.IntN(400)))
				default:
					clk.Set(clk.NowMillis() + int64(rng.IntN(400)))
				}
				if len(c.flips) > 0 && rng.IntN(15) == 0 {
					if err := l.SetLimit(c.flips[rng.IntN(len(c.flips))]); err != nil {
						t.Fatal(err)
					}
				}
				tms := clk.NowMillis() - int64(rng.IntN(2))*int64(rng.IntN(3000))
				n := 1 + rng.IntN(dec.Burst())
				d := dec.DecideN(time.UnixMilli(tms), "k", n)
				hw = max(hw, min(tms, clk.NowMillis()))
				base := min(tms, clk.NowMillis())
				if d.Allowed || d.Never || rng.IntN(3) != 0 {
					continue
				}
				checked++
				ra, rs, nx, rem := d.RetryAfter.Milliseconds(), d.ResetAfter.Milliseconds(), d.NextAfter.Milliseconds(), d.Remaining
				desc := fmt.Sprintf("step %d n=%d limit %v t-c=%d: %+v", step, n, d.Limit, tms-clk.NowMillis(), d)
				// 1 ms early, then at the predictions (peeks write nothing)
				if nx > 1 && base+nx-1 >= hw {
					if p := dec.PeekN(at(base+nx-1), "k", rem+1); p.Allowed {
						t.Errorf("%s: Remaining+1 fits 1 ms before NextAfter", desc)
						nbad++
					}
				}
				if p := dec.PeekN(at(base+nx), "k", rem+1); !p.Allowed {
					t.Errorf("%s: Remaining+1 does not fit at NextAfter: %+v", desc, p)
					nbad++
				}
				if ra > 1 && base+ra-1 >= hw {
					if p := dec.PeekN(at(base+ra-1), "k", n); p.Allowed {
						t.Errorf("%s: admitted 1 ms before RetryAfter", desc)
						nbad++
					}
				}
				if p := dec.PeekN(at(base+ra), "k", n); !p.Allowed {
					t.Errorf("%s: denied at RetryAfter: %+v", desc, p)
					nbad++
				}
				if rs > 1 && base+rs-1 >= hw {
					if tk := dec.TokensAt(at(base+rs-1), "k"); tk >= float64(dec.Burst()) {
						t.Errorf("%s: full 1 ms before ResetAfter", desc)
						nbad++
					}
				}
				if tk := dec.TokensAt(at(base+rs), "k"); tk != float64(dec.Burst()) {
					t.Errorf("%s: tokens %.9f at ResetAfter, want the burst %d", desc, tk, dec.Burst())
					nbad++
				}
			}
			t.Logf("%d denials checked", checked)
		})
	}
}
