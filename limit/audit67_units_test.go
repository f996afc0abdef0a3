package limit_test

import (
	"math"
	"testing"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit67FixedRateRoundedDownPast2m (fixed in the docs, stop 47:
// limit/doc.go and internal/units now state "less than 2^-7 (2^-12 at
// MaxDebt 2000)", 2^(1-m); checked against that). limit/doc.go, "Exactness":
// "Otherwise decisions are ... late by at most the float32 rounding of a
// stored value ..., or the rate is rounded down by at most 2^-8 of itself
// (2^-13 at MaxDebt 2000) for a rate that is not a short fraction or
// whose token a float32 cannot add exactly up to MaxDebt"; internal/units
// says the same ("rounded down (never early) by at most 2^-m of
// itself"). units.RoundUpBits rounds the token's 1000/r ms up to m
// significant bits, a relative step of up to 2^(1-m) where 1000/r sits
// just above a power of two: the rate is rounded down by up to twice the
// stated bound. Measured on ResetAfter of a full burst (exact: b/r s).
func TestAudit67FixedRateRoundedDownPast2m(t *testing.T) {
	cases := []struct {
		r      float64
		b      int
		maxD   float64
		stated float64 // the doc's bound on the rate's rounding
	}{
		{1000 / 1024.01, 1000, 2000, 0x1p-12},          // token 1024.01 ms: 13 bits -> 1024.25
		{0.9444444444444444, 958687, 958687, 0x1p-7},   // 17/18: token 1058.82 ms, 8 bits -> 1064
		{1000 / (2048 * 1.0005), 30000, 60000, 0x1p-7}, // token 2049.02 ms: 8 bits -> 2056
	}
	for _, c := range cases {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_000_000)
		l, err := limit.New(limit.Limit(c.r), c.b, limit.WithClock(clk), limit.WithSeed(1), limit.WithMaxDebt(c.maxD))
		if err != nil {
			t.Fatal(err)
		}
		d := l.DecideN(l.Now(), "k", c.b)
		if !d.Allowed {
			t.Fatal("full burst denied")
		}
		exact := float64(c.b) / c.r * 1000 // ms
		got := float64(d.ResetAfter.Milliseconds())
		// rate as the limiter holds it: b / ResetAfter (less 1 ms of ceiling)
		rel := 1 - exact/(got-1)
		if rel > c.stated {
			t.Errorf("New(%v, %d, WithMaxDebt(%v)) (Exact %v, %v): ResetAfter of a full burst %v ms, exact %.1f ms: "+
				"the rate is held %.3g%% low, above the stated bound 2^%d (%.3g%%)",
				c.r, c.b, c.maxD, l.Exact(), l.Engine(), got, exact, 100*rel, int(math.Log2(c.stated)), 100*c.stated)
		}
	}
}
