package atom

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/lfgrudge/grudge/internal/testsize"
)

// a49Float32 returns a random float32 from raw bits (NaN excluded), or an
// edge value.
func a49Float32(rng *rand.Rand) float32 {
	edges := []float32{0, float32(math.Copysign(0, -1)), math.Float32frombits(1), -math.Float32frombits(1),
		math.Float32frombits(0x007fffff), math.MaxFloat32, -math.MaxFloat32, 1, -1}
	if rng.IntN(4) == 0 {
		return edges[rng.IntN(len(edges))]
	}
	for {
		f := math.Float32frombits(rng.Uint32())
		if !math.IsNaN(float64(f)) && !math.IsInf(float64(f), 0) {
			return f
		}
	}
}

// a49Float64 returns a random finite float64: raw bits, a float32 value,
// or a value a few float64 ulps off a float32 one.
func a49Float64(rng *rand.Rand) float64 {
	switch rng.IntN(3) {
	case 0:
		for {
			f := math.Float64frombits(rng.Uint64())
			if !math.IsNaN(f) && !math.IsInf(f, 0) {
				return f
			}
		}
	case 1:
		return float64(a49Float32(rng))
	default:
		f := float64(a49Float32(rng))
		for range rng.IntN(4) + 1 {
			if rng.IntN(2) == 0 {
				f = math.Nextafter(f, math.Inf(1))
			} else {
				f = math.Nextafter(f, math.Inf(-1))
			}
		}
		if math.IsInf(f, 0) {
			return 0
		}
		return f
	}
}

// TestAudit49BatchRandomBitsTwin: nextN and decideN (assembly on amd64,
// the twins under -tags purego) against nextNGeneric and decideNGeneric
// on random bit patterns: per-cell scores and stamps (not a cross
// product: every cell differs), deltas and limits from raw float64 bits,
// bounds rounded up to float32 as Rules stores them, including bounds at
// the scores themselves (the clamps pinned). Bit-for-bit agreement, and
// every new score finite, within [lo, hi] and >= clamp(score + delta).
func TestAudit49BatchRandomBitsTwin(t *testing.T) {
	testsize.Serial(t)
	rng := rand.New(rand.NewPCG(49, 1))
	iters := 200_000
	if testing.Short() {
		iters = 20_000
	}
	var fresh, verdicts int
	for it := range iters {
		n := uint32(rng.IntN(MaxCells) + 1)
		now := rng.Uint32()
		var w [MaxCells]Word
		for i := range w {
			st := now
			switch rng.IntN(4) {
			case 1:
				st = now - uint32(rng.IntN(3))
			case 2:
				st = rng.Uint32()
			}
			w[i] = Pack(a49Float32(rng), st)
		}
		var lo, hi float64
		switch rng.IntN(4) {
		case 0:
			lo, hi = math.Inf(-1), math.Inf(1)
		case 1: // pinned: a bound equal to one of the scores
			a, b := float64(w[0].Score()), float64(w[rng.IntN(int(n))].Score())
			lo, hi = math.Min(a, b), math.Max(a, b)
		default:
			a, b := a49Float64(rng), a49Float64(rng)
			lo, hi = math.Min(a, b), math.Max(a, b)
		}
		lo, hi = float64(RoundUp(lo)), float64(RoundUp(hi))
		if lo > hi || (lo > 0) || (hi < 0) {
			// Rules keep 0 inside [lo, hi]; move the bound that excludes it.
			lo, hi = math.Min(lo, 0), math.Max(hi, 0)
		}
		delta := a49Float64(rng)
		if rng.IntN(5) == 0 {
			delta = 0
		}
		var a, g [MaxCells]Word
		okA := nextN(&w, n, now, delta, lo, hi, &a)
		okG := nextNGeneric(&w, n, now, delta, lo, hi, &g)
		if okA != okG {
			t.Fatalf("it %d: nextN ok %v, twin %v: n=%d now=%d delta=%v lo=%v hi=%v w=%x", it, okA, okG, n, now, delta, lo, hi, w[:n])
		}
		if okA {
			fresh++
			for i := range n {
				if a[i] != g[i] {
					t.Fatalf("it %d: nextN word %d = %x, twin %x (delta=%v lo=%v hi=%v w=%x)", it, i, a[i], g[i], delta, lo, hi, w[i])
				}
				f := float64(a[i].Score())
				want := math.Max(lo, math.Min(hi, float64(w[i].Score())+delta))
				if math.IsNaN(f) || math.IsInf(f, 0) || f < want || f < lo || f > hi {
					t.Fatalf("it %d: nextN word %d score %v, want >= %v within [%v, %v] (w=%x delta=%v)", it, i, f, want, lo, hi, w[i], delta)
				}
			}
		}
		for _, limit := range []float64{a49Float64(rng), float64(w[0].Score()) + delta, lo, hi} {
			var va, vg [MaxCells]float64
			var da, dg [MaxCells]Word
			vA := decideN(&w, n, now, delta, limit, lo, hi, &va, &da)
			vG := decideNGeneric(&w, n, now, delta, limit, lo, hi, &vg, &dg)
			if vA != vG {
				t.Fatalf("it %d: decideN = %d, twin %d: n=%d delta=%v limit=%v lo=%v hi=%v w=%x", it, vA, vG, n, delta, limit, lo, hi, w[:n])
			}
			if vA == Admit || vA == AdmitSame {
				verdicts++
				for i := range n {
					if da[i] != dg[i] || math.Float64bits(va[i]) != math.Float64bits(vg[i]) {
						t.Fatalf("it %d: decideN level %d: %x/%v, twin %x/%v (delta=%v lo=%v hi=%v w=%x)", it, i, da[i], va[i], dg[i], vg[i], delta, lo, hi, w[i])
					}
				}
			}
		}
	}
	t.Logf("fresh nextN batches %d, admitted decideN %d of %d iterations", fresh, verdicts, iters)
}
