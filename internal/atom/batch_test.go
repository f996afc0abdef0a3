package atom

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestBatchAsm compares nextN (the assembly on amd64) with its pure-Go
// twin, word for word and flag for flag, on words, deltas and bounds
// chosen to hit every branch: signed zeros, subnormals, the float32
// extremes, values on and across the bounds, conversions that round down
// and up, stamps on both sides of now (the modular edges included), and
// every n from 1 to MaxCells. On a platform without the
// assembly it compares the twin with itself.
func TestBatchAsm(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, uint64(len(t.Name()))))
	scores := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 0.1, -0.1, 1e-45, -1e-45,
		math.SmallestNonzeroFloat32, math.MaxFloat32, -math.MaxFloat32, 16777217, 3.4e38, 1e12, -1e12}
	deltas := []float64{0, math.Copysign(0, -1), 1, -1, 0.1, 1e-300, -1e-300, 1e300, -1e300,
		math.MaxFloat64, -math.MaxFloat64, 16777217.5, 1e12, 0.30000000000000004}
	bounds := [][2]float64{{0, 1e12}, {-1e12, 1e12}, {0, math.MaxFloat32}, {-math.MaxFloat32, math.MaxFloat32},
		{0, 1}, {-1, 0.1000000014901161}, {-0.5, 0}}
	pick := func() float32 {
		switch rng.IntN(3) {
		case 0:
			return scores[rng.IntN(len(scores))]
		case 1:
			return float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(40)-20)))
		default:
			for {
				f := math.Float32frombits(rng.Uint32())
				if !math.IsNaN(float64(f)) && !math.IsInf(float64(f), 0) {
					return f
				}
			}
		}
	}
	stamps := []uint32{0, 1, 1 << 31, 1<<31 - 1, 1<<31 + 1, math.MaxUint32}
	for iter := range 300000 {
		now := stamps[rng.IntN(len(stamps))] + uint32(rng.IntN(5)) - 2
		if iter%2 == 0 {
			now = rng.Uint32()
		}
		b := bounds[rng.IntN(len(bounds))]
		lo, hi := float64(RoundUp(b[0])), float64(RoundUp(b[1]))
		delta := deltas[rng.IntN(len(deltas))]
		if rng.IntN(3) == 0 {
			delta = rng.NormFloat64() * math.Pow(10, float64(rng.IntN(40)-20))
		}
		n := uint32(1 + rng.IntN(MaxCells))
		var w [MaxCells]Word
		for i := range w {
			st := now
			switch rng.IntN(4) {
			case 0:
				st = now - uint32(rng.IntN(3)) + 1
			case 1:
				st = rng.Uint32()
			}
			s := pick()
			if rng.IntN(4) == 0 {
				s = 0
			}
			w[i] = Pack(s, st)
		}
		var a, g [MaxCells]Word
		okA := nextN(&w, n, now, delta, lo, hi, &a)
		okG := nextNGeneric(&w, n, now, delta, lo, hi, &g)
		if okA != okG {
			t.Fatalf("nextN reported %v, the twin %v (n=%d now=%d delta=%v lo=%v hi=%v words %x)", okA, okG, n, now, delta, lo, hi, w[:n])
		}
		if okA && !slices.Equal(a[:n], g[:n]) {
			t.Fatalf("nextN = %x, the twin %x (n=%d now=%d delta=%v lo=%v hi=%v words %x)", a[:n], g[:n], n, now, delta, lo, hi, w[:n])
		}
	}
}
