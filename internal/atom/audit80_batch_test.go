package atom

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/testsize"
)

// TestAudit80BatchHorizonEdges: nextN and decideN (assembly on amd64,
// the twins under -tags purego) against nextNGeneric and decideNGeneric,
// and Rules.NextN against Rules.Next word by word, with stamps at the
// modular edges (now - stamp = 0, 1, 2^31-1, 2^31, 2^31+1, 2^32-1), ±0
// and subnormal scores, a -0 lower bound, and garbage (aged, non-zero,
// NaN) in the words past n, which the assembly reads for an odd n.
func TestAudit80BatchHorizonEdges(t *testing.T) {
	testsize.Serial(t)
	rng := rand.New(rand.NewPCG(80, 4))
	gaps := []uint32{0, 1, 1<<31 - 1, 1 << 31, 1<<31 + 1, math.MaxUint32, 1000}
	negZero := float32(math.Copysign(0, -1))
	scores := []float32{0, negZero, 1, -1, math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32,
		0x1p-126, math.MaxFloat32, -math.MaxFloat32, 16777216, 0.1, -0.1}
	deltas := []float64{0, math.Copysign(0, -1), 1, -1, 1e-46, -1e-46, 0x1p-150, 1e39, -1e39,
		float64(math.MaxFloat32), 0.1, 1e-17}
	bounds := [][2]float64{{0, 1e9}, {math.Copysign(0, -1), 1}, {-100, 100}, {-0.1, 0.1},
		{-math.MaxFloat32, math.MaxFloat32}, {0, math.SmallestNonzeroFloat32}}
	laws := []decay.Decay{decay.None(), decay.Exponential(1), decay.Linear(3)}
	garbage := Pack(float32(math.NaN()), 0)
	for _, b := range bounds {
		lo, hi := float64(RoundUp(b[0])), float64(RoundUp(b[1]))
		for iter := range 4000 {
			n := uint32(1 + iter%MaxCells)
			now := rng.Uint32()
			var w [MaxCells]Word
			for i := range w {
				w[i] = garbage | Word(now-uint32(rng.IntN(1000)+1))
			}
			for i := range n {
				w[i] = Pack(scores[rng.IntN(len(scores))], now-gaps[rng.IntN(len(gaps))])
			}
			delta := deltas[rng.IntN(len(deltas))]
			limit := []float64{0, 1, -1, 1e9, math.MaxFloat64, -math.MaxFloat64}[rng.IntN(6)]

			var a, g [MaxCells]Word
			okA := nextN(&w, n, now, delta, lo, hi, &a)
			okG := nextNGeneric(&w, n, now, delta, lo, hi, &g)
			if okA != okG {
				t.Fatalf("nextN ok %v, generic %v (n %d, now %d, words %x)", okA, okG, n, now, w[:n])
			}
			if okA {
				for i := range n {
					if a[i] != g[i] {
						t.Fatalf("nextN word %d: %#x, generic %#x (in %#x, delta %v, [%v, %v])", i, a[i], g[i], w[i], delta, lo, hi)
					}
				}
			}
			var va, vg [MaxCells]float64
			var da, dg [MaxCells]Word
			vA := decideN(&w, n, now, delta, limit, lo, hi, &va, &da)
			vG := decideNGeneric(&w, n, now, delta, limit, lo, hi, &vg, &dg)
			if vA != vG {
				t.Fatalf("decideN %v, generic %v (n %d, words %#x, delta %v, limit %v)", vA, vG, n, w[:n], delta, limit)
			}
			if vA != Slow {
				for i := range n {
					if math.Float64bits(va[i]) != math.Float64bits(vg[i]) {
						t.Fatalf("decideN v[%d] %v, generic %v", i, va[i], vg[i])
					}
					if vA != Deny && da[i] != dg[i] {
						t.Fatalf("decideN nw[%d] %#x, generic %#x", i, da[i], dg[i])
					}
				}
			}
			// The public batch against the one-word form, under each law.
			for _, d := range laws {
				r := NewRules(d, b[0], b[1])
				var nw [MaxCells]Word
				r.NextN(&w, n, now, delta, &nw)
				for i := range n {
					if one := r.Next(w[i], now, delta); nw[i] != one {
						t.Fatalf("NextN word %d = %#x, Next %#x (law %T, in %#x, now %d, delta %v)", i, nw[i], one, d, w[i], now, delta)
					}
				}
				var v [MaxCells]float64
				low := r.ValueN(&w, n, now, &v)
				want := math.Inf(1)
				for i := range n {
					x := r.Value(w[i], now)
					if math.Float64bits(v[i]) != math.Float64bits(x) {
						t.Fatalf("ValueN[%d] %v, Value %v", i, v[i], x)
					}
					want = math.Min(want, x)
				}
				if low != want && !(low == 0 && want == 0) {
					t.Fatalf("ValueN lowest %v, want %v", low, want)
				}
			}
		}
	}
}
