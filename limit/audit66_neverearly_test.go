package limit_test

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit66InexactNeverEarly: for a rate that is not a short fraction,
// or whose token a float32 cannot add exactly, "decisions are never
// earlier than the exact bucket's" (doc.go, "Exactness"). The oracle is
// the rational bucket of the float64 rate itself, fed the limiter's own
// admissions (a RejectCost only raises the limiter's side): whatever the limiter admits,
// the oracle must admit too, and a denial's RetryAfter must be at least
// the oracle's; a full burst from an empty key is admitted at once.
func TestAudit66InexactNeverEarly(t *testing.T) {
	cfgs := []struct {
		name  string
		lim   limit.Limit
		burst int
		opts  []limit.Option
	}{
		{"pi", math.Pi, 7, nil},
		{"sqrt2-bigdebt", math.Sqrt2, 100, []limit.Option{limit.WithMaxDebt(1 << 24)}},
		{"0.3-bigdebt", 0.3, 1000, []limit.Option{limit.WithMaxDebt(5e6)}},
		{"5e-4", 5e-4, 1000, nil},
		{"e-fast", math.E * 1000, 5000, nil},
		{"tiny", 1e-7, 3, nil},
		{"1/7", 1.0 / 7, 1 << 20, nil},
		{"yearly", 1.0 / (365 * 86400), 3, []limit.Option{limit.WithMaxDebt(12), limit.WithRejectCost(1)}},
		{"1e-9", 1e-9, 2, nil},
	}
	for _, c := range cfgs {
		t.Run(c.name, func(t *testing.T) {
			for seed := uint64(0); seed < 8; seed++ {
				rng := rand.New(rand.NewPCG(seed, 77))
				clk := sketchtest.NewFakeClock()
				now := int64(1_000_000)
				clk.Set(now)
				opts := append([]limit.Option{limit.WithClock(clk), limit.WithSeed(seed), limit.WithSize(2, 64)}, c.opts...)
				l, err := limit.New(c.lim, c.burst, opts...)
				if err != nil {
					t.Fatal(err)
				}
				rate := new(big.Rat).SetFloat64(float64(c.lim))
				rate.Quo(rate, big.NewRat(1000, 1)) // tokens per ms
				burst := big.NewRat(int64(c.burst), 1)
				debt := new(big.Rat)
				at := now
				if seed == 0 {
					if !l.AllowN(l.Now(), "k", c.burst) {
						t.Fatalf("a full burst from an empty key is denied")
					}
					debt.Add(debt, burst)
				}
				for step := 0; step < 300; step++ {
					// time steps scaled to the token time
					tokMs := 1000 / float64(c.lim)
					switch x := rng.IntN(10); {
					case x < 4:
						now += int64(rng.IntN(3))
					case x < 9:
						now += int64(rng.Float64() * tokMs * float64(1+rng.IntN(4)))
					default:
						now += int64(rng.Float64() * tokMs * float64(c.burst))
					}
					clk.Set(now)
					dr := new(big.Rat).Mul(rate, big.NewRat(now-at, 1))
					debt.Sub(debt, dr)
					if debt.Sign() < 0 {
						debt.SetInt64(0)
					}
					at = now
					n := 1 + rng.IntN(c.burst)
					if rng.IntN(2) == 0 {
						n = 1 + rng.IntN(min(c.burst, 3))
					}
					d := l.DecideN(l.Now(), "k", n)
					need := new(big.Rat).Add(debt, big.NewRat(int64(n), 1))
					fits := need.Cmp(burst) <= 0
					if d.Allowed {
						if !fits {
							df, _ := debt.Float64()
							t.Fatalf("seed %d step %d: admitted n=%d where the exact bucket of %v/s holds debt %v (burst %d): early", seed, step, n, float64(c.lim), df, c.burst)
						}
						debt = need
						continue
					}
					// oracle's RetryAfter
					x := new(big.Rat).Sub(need, burst)
					if x.Sign() > 0 {
						x.Quo(x, rate)
						want := a66ms(max(a66Ceil(x), 1))
						if d.RetryAfter < want {
							t.Fatalf("seed %d step %d: RetryAfter %v < exact bucket's %v (n=%d)", seed, step, d.RetryAfter, want, n)
						}
					}
					_ = time.Millisecond
				}
			}
		})
	}
}
