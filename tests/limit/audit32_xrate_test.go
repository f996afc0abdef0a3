package limit_test

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"golang.org/x/time/rate"
)

func a32Float(x *big.Rat) float64 { f, _ := x.Float64(); return f }

// TestAudit32XRateParityCountMinLongIdle: an exact limiter on the
// count-min engine decides as golang.org/x/time/rate's Limiter (same
// limit and burst, one per key) across idle gaps of hours to weeks, over
// the count-min's horizon sweeps: AllowN agrees wherever the exact
// bucket is not within 1e-6 tokens of the boundary (x/time/rate counts
// tokens in float64), and TokensAt agrees to 1e-6 (docs/readings.md,
// "the x/time/rate parity table"; limit/doc.go "Exactness").
func TestAudit32XRateParityCountMinLongIdle(t *testing.T) {
	cases := []struct {
		lim   limit.Limit
		r     *big.Rat
		burst int
	}{
		{10, big.NewRat(10, 1), 20},
		{limit.Every(3 * time.Second), big.NewRat(1, 3), 5},
		{limit.Limit(1.0 / 60), big.NewRat(1, 60), 139},
		{limit.Limit(1000.0 / 3600), big.NewRat(1000, 3600), 100},
	}
	const keys = 3
	for ci, c := range cases {
		t.Run(fmt.Sprintf("%v/%d", float64(c.lim), c.burst), func(t *testing.T) {
			clk := limittest.NewFakeClock()
			clk.Set(1_700_000_000_000)
			l, err := limit.New(c.lim, c.burst, limit.WithClock(clk), limit.WithEngine(limit.CountMin), limit.WithSize(4, 4096), limit.WithSeed(uint64(ci)))
			if err != nil {
				t.Fatal(err)
			}
			if !l.Exact() {
				t.Fatal("want an exact limiter")
			}
			x := make([]*rate.Limiter, keys)
			debt := make([]*big.Rat, keys) // the exact bucket, tokens owed
			at := make([]int64, keys)
			for i := range x {
				x[i] = rate.NewLimiter(rate.Limit(c.lim), c.burst)
				debt[i] = new(big.Rat)
				at[i] = clk.NowMillis()
			}
			perMs := new(big.Rat).Quo(c.r, big.NewRat(1000, 1))
			rf, _ := c.r.Float64()
			tok := time.Duration(float64(time.Second) / rf)
			rng := rand.New(rand.NewPCG(36, uint64(ci)))
			agreeChecked, synced := 0, 0
			for op := range 2000 {
				switch rng.IntN(20) {
				case 0:
					clk.Advance(time.Duration(rng.Int64N(int64(30 * 24 * time.Hour))).Truncate(time.Millisecond))
				case 1:
				default:
					clk.Advance(time.Duration(rng.Float64() * float64(tok)).Truncate(time.Millisecond))
				}
				k := rng.IntN(keys)
				key := fmt.Sprint("key", k)
				now := clk.NowMillis()
				debt[k].Sub(debt[k], new(big.Rat).Mul(perMs, big.NewRat(now-at[k], 1)))
				if debt[k].Sign() < 0 {
					debt[k].SetInt64(0)
				}
				at[k] = now
				truth, _ := new(big.Rat).Sub(big.NewRat(int64(c.burst), 1), debt[k]).Float64()
				if got, xr := l.TokensAt(clk.Now(), key), x[k].TokensAt(clk.Now()); math.Abs(got-truth) > 1e-6 || math.Abs(xr-truth) > 1e-6 {
					t.Fatalf("op %d: TokensAt %v, x/time/rate %v, exact %v", op, got, xr, truth)
				}
				n := 1 + rng.IntN(c.burst)
				margin, _ := new(big.Rat).Sub(big.NewRat(int64(c.burst-n), 1), debt[k]).Float64()
				got := l.AllowN(clk.Now(), key, n)
				xr := x[k].AllowN(clk.Now(), n)
				if math.Abs(margin) > 1e-6 {
					agreeChecked++
					if got != xr || got != (margin >= 0) {
						t.Fatalf("op %d: AllowN(n=%d) %v, x/time/rate %v, exact %v (margin %v tokens)", op, n, got, xr, margin >= 0, margin)
					}
				}
				if got {
					debt[k].Add(debt[k], big.NewRat(int64(n), 1))
				}
				if got != xr {
					// At a boundary x/time/rate's float64 may round
					// either way: start it again from the exact state.
					x[k] = rate.NewLimiter(rate.Limit(c.lim), c.burst)
					owed := int(math.Ceil(a32Float(debt[k])))
					if owed > 0 {
						x[k].ReserveN(clk.Now(), owed) // then drains as the key does
					}
					synced++
				}
			}
			if synced > 0 {
				t.Logf("%d boundary disagreements with x/time/rate (float64)", synced)
			}
			if agreeChecked < 1000 {
				t.Fatalf("only %d decisions away from the boundary", agreeChecked)
			}
		})
	}
}
