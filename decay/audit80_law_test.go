package decay_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/lfgrudge/grudge/decay"
)

// TestAudit80ProvidedLawsExtremes: decay's "Guarantees of the provided
// laws" at extreme parameters, ages and scores: dt <= 0 returns the score;
// |Apply(s, dt)| <= |s| and the sign never flips; NaN in gives NaN out;
// never NaN for a non-NaN score (±Inf scores included, huge lambda x dt
// included); composes within float tolerance while the values stay
// normal.
func TestAudit80ProvidedLawsExtremes(t *testing.T) {
	laws := []decay.Decay{decay.None(),
		decay.Exponential(1e-300), decay.Exponential(1e-9), decay.Exponential(1), decay.Exponential(1e300), decay.Exponential(math.MaxFloat64),
		decay.Linear(1e-300), decay.Linear(1), decay.Linear(1e300), decay.Linear(math.MaxFloat64)}
	scores := []float64{0, math.Copysign(0, -1), 1, -1, math.MaxFloat32, -math.MaxFloat32, math.MaxFloat64, -math.MaxFloat64,
		math.SmallestNonzeroFloat64, -math.SmallestNonzeroFloat64, math.Inf(1), math.Inf(-1), 1e-300}
	dts := []int64{math.MinInt64, -1, 0, 1, 1000, 1 << 31, 1 << 53, math.MaxInt64}
	for _, d := range laws {
		for _, s := range scores {
			for _, dt := range dts {
				v := d.Apply(s, dt)
				if dt <= 0 && math.Float64bits(v) != math.Float64bits(s) {
					t.Errorf("%#v.Apply(%v, %d) = %v: dt <= 0 must return the score", d, s, dt, v)
				}
				if math.IsNaN(v) {
					t.Errorf("%#v.Apply(%v, %d) = NaN", d, s, dt)
					continue
				}
				if math.Abs(v) > math.Abs(s) || (s > 0 && v < 0) || (s < 0 && v > 0) {
					t.Errorf("%#v.Apply(%v, %d) = %v: grew or crossed 0", d, s, dt, v)
				}
			}
			if v := d.Apply(math.NaN(), 5); !math.IsNaN(v) {
				t.Errorf("%#v.Apply(NaN) = %v", d, v)
			}
		}
	}
	r := rand.New(rand.NewPCG(80, 7))
	for range 20000 {
		lambda := math.Pow(10, r.Float64()*8-6)
		d := decay.Exponential(lambda)
		s := math.Ldexp(1+r.Float64(), r.IntN(200)-100)
		a, b := 1+r.Int64N(1<<30), 1+r.Int64N(1<<30)
		two, one := d.Apply(d.Apply(s, a), b), d.Apply(s, a+b)
		if one < 1e-250 || one == 0 {
			continue
		}
		if math.Abs(two-one) > 1e-9*one {
			t.Fatalf("Exponential(%v) does not compose: %v vs %v (s %v, %d + %d)", lambda, two, one, s, a, b)
		}
	}
}
