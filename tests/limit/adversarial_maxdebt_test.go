package limit_test

// Adversarial acceptance tests of the MaxDebt a Tier needs: "Tier,
// SetLimit and SetBurst return a *MaxDebtError naming the MaxDebt (in
// tokens of New's limit) the policy needs", "(neither clamps a burst
// silently)".

import (
	"errors"
	"math"
	"math/big"
	"testing"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
	"pgregory.net/rapid"
)

// TestAdvMaxDebtNeedSuffices: the minimized cases of
// TestAdvTierMaxDebtError. A limiter built WithMaxDebt(Need) has other
// base units than the one that named Need (the Buckets engine's ticks,
// the count-min's grid of costs both depend on MaxDebt), so a Need
// computed on the first limiter's units fell short on the second: it
// refused the same tier again, asking for a little more.
func TestAdvMaxDebtNeedSuffices(t *testing.T) {
	for _, c := range []struct {
		engine      limit.Engine
		lim, tier   limit.Limit
		burst, tb   int
		firstMaxDbt float64
	}{
		{limit.Buckets, 1, 3, 1, 4, 1},
		{limit.Auto, 1000, 1015.625, 1, 4, 1},
		{limit.CountMin, 1, 3, 1, 7, 0},
		{limit.CountMin, 10, 25, 20, 101, 0},
		{limit.Buckets, 10, 30, 20, 130, 0},
	} {
		opts := []limit.Option{limit.WithEngine(c.engine), limit.WithSeed(1)}
		if c.firstMaxDbt > 0 {
			opts = append(opts, limit.WithMaxDebt(c.firstMaxDbt))
		}
		l, err := limit.New(c.lim, c.burst, opts...)
		if err != nil {
			t.Fatal(err)
		}
		_, err = l.Tier("t", c.tier, c.tb)
		var mde *limit.MaxDebtError
		if !errors.As(err, &mde) {
			t.Fatalf("%v %v/%d tier %v/%d: %v, want a *MaxDebtError", c.engine, float64(c.lim), c.burst, float64(c.tier), c.tb, err)
		}
		// A frozen clock: on the real one a slow run (qemu) refilled a
		// token of a 1000/s tier between the burst and the request past
		// it, which the limiter rightly admitted.
		l2, err := limit.New(c.lim, c.burst, limit.WithEngine(c.engine), limit.WithSeed(1), limit.WithMaxDebt(mde.Need),
			limit.WithClock(sketchtest.NewFakeClock()))
		if err != nil {
			t.Fatalf("New(WithMaxDebt(%v)): %v", mde.Need, err)
		}
		tr, err := l2.Tier("t", c.tier, c.tb)
		if err != nil {
			t.Errorf("%v %v/%d tier %v/%d: refused on the MaxDebt %v that the first refusal named: %v",
				c.engine, float64(c.lim), c.burst, float64(c.tier), c.tb, mde.Need, err)
			continue
		}
		for i := range c.tb {
			if !tr.Allow("k") {
				t.Fatalf("request %d of the tier's burst %d denied", i+1, c.tb)
			}
		}
		if tr.Allow("k") {
			t.Fatal("request past the tier's burst admitted")
		}
	}
}

// drawRatio draws a tier's ratio r/R the way an adversary would: whole
// fractions 1/k (exact), small fractions a/b, a float, and the rates one
// ulp around R (their cost rounds to the grid).
func drawRatio(rt *rapid.T, rate float64) (tierRate float64, exactR *big.Rat, exactOK bool) {
	switch rapid.IntRange(0, 4).Draw(rt, "ratioKind") {
	case 0:
		k := rapid.IntRange(1, 1000).Draw(rt, "k")
		return rate / float64(k), nil, false
	case 1:
		a := rapid.IntRange(1, 50).Draw(rt, "a")
		b := rapid.IntRange(1, 50).Draw(rt, "b")
		return rate * float64(a) / float64(b), nil, false
	case 2:
		return math.Nextafter(rate, math.Inf(1)), nil, false
	case 3:
		return math.Nextafter(rate, 0), nil, false
	}
	return rate * rapid.Float64Range(1e-3, 50).Draw(rt, "ratio"), nil, false
}

// TestAdvTierNeverEarlyRatios: "An inexact policy is never early against
// its own bucket, and its RetryAfter still predicts its own next decision
// to the millisecond", and "its full burst is admitted at once from an
// empty key", for tiers at adversarial ratios (one ulp off R, 1/1000 of
// R, 50 R), with MaxDebt what the MaxDebtError asks for.
func TestAdvTierNeverEarlyRatios(t *testing.T) {
	testsize.Serial(t)
	rapid.Check(t, func(rt *rapid.T) {
		engine := rapid.SampledFrom([]limit.Engine{limit.Auto, limit.CountMin}).Draw(rt, "engine")
		var rate float64
		if rapid.Bool().Draw(rt, "shortFraction") {
			lim, _, _ := bucketRate(rt)
			rate = float64(lim)
		} else {
			rate = rapid.Float64Range(0.5, 5000).Draw(rt, "rate")
		}
		tierRate, _, _ := drawRatio(rt, rate)
		burst := rapid.IntRange(1, 100).Draw(rt, "burst")
		tierBurst := rapid.IntRange(1, 100).Draw(rt, "tierBurst")
		clk := sketchtest.NewFakeClock()
		clk.Set(rapid.Int64Range(0, 1<<40).Draw(rt, "start"))
		build := func(maxDebt float64) (*limit.Limiter, error) {
			return limit.New(limit.Limit(rate), burst, limit.WithClock(clk), limit.WithSeed(9), limit.WithEngine(engine),
				limit.WithMaxDebt(maxDebt), noAmnesty(engine))
		}
		l, err := build(float64(burst))
		if err != nil {
			rt.Fatal(err)
		}
		tr, err := l.Tier("t", limit.Limit(tierRate), tierBurst)
		var mde *limit.MaxDebtError
		if errors.As(err, &mde) {
			if mde.Need > 1<<24 {
				rt.Skip("the tier needs more than 2^24 tokens of MaxDebt")
			}
			if l, err = build(mde.Need); err != nil {
				rt.Skipf("New with MaxDebt %v: %v", mde.Need, err)
			}
			tr, err = l.Tier("t", limit.Limit(tierRate), tierBurst)
		}
		if err != nil {
			rt.Fatalf("Tier(%v, %d) on %v/%d: %v", tierRate, tierBurst, rate, burst, err)
		}
		for i := range tr.Burst() {
			if !tr.Allow("empty") {
				rt.Fatalf("request %d of the tier's burst %d denied", i+1, tr.Burst())
			}
		}
		if tr.Allow("empty") {
			rt.Fatal("request past the tier's burst admitted")
		}
		up := tierRate
		for range 4 {
			up = math.Nextafter(up, math.Inf(1))
		}
		neverEarly(rt, tr, clk, new(big.Rat).SetFloat64(up), tr.Burst())
	})
}

// TestAdvTierMaxDebtError: "A burst whose cost exceeds MaxDebt is a
// *MaxDebtError naming the MaxDebt it needs" and "(neither clamps a burst
// silently)": a refused tier reports its Limit and Burst, Need > Have,
// matches sketch.ErrInvalidConfig; a limiter built WithMaxDebt(Need)
// (everything else the same) takes the tier, and then admits its whole
// burst from an empty key and not one more.
func TestAdvTierMaxDebtError(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		engine := rapid.SampledFrom([]limit.Engine{limit.Auto, limit.Buckets, limit.CountMin}).Draw(rt, "engine")
		var rate float64
		if engine == limit.Buckets || rapid.Bool().Draw(rt, "shortFraction") {
			lim, _, _ := bucketRate(rt)
			rate = float64(lim)
		} else {
			rate = rapid.Float64Range(0.01, 1e5).Draw(rt, "rate")
		}
		burst := rapid.IntRange(1, 50).Draw(rt, "burst")
		tierRate, _, _ := drawRatio(rt, rate)
		tierBurst := rapid.IntRange(1, 400).Draw(rt, "tierBurst")
		maxDebt := float64(burst) * rapid.Float64Range(1, 3).Draw(rt, "debtFactor")
		clk := sketchtest.NewFakeClock()
		build := func(md float64) (*limit.Limiter, error) {
			return limit.New(limit.Limit(rate), burst, limit.WithClock(clk), limit.WithSeed(9), limit.WithEngine(engine),
				limit.WithMaxDebt(md), noAmnesty(engine))
		}
		l, err := build(maxDebt)
		if err != nil {
			rt.Skipf("New: %v", err)
		}
		tr, err := l.Tier("t", limit.Limit(tierRate), tierBurst)
		if err == nil {
			checkFullBurst(rt, tr, "fits")
			return
		}
		var mde *limit.MaxDebtError
		if !errors.As(err, &mde) {
			rt.Fatalf("Tier(%v, %d): %v, not a *MaxDebtError", tierRate, tierBurst, err)
		}
		if !errors.Is(err, sketch.ErrInvalidConfig) {
			rt.Fatalf("*MaxDebtError does not match ErrInvalidConfig: %v", err)
		}
		if mde.Limit != limit.Limit(tierRate) || mde.Burst != tierBurst || mde.Have != l.MaxDebt() || !(mde.Need > mde.Have) {
			rt.Fatalf("MaxDebtError %+v for tier %v/%d on MaxDebt %v", *mde, tierRate, tierBurst, l.MaxDebt())
		}
		// The need, in time, is at least the tier's burst's: b x R/r tokens
		// of R (on an exact limiter; otherwise New's own token is rounded).
		if lower := float64(tierBurst) * rate / tierRate; l.Exact() && mde.Need < lower*(1-1e-9) {
			rt.Fatalf("Need %v below the burst's b x R/r = %v", mde.Need, lower)
		}
		if mde.Need > 1<<24 {
			return // New refuses it: nothing to build
		}
		l2, err := build(mde.Need)
		if err != nil {
			if engine == limit.Buckets {
				return // documented: on Buckets MaxDebt must still drain within 61.4 s
			}
			rt.Fatalf("New with the MaxDebt %v the error asked for: %v", mde.Need, err)
		}
		tr2, err := l2.Tier("t", limit.Limit(tierRate), tierBurst)
		if err != nil {
			rt.Fatalf("Tier(%v, %d) refused on the MaxDebt %v its own MaxDebtError asked for (engine %v, rate %v): %v",
				tierRate, tierBurst, mde.Need, l2.Engine(), rate, err)
		}
		checkFullBurst(rt, tr2, "rebuilt")
	})
}

func checkFullBurst(rt *rapid.T, tr *limit.Tier, what string) {
	for i := range tr.Burst() {
		if !tr.Allow("empty") {
			rt.Fatalf("%s: request %d of the tier's burst %d denied (clamped?)", what, i+1, tr.Burst())
		}
	}
	if tr.Allow("empty") {
		rt.Fatalf("%s: request past the tier's burst admitted", what)
	}
}
