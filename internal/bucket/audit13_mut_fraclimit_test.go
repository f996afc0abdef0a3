package bucket

import (
	"math/big"
	"testing"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit13FractionalLimitNeverOver: TryUpdate "never admits past the
// limit" (package doc): with a limit that is not a whole number of ticks
// the limit rounds down, so the load after an admission is at most the
// limit, checked against exact rationals (the load is a whole number of
// ticks, Quantum.PerUnit to the load unit). Time is frozen. Mutation
// audit13 M15 (limitUnits rounding up) admits a second 1 under 1.9999.
func TestAudit13FractionalLimitNeverOver(t *testing.T) {
	for _, law := range []Law{Linear(1000, 100), Linear(10, 40), Linear(3, 7)} {
		for _, lim := range []float64{1.9999, 2.5, 3.0001, 6.99} {
			clk := sketchtest.NewFakeClock()
			clk.Set(2_000_000)
			e := newTest(t, 64, law, clk)
			perUnit := e.Quantum().PerUnit
			limR := new(big.Rat).SetFloat64(lim)
			load := new(big.Rat)
			for i := range 10 {
				ok := e.TryUpdate("k", 1, lim)
				next := new(big.Rat).Add(load, big.NewRat(1, 1))
				if ok {
					load = next
				}
				if load.Cmp(limR) > 0 {
					t.Fatalf("law %+v (%v ticks a unit) limit %v: request %d admitted to a load of %v", law, perUnit, lim, i, load.FloatString(4))
				}
				// A request that fits exactly (whole loads, whole ticks) is
				// admitted: the engine is exact for whole loads.
				if !ok && next.Cmp(limR) <= 0 {
					t.Fatalf("law %+v limit %v: request %d denied at load %v", law, lim, i, load.FloatString(4))
				}
			}
		}
	}
}
