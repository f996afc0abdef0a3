package atomiccell_test

// Audit 140: bounds and law parameters at the float64 and float32 edges.

import (
	"math"
	"testing"

	"github.com/lfgrudge/grudge/atomiccell"
	"github.com/lfgrudge/grudge/decay"
)

// TestAudit140EdgeBoundsAndLaws: NewRules takes "bounds [lo, hi], each
// rounded up to float32": bounds that no float32 holds (5e-324, 1e-300,
// -5e-324, a float32 denormal / 2) clamp at their rounded-up value, and
// with the law parameters at their ends (Exponential(5e-324),
// Exponential(MaxFloat64), Linear(5e-324), Linear(MaxFloat64)) Next and
// Value give no NaN or Inf, stay within the rounded bounds, keep the sign,
// and Value is never below the law's own result.
func TestAudit140EdgeBoundsAndLaws(t *testing.T) {
	laws := []decay.Decay{nil, decay.Exponential(5e-324), decay.Exponential(math.MaxFloat64), decay.Linear(5e-324), decay.Linear(math.MaxFloat64)}
	bounds := [][2]float64{
		{0, 5e-324}, {0, 1e-300}, {0, math.SmallestNonzeroFloat32 / 2}, {-5e-324, 1}, {-1e-300, 1e-300},
		{-math.MaxFloat32, math.MaxFloat32}, {math.Inf(-1), math.Inf(1)},
	}
	deltas := []float64{0, math.Copysign(0, -1), 5e-324, -5e-324, 1e-300, -1e-300, 1, -1, math.MaxFloat64, -math.MaxFloat64}
	stamps := []uint32{0, 1, 1 << 31, math.MaxUint32}
	ages := []uint32{0, 1, 1000, 1<<31 - 1}
	for _, lw := range laws {
		ref := lw
		if ref == nil {
			ref = decay.None()
		}
		for _, b := range bounds {
			r := atomiccell.NewRules(lw, b[0], b[1])
			lo, hi := float64(atomiccell.RoundUp(b[0])), float64(atomiccell.RoundUp(b[1]))
			for _, st := range stamps {
				for _, d := range deltas {
					w := atomiccell.Pack(0, st)
					for _, age := range ages {
						now := st + age
						nw := r.Next(w, now, d)
						s := float64(nw.Score())
						if math.IsNaN(s) || math.IsInf(s, 0) || s < lo || s > hi {
							t.Fatalf("law %v bounds %v: Next(%v@%d, %d, %v) = %v, want within [%v, %v]", lw, b, w.Score(), st, now, d, s, lo, hi)
						}
						if d > 0 && s < 0 || d < 0 && s > 0 {
							t.Fatalf("law %v bounds %v: Next(0, %v) = %v crosses 0", lw, b, d, s)
						}
						if d > 0 && d <= hi && s < d && float64(float32(d)) == d {
							t.Fatalf("law %v bounds %v: Next(0, %v) = %v, below the delta", lw, b, d, s)
						}
						for _, later := range ages {
							v := r.Value(nw, nw.Stamp()+later)
							want := ref.Apply(s, int64(later))
							if math.IsNaN(v) || math.IsInf(v, 0) || v < want || math.Abs(v) > math.Abs(s) {
								t.Fatalf("law %v bounds %v: Value(%v, +%d ms) = %v, want in [%v, |%v|]", lw, b, s, later, v, want, s)
							}
						}
					}
				}
			}
		}
	}
	// A positive delta into bounds below the smallest float32 stores the
	// smallest float32 (the rounded-up Hi); a negative one into Lo =
	// -5e-324 stores -0 (the rounded-up Lo).
	r := atomiccell.NewRules(nil, -5e-324, 5e-324)
	if got := r.Next(0, 0, 1).Score(); got != math.SmallestNonzeroFloat32 {
		t.Errorf("Hi 5e-324: Next(0, 1) = %v, want the smallest float32 (Hi rounded up)", got)
	}
	if got := r.Next(0, 0, -1).Score(); got != 0 || !math.Signbit(float64(got)) {
		t.Errorf("Lo -5e-324: Next(0, -1) = %v, want -0 (Lo rounded up)", got)
	}
}
