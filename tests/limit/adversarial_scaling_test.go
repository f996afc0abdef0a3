package limit_test

import (
	"testing"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
	"pgregory.net/rapid"
)

// TestAdvScalingRecipe: the package documentation's recipe, "To offer
// tiers down to R/k with burst b, build with WithMaxDebt(k x b)": on any
// rate R (a short fraction or not, either engine Auto picks), a limiter
// built WithMaxDebt(k x b) takes Tier(R/k, b) and every Tier(R/j, b) for
// j <= k, SetLimit(R/k) with burst b, and each admits its full burst from
// an empty key.
func TestAdvScalingRecipe(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var rate float64
		if rapid.IntRange(0, 9).Draw(rt, "shortFraction") == 0 {
			lim, _, _ := bucketRate(rt)
			rate = float64(lim)
		} else {
			rate = rapid.Float64Range(0.01, 1e5).Draw(rt, "rate")
		}
		k := rapid.IntRange(1, 64).Draw(rt, "k")
		b := rapid.IntRange(1, 1000).Draw(rt, "b")
		engine := rapid.SampledFrom([]limit.Engine{limit.Auto, limit.CountMin}).Draw(rt, "engine")
		l, err := limit.New(limit.Limit(rate), b, limit.WithMaxDebt(float64(k*b)), limit.WithEngine(engine), limit.WithSeed(1), limit.WithSize(1, 64), limit.WithClock(sketchtest.NewFakeClock()))
		if engine == limit.Auto {
			l, err = limit.New(limit.Limit(rate), b, limit.WithMaxDebt(float64(k*b)), limit.WithSeed(1), limit.WithClock(sketchtest.NewFakeClock()))
		}
		if err != nil {
			rt.Skipf("New: %v", err)
		}
		for j := 1; j <= k; j++ {
			tr, err := l.Tier("t", limit.Limit(rate)/limit.Limit(j), b)
			if err != nil {
				rt.Fatalf("engine %v exact %v: Tier(R/%d, %d) on WithMaxDebt(%d x %d): %v", l.Engine(), l.Exact(), j, b, k, b, err)
			}
			if j == k {
				checkFullBurst(rt, tr, "R/k")
			}
		}
		if err := l.SetLimit(limit.Limit(rate) / limit.Limit(k)); err != nil {
			rt.Fatalf("SetLimit(R/%d) with burst %d on WithMaxDebt(%d x %d): %v", k, b, k, b, err)
		}
	})
}
