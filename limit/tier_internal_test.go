package limit

import (
	"math"
	"math/big"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/internal/units"
)

// TestCostOfNewRate: the policy New builds and the one costOf prices for
// New's own rate are the same, on every kind of units (short fractions
// exact and beyond 2^24 units, rates that are not short fractions, the
// Buckets plan), so SetLimit(l.Limit()) and Tier(l.Limit(), l.Burst())
// decide exactly as New's policy does.
func TestCostOfNewRate(t *testing.T) {
	testsize.Serial(t)
	rates := []Limit{10, 3, 1000, 1e6, 1e-6, Limit(1) / 60, Every(3 * time.Second), Every(7 * time.Millisecond),
		Every(time.Hour / 1000), Limit(math.Pi), 7.3, 1234.5678, 0.37, 5e4 / 3}
	for _, r := range rates {
		for _, burst := range []int{1, 7, 100, 5000} {
			for _, debt := range []float64{0, 4 * float64(burst), 1 << 20} {
				for _, e := range []Engine{Auto, CountMin} {
					if debt != 0 && debt < float64(burst) {
						continue
					}
					opts := []Option{WithEngine(e)}
					if debt != 0 { // 0: the default (WithMaxDebt(0) is refused since stop 64)
						opts = append(opts, WithMaxDebt(debt))
					}
					l, err := New(r, burst, opts...)
					if err != nil {
						continue
					}
					base := l.p.Load()
					unit, exact := l.costOf(float64(r))
					if unit != l.unit || exact != l.exact {
						t.Fatalf("%v/%d debt %v %v: costOf %v %v, New's %v %v", float64(r), burst, debt, l.Engine(), unit, exact, l.unit, l.exact)
					}
					p, err := l.newParams(r, burst, l.name)
					if err != nil || *p != *base {
						t.Fatalf("%v/%d debt %v %v: newParams %+v (%v), New's %+v", float64(r), burst, debt, l.Engine(), p, err, *base)
					}
				}
			}
		}
	}
}

// TestCostOfRoundsUp: a policy's cost is never below its exact share,
// 1000 x drain / r units, is on the engine's grid, and is exact exactly
// when it equals that share on an exact limiter; a tier R/k costs k
// times New's unit, exactly.
func TestCostOfRoundsUp(t *testing.T) {
	for _, r := range []Limit{10, 3, 1000, Limit(1) / 60, Limit(math.Pi), 0.37, 5e4 / 3} {
		for _, e := range []Engine{Auto, CountMin} {
			l, err := New(r, 10, WithMaxDebt(1000), WithEngine(e))
			if err != nil {
				t.Fatal(err)
			}
			for _, tr := range []float64{float64(r) / 2, float64(r) / 7, float64(r) * 3, float64(r) * 2 / 3, 1, 0.1, 123.456} {
				unit, exact := l.costOf(tr)
				x := new(big.Rat).SetFloat64(tr)
				if p, q, ok := units.Fraction(tr); ok {
					x.SetFrac(p, q)
				}
				share := new(big.Rat).Quo(new(big.Rat).SetFloat64(1000*l.drain), x)
				c := new(big.Rat).SetFloat64(unit).Cmp(share)
				if c < 0 {
					t.Fatalf("%v %v tier %v: cost %v below its share %v", float64(r), l.Engine(), tr, unit, share.FloatString(12))
				}
				if exact && (c != 0 || !l.exact) {
					t.Fatalf("%v %v tier %v: exact with cost %v, share %v", float64(r), l.Engine(), tr, unit, share.FloatString(12))
				}
				if l.bits == 0 {
					if g := math.Ldexp(unit, l.shift); g != math.Trunc(g) {
						t.Fatalf("%v %v tier %v: cost %v off the grid 2^-%d", float64(r), l.Engine(), tr, unit, l.shift)
					}
					if l.exact && c == 0 && !exact {
						t.Fatalf("%v %v tier %v: cost %v is the share but not exact", float64(r), l.Engine(), tr, unit)
					}
				}
			}
			for k := 1; k <= 50; k++ {
				unit, exact := l.costOf(float64(r) / float64(k))
				if l.exact && (unit != float64(k)*l.unit || !exact) {
					t.Fatalf("%v %v tier R/%d: cost %v (exact %v), want %v", float64(r), l.Engine(), k, unit, exact, float64(k)*l.unit)
				}
			}
		}
	}
}

// TestCostOfGrid: on an exact count-min the grid is finer than a unit
// (docs/design.md, section 9): at 100/s (a token of 10 units) a tier of
// 400/s costs 2.5 units, exactly; on Buckets, costs are whole units.
func TestCostOfGrid(t *testing.T) {
	l := MustNew(100, 10, WithEngine(CountMin))
	if u, exact := l.costOf(400); u != 2.5 || !exact || l.unit != 10 {
		t.Fatalf("count-min 100/s, tier 400/s: cost %v exact %v (unit %v)", u, exact, l.unit)
	}
	b := MustNew(100, 10, WithEngine(Buckets))
	for _, r := range []float64{400, 7, 33.3} {
		if u, _ := b.costOf(r); u != float64(int64(u)) {
			t.Fatalf("buckets tier %v: cost %v not whole", r, u)
		}
	}
}
