package limit

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/atom"
	"github.com/lfgrudge/grudge/internal/common"
)

// TestHeldIsTheCellClamp: heldU, the debt a read at MaxDebt stands for,
// is the sketch's clamp as its cells store it (Hi = maxDebtU, rounded up
// to a float32), for limiters whose MaxDebt in units is a product that
// rounds. Computed where maxDebtU is formed, the product was fused into
// RoundUp's compare on arm64 (FMA): heldU came out one float32 above the
// clamp, and RetryAfter 1 ms late (rapid seed 7828073466830710819 of
// tests/limit's TestAdvTierNeverEarlyRatios). Here the oracle rounds the
// stored maxDebtU, a value read from memory.
func TestHeldIsTheCellClamp(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 52))
	rates := []float64{3.977661611496304e-05, 0.8984375, 1.0 / 3, 0.944, 5.6e-4}
	for range 400 {
		rates = append(rates, math.Ldexp(1+rng.Float64(), rng.IntN(40)-20))
	}
	var cfgs []heldCase
	for _, r := range rates {
		cfgs = append(cfgs, heldCase{r, 1 + rng.IntN(200), 0})
	}
	// The seed's shape: New at Every(d), WithMaxDebt what a tier at
	// rate/k asks for in its MaxDebtError, a MaxDebt whose units land on
	// the cost grid.
	for _, c := range []struct {
		d        time.Duration
		k, b, tb int
	}{{28997 * time.Millisecond, 867, 19, 100}} {
		cfgs = append(cfgs, tierNeed(t, float64(Every(c.d)), c.k, c.b, c.tb))
	}
	for range 300 {
		d := time.Duration(1+rng.IntN(30_000)) * time.Millisecond
		cfgs = append(cfgs, tierNeed(t, float64(Every(d)), 1+rng.IntN(1000), 1+rng.IntN(100), 1+rng.IntN(100)))
	}
	for i, c := range cfgs {
		r, burst := c.rate, c.burst
		opts := []Option{WithEngine(CountMin), WithSize(1, 8), WithSeed(0)}
		if c.maxDebt > 0 {
			opts = append(opts, WithMaxDebt(c.maxDebt))
		}
		l, err := New(Limit(r), burst, opts...)
		if err != nil {
			continue // a rate New refuses says why elsewhere
		}
		held := math.Max(l.maxDebtU, float64(atom.RoundUp(l.maxDebtU)))
		if l.heldU != held {
			t.Fatalf("case %d: rate %v burst %d: heldU %v, the clamp of maxDebtU %v is %v", i, r, burst, l.heldU, l.maxDebtU, held)
		}
		// The product, rounded where formed (no fused multiply-add), then
		// snapped to the whole number within 4 ulps (heldUnits).
		if want := common.SnapWhole(float64(l.maxDebt * l.unit)); l.maxDebtU != want {
			t.Fatalf("case %d: maxDebtU %v, maxDebt x unit rounds to %v", i, l.maxDebtU, want)
		}
	}
}

// tierNeed returns New(rate, burst) with the MaxDebt a tier at rate/k
// of burst tb asks for, or New's default where the tier fits.
func tierNeed(t *testing.T, rate float64, k, burst, tb int) heldCase {
	c := heldCase{rate: rate, burst: burst}
	l, err := New(Limit(rate), burst, WithEngine(CountMin), WithSize(1, 8), WithSeed(0), WithMaxDebt(float64(burst)))
	if err != nil {
		t.Fatal(err)
	}
	var mde *MaxDebtError
	if _, err := l.Tier("t", Limit(rate/float64(k)), tb); errors.As(err, &mde) && mde.Need <= 1<<24 {
		c.maxDebt = mde.Need
	}
	return c
}

// heldCase is a limiter for TestHeldIsTheCellClamp: New(rate, burst),
// WithMaxDebt(maxDebt) unless it is 0.
type heldCase struct {
	rate    float64
	burst   int
	maxDebt float64
}
