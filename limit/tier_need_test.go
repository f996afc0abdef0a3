package limit_test

import (
	"errors"
	"testing"

	"github.com/lfgrudge/grudge/limit"
)

// TestMaxDebtNeedOnTheEngineAutoPicks: a MaxDebtError's Need is priced
// on the engine a limiter built WithMaxDebt(Need) runs on, which under
// Auto may differ from this limiter's. New(1e5, 1) with MaxDebt 1.5 runs
// on the count-min; a Tier(2e5, 4) there asked for 2, at which Auto
// builds the Buckets engine (163 units a token, 326 for MaxDebt), where
// the tier's token costs 82 units and its burst 328: refused again, for
// 2.0123 (found by tests/limit's TestAdvTierMaxDebtError).
func TestMaxDebtNeedOnTheEngineAutoPicks(t *testing.T) {
	for _, c := range []struct {
		rate, maxDebt float64
		burst         int
		tier          limit.Limit
		tierBurst     int
	}{
		{1e5, 1.5, 1, 2e5, 4},
		{1e5, 1.5, 1, 3e5, 7},
		{1000, 1, 1, 3000, 5},
		{10, 20, 20, 2.5, 20},
	} {
		l, err := limit.New(limit.Limit(c.rate), c.burst, limit.WithMaxDebt(c.maxDebt))
		if err != nil {
			t.Fatal(err)
		}
		_, err = l.Tier("t", c.tier, c.tierBurst)
		var m *limit.MaxDebtError
		if !errors.As(err, &m) {
			t.Fatalf("New(%v, %d, MaxDebt %v).Tier(%v, %d): %v, want a *MaxDebtError", c.rate, c.burst, c.maxDebt, float64(c.tier), c.tierBurst, err)
		}
		l2, err := limit.New(limit.Limit(c.rate), c.burst, limit.WithMaxDebt(m.Need))
		if err != nil {
			t.Fatalf("New with the Need %v: %v", m.Need, err)
		}
		tr, err := l2.Tier("t", c.tier, c.tierBurst)
		if err != nil {
			t.Errorf("New(%v, %d, MaxDebt %v) on %v (the first on %v): Tier(%v, %d) refused on the Need its error gave: %v",
				c.rate, c.burst, m.Need, l2.Engine(), l.Engine(), float64(c.tier), c.tierBurst, err)
			continue
		}
		for i := range c.tierBurst {
			if !tr.Allow("k") {
				t.Errorf("rebuilt tier (%v, %d) denied request %d of its burst", float64(c.tier), c.tierBurst, i)
			}
		}
	}
}
