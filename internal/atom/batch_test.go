package atom

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/testsize"
)

// TestBatchAsm compares nextN and decideN (the assembly on amd64) with
// their pure-Go twins, word for word, value for value and verdict for
// verdict, and decideNGeneric with ValueN, the Min and ApplyN (the path
// it short-cuts), on words, deltas, limits and bounds chosen to hit every
// branch: signed zeros, subnormals, the float32 extremes, values on and
// across the bounds, conversions that round down and up, stamps on both
// sides of now (the modular edges included), limits tied with the Min
// plus delta and one ulp either side, and every n from 1 to MaxCells;
// each verdict must come up at least 1,000 times. On a platform without
// the assembly it compares the twins with themselves.
func TestBatchAsm(t *testing.T) {
	testsize.Serial(t)
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
	laws := []decay.Decay{decay.None(), decay.Exponential(1), decay.Linear(3)}
	var counts [4]int
	defer func() {
		for v, c := range counts {
			t.Logf("verdict %d: %d batches", v, c)
			if c < 1000 {
				t.Errorf("verdict %d came up %d times in 300,000 batches: the generator misses it", v, c)
			}
		}
	}()
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
		// decideN on the same words, with a limit at, just above or just
		// below their Min plus delta, or anywhere.
		lowest := math.Inf(1)
		for _, x := range w[:n] {
			lowest = min(lowest, float64(x.Score()))
		}
		limit := lowest + delta
		switch rng.IntN(4) {
		case 1:
			limit = math.Nextafter(limit, math.Inf(1))
		case 2:
			limit = math.Nextafter(limit, math.Inf(-1))
		case 3:
			limit = rng.NormFloat64() * math.Pow(10, float64(rng.IntN(40)-20))
		}
		if math.IsInf(limit, 0) {
			limit = math.Copysign(math.MaxFloat64, limit)
		}
		var va, vg [MaxCells]float64
		var da, dg [MaxCells]Word
		vA := decideN(&w, n, now, delta, limit, lo, hi, &va, &da)
		vG := decideNGeneric(&w, n, now, delta, limit, lo, hi, &vg, &dg)
		if vA != vG {
			t.Fatalf("decideN = %d, the twin %d (n=%d now=%d delta=%v limit=%v lo=%v hi=%v words %x)", vA, vG, n, now, delta, limit, lo, hi, w[:n])
		}
		if vA != Slow && !slices.EqualFunc(va[:n], vg[:n], sameBits) {
			t.Fatalf("decideN values %v, the twin %v (words %x)", va[:n], vg[:n], w[:n])
		}
		if (vA == Admit || vA == AdmitSame) && !slices.Equal(da[:n], dg[:n]) {
			t.Fatalf("decideN words %x, the twin %x (n=%d now=%d delta=%v lo=%v hi=%v words %x)", da[:n], dg[:n], n, now, delta, lo, hi, w[:n])
		}
		if okG == (vA == Slow) {
			t.Fatalf("decideN = %d where nextN reported %v: both must see the same aged words (words %x)", vA, okG, w[:n])
		}
		counts[vA]++
		// The twin is the slow path's decision: ValueN, the Min against
		// limit and ApplyN, under any law (fresh words need none).
		if vG != Slow {
			r := NewRules(laws[iter%len(laws)], lo, hi)
			var vs [MaxCells]float64
			var ws [MaxCells]Word
			lowest := r.ValueN(&w, n, now, &vs)
			want := Deny
			if lowest+delta <= limit {
				want = Admit
				if r.ApplyN(&w, &vs, n, now, delta, &ws) {
					want = AdmitSame
				}
			}
			if vG != want || !slices.EqualFunc(vs[:n], vg[:n], sameBits) || want != Deny && !slices.Equal(ws[:n], dg[:n]) {
				t.Fatalf("decideNGeneric = %d %v %x, ValueN/ApplyN %d %v %x (n=%d now=%d delta=%v limit=%v lo=%v hi=%v words %x)", vG, vg[:n], dg[:n], want, vs[:n], ws[:n], n, now, delta, limit, lo, hi, w[:n])
			}
		}
	}
}

func sameBits(x, y float64) bool { return math.Float64bits(x) == math.Float64bits(y) }

// TestBatchAsmLaneEdges compares the assembly with its twins on every
// combination of per-lane sums at the clamp's and the step's edges: sums
// equal to lo and to hi, one float32 step inside and outside each, a Hi
// no float32 holds, 2^24 and 2^24+1, signed zeros and the smallest
// subnormals, so that blocks mix a lane that needs neither the clamp nor
// the step with one that needs either, in both orders, for n = 1 to 4
// (odd n: a one-word last block). A denial's words are not compared
// (callers ignore them).
func TestBatchAsmLaneEdges(t *testing.T) {
	negZero := float32(math.Copysign(0, -1))
	tiny := math.SmallestNonzeroFloat32
	bounds := [][2]float64{{0, 100}, {0, 1e12}, {-8, 0}, {0, 0.1}, {-0.1, 0.1}, {1, 16777216}, {0, math.MaxFloat32}}
	for _, b := range bounds {
		lo, hi := float64(RoundUp(b[0])), float64(RoundUp(b[1]))
		for _, delta := range []float64{1, -1, 0, math.Copysign(0, -1), tiny, 0.5} {
			var scores []float32
			for _, target := range []float64{lo, hi, b[1], 16777216, 16777217, 0, tiny} {
				x := float32(target - delta)
				scores = append(scores, x, math.Nextafter32(x, float32(math.Inf(1))), math.Nextafter32(x, float32(math.Inf(-1))))
			}
			scores = append(scores, 0, negZero, float32(tiny))
			for i, a := range scores {
				for _, c := range scores[i:] {
					for n := uint32(1); n <= 4; n++ {
						const now = 1000
						var w [MaxCells]Word
						for l := range w {
							s := a
							if l%2 == 1 {
								s = c
							}
							w[l] = Pack(s, now)
						}
						var x, g [MaxCells]Word
						okX, okG := nextN(&w, n, now, delta, lo, hi, &x), nextNGeneric(&w, n, now, delta, lo, hi, &g)
						if okX != okG || !slices.Equal(x[:n], g[:n]) {
							t.Fatalf("nextN = %v %x, the twin %v %x (n=%d delta=%v lo=%v hi=%v words %x)", okX, x[:n], okG, g[:n], n, delta, lo, hi, w[:n])
						}
						limit := float64(min(a, c)) + delta
						var vx, vg [MaxCells]float64
						var dx, dg [MaxCells]Word
						vX := decideN(&w, n, now, delta, limit, lo, hi, &vx, &dx)
						vG := decideNGeneric(&w, n, now, delta, limit, lo, hi, &vg, &dg)
						if vX != vG || !slices.EqualFunc(vx[:n], vg[:n], sameBits) || vX != Deny && !slices.Equal(dx[:n], dg[:n]) {
							t.Fatalf("decideN = %d %v %x, the twin %d %v %x (n=%d delta=%v lo=%v hi=%v words %x)", vX, vx[:n], dx[:n], vG, vg[:n], dg[:n], n, delta, lo, hi, w[:n])
						}
					}
				}
			}
		}
	}
}
