package atom

import (
	"math"
	"testing"
)

// TestAudit49BatchNonFiniteTwinAgree: the batch primitives take finite
// arguments (the sketch panics on NaN and ±Inf before calling them:
// TestAudit37NonFinitePanicsBeforeTouch); should one slip through, the
// assembly and the pure-Go twin still agree bit for bit, for deltas and
// limits of NaN and ±Inf, on fresh, stale and pinned words.
func TestAudit49BatchNonFiniteTwinAgree(t *testing.T) {
	for _, d := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		for _, sc := range []float32{5, 0, 1e6, -3, math.MaxFloat32} {
			for _, st := range []uint32{100, 99, 1} {
				for _, b := range [][2]float64{{0, 1e6}, {-3, 1e6}, {math.Inf(-1), math.Inf(1)}, {0, math.MaxFloat32}} {
					var w, a, g [MaxCells]Word
					for i := range w {
						w[i] = Pack(sc, st)
					}
					okA := nextN(&w, 3, 100, d, b[0], b[1], &a)
					okG := nextNGeneric(&w, 3, 100, d, b[0], b[1], &g)
					if okA != okG || (okA && [3]Word(a[:3]) != [3]Word(g[:3])) {
						t.Fatalf("nextN delta %v score %v stamp %d bounds %v: asm %v %x, twin %v %x", d, sc, st, b, okA, a[:3], okG, g[:3])
					}
					for _, dl := range [][2]float64{{d, 10}, {1, d}, {d, d}} {
						var va, vg [MaxCells]float64
						var da, dg [MaxCells]Word
						vA := decideN(&w, 3, 100, dl[0], dl[1], b[0], b[1], &va, &da)
						vG := decideNGeneric(&w, 3, 100, dl[0], dl[1], b[0], b[1], &vg, &dg)
						if vA != vG {
							t.Fatalf("decideN delta %v limit %v score %v: asm %v, twin %v", dl[0], dl[1], sc, vA, vG)
						}
						if vA == Admit || vA == AdmitSame {
							for i := range 3 {
								if da[i] != dg[i] || math.Float64bits(va[i]) != math.Float64bits(vg[i]) {
									t.Fatalf("decideN delta %v limit %v score %v level %d: asm %x/%v, twin %x/%v", dl[0], dl[1], sc, i, da[i], va[i], dg[i], vg[i])
								}
							}
						}
					}
				}
			}
		}
	}
}
