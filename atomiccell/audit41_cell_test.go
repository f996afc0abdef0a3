package atomiccell_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/lfgrudge/grudge/atomiccell"
	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit41PackRoundTrip: Pack/Score/Stamp round-trip every float32 bit
// pattern class and stamp; the zero Word is +0 at stamp 0.
func TestAudit41PackRoundTrip(t *testing.T) {
	var z atomiccell.Word
	if math.Float32bits(z.Score()) != 0 || z.Stamp() != 0 {
		t.Fatalf("zero Word: score %v (bits %x), stamp %d; want +0 at 0", z.Score(), math.Float32bits(z.Score()), z.Stamp())
	}
	rng := rand.New(rand.NewPCG(41, 1))
	specials := []float32{0, float32(math.Copysign(0, -1)), math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32, math.MaxFloat32, -math.MaxFloat32, 1, -1}
	for i := range 200000 {
		var f float32
		if i < len(specials) {
			f = specials[i]
		} else {
			f = math.Float32frombits(rng.Uint32())
			if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
				continue
			}
		}
		st := rng.Uint32()
		if i%7 == 0 {
			st = math.MaxUint32
		}
		w := atomiccell.Pack(f, st)
		if math.Float32bits(w.Score()) != math.Float32bits(f) || w.Stamp() != st {
			t.Fatalf("Pack(%v, %d): Score %v Stamp %d", f, st, w.Score(), w.Stamp())
		}
		if uint64(w)>>32 != uint64(math.Float32bits(f)) || uint32(w) != st {
			t.Fatalf("Pack(%v, %d) = %x: layout is not score bits high, stamp low", f, st, uint64(w))
		}
	}
}

// TestAudit41RoundUp: RoundUp(x) is the least float32 >= x for every x in
// the float32 range (rounding toward +Inf), saturates at +-MaxFloat32
// beyond it (Inf included), and passes NaN through.
func TestAudit41RoundUp(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 2))
	check := func(x float64) {
		got := atomiccell.RoundUp(x)
		g := float64(got)
		if math.IsNaN(g) || math.IsInf(g, 0) {
			t.Fatalf("RoundUp(%v) = %v: not finite", x, got)
		}
		switch {
		case x > math.MaxFloat32:
			if got != math.MaxFloat32 {
				t.Fatalf("RoundUp(%v) = %v, want MaxFloat32 (saturation)", x, got)
			}
			return
		case x < -math.MaxFloat32:
			if got != -math.MaxFloat32 {
				t.Fatalf("RoundUp(%v) = %v, want -MaxFloat32 (saturation)", x, got)
			}
			return
		}
		if g < x {
			t.Fatalf("RoundUp(%v) = %v: below x", x, got)
		}
		if prev := math.Nextafter32(got, float32(math.Inf(-1))); float64(prev) >= x && got != 0 {
			t.Fatalf("RoundUp(%v) = %v, but %v is also >= x: not the least float32 at or above x", x, got, prev)
		}
	}
	for _, x := range []float64{0, math.Copysign(0, -1), 5e-324, -5e-324, 1e-46, -1e-46, 0.1, -0.1, 1 << 24, 1<<24 + 1, -(1<<24 + 1),
		math.MaxFloat32, -math.MaxFloat32, math.Nextafter(math.MaxFloat32, 0), math.Nextafter(math.MaxFloat32, math.Inf(1)),
		math.Nextafter(-math.MaxFloat32, math.Inf(-1)), math.MaxFloat64, -math.MaxFloat64, math.Inf(1), math.Inf(-1)} {
		check(x)
	}
	for range 500000 {
		var x float64
		switch rng.IntN(3) {
		case 0:
			x = math.Float64frombits(rng.Uint64())
			if math.IsNaN(x) {
				continue
			}
		case 1:
			x = rng.NormFloat64() * math.Pow(10, float64(rng.IntN(80)-40))
		default:
			f := math.Float32frombits(rng.Uint32())
			if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
				continue
			}
			x = float64(f) + float64(rng.IntN(3)-1)*math.Abs(float64(f))*1e-9
		}
		check(x)
	}
	if r := atomiccell.RoundUp(math.NaN()); !math.IsNaN(float64(r)) {
		t.Fatalf("RoundUp(NaN) = %v, want NaN (documented)", r)
	}
	if r := atomiccell.RoundUp(math.Inf(1)); r != math.MaxFloat32 {
		t.Fatalf("RoundUp(+Inf) = %v", r)
	}
}

// TestAudit41ElapsedNewer: modular age arithmetic and the horizon.
func TestAudit41ElapsedNewer(t *testing.T) {
	for _, st := range []uint32{0, 1, 12345, 1<<31 - 1, 1 << 31, math.MaxUint32 - 5, math.MaxUint32} {
		for _, c := range []struct {
			d    uint32
			want int64
		}{{0, 0}, {1, 1}, {1000, 1000}, {1<<31 - 1, 1<<31 - 1}, {1 << 31, 0}, {1<<31 + 1, 0}, {math.MaxUint32, 0}} {
			now := st + c.d
			if got := atomiccell.Elapsed(st, now); got != c.want {
				t.Errorf("Elapsed(%d, %d) = %d, want %d", st, now, got, c.want)
			}
			wantNewer := st
			if c.want > 0 {
				wantNewer = now
			}
			if got := atomiccell.Newer(st, now); got != wantNewer {
				t.Errorf("Newer(%d, %d) = %d, want %d", st, now, got, wantNewer)
			}
		}
	}
}

// TestAudit41NextContract: Next is decay for the age, plus delta, clamp,
// round up, at the newer stamp; clamps never below Lo or above Hi (each
// rounded up); a backwards now neither decays nor moves the stamp.
func TestAudit41NextContract(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 3))
	laws := []decay.Decay{nil, decay.None(), decay.Linear(3), decay.Linear(1e6), decay.Exponential(0.5), decay.Exponential(40)}
	bounds := [][2]float64{{0, 100}, {-5, 5}, {-0.1, 0.1}, {0, 0.3}, {-1e30, 1e30}, {math.Inf(-1), math.Inf(1)}, {0, 1 << 24}}
	n := 0
	for _, lw := range laws {
		for _, b := range bounds {
			r := atomiccell.NewRules(lw, b[0], b[1])
			lo, hi := float64(atomiccell.RoundUp(b[0])), float64(atomiccell.RoundUp(b[1]))
			var ref decay.Decay = lw
			if ref == nil {
				ref = decay.None()
			}
			for range 3000 {
				s := atomiccell.RoundUp(lo + (hi-lo)*rng.Float64())
				if float64(s) > hi {
					s = float32(hi)
				}
				st := rng.Uint32()
				age := []int64{0, 1, 7, 999, 65535, 1 << 20, 1<<31 - 1, -1, -1000}[rng.IntN(9)]
				now := st + uint32(age)
				delta := []float64{0, 1, -1, 0.1, 1e-9, 1e40, -1e40, math.MaxFloat64, -math.MaxFloat64, rng.NormFloat64() * 10}[rng.IntN(10)]
				w := atomiccell.Pack(s, st)
				nw := r.Next(w, now, delta)
				dt := max(age, 0)
				want := ref.Apply(float64(s), dt) + delta
				want = math.Max(lo, math.Min(hi, want))
				g := float64(nw.Score())
				if g < want || g < lo || g > hi || math.IsNaN(g) {
					t.Fatalf("%v [%v,%v]: Next(%v@%d, now %d, %v) = %v; want >= %v within [%v, %v]", lw, b[0], b[1], s, st, now, delta, g, want, lo, hi)
				}
				if nw.Stamp() != atomiccell.Newer(st, now) {
					t.Fatalf("Next stamp %d, want Newer(%d, %d) = %d", nw.Stamp(), st, now, atomiccell.Newer(st, now))
				}
				if v := r.Value(w, now); v < ref.Apply(float64(s), dt) {
					t.Fatalf("%v: Value(%v@%d, %d) = %v below the law's %v", lw, s, st, now, v, ref.Apply(float64(s), dt))
				}
				n++
			}
		}
	}
	t.Logf("%d Next/Value cases", n)
}

// TestAudit41ValueNeverBelowLaw: Rules.Value is never below the law's own
// float64 result, for the exponential law across its table boundary
// (2^24 ms), tiny and huge scores, both signs, and many lambdas.
func TestAudit41ValueNeverBelowLaw(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 4))
	lambdas := []float64{1e-12, 1e-9, 2e-9, 1e-7, 1e-3, 0.1, 0.5, math.Ln2, 3, 100, 1e4, 1e6}
	worst := 0.0
	for _, lam := range lambdas {
		d := decay.Exponential(lam)
		r := atomiccell.NewRules(d, -math.MaxFloat32, math.MaxFloat32)
		for range 20000 {
			var s float32
			switch rng.IntN(3) {
			case 0:
				s = float32(rng.Float64() * 1000)
			case 1:
				s = math.Float32frombits(rng.Uint32() & 0x7f7fffff)
			default:
				s = -float32(rng.Float64() * 1e6)
			}
			var dt int64
			switch rng.IntN(4) {
			case 0:
				dt = 1 + rng.Int64N(1000)
			case 1:
				dt = 1<<24 - 5 + rng.Int64N(10)
			case 2:
				dt = 1 + rng.Int64N(1<<31-1)
			default:
				dt = 1 + rng.Int64N(1<<24)
			}
			now := uint32(dt) + 17
			got := r.Value(atomiccell.Pack(s, 17), now)
			want := d.Apply(float64(s), dt)
			if got < want {
				t.Fatalf("lambda %v: Value(%v, %d ms) = %v below the law's %v", lam, s, dt, got, want)
			}
			if math.Abs(got) > math.Abs(float64(s)) {
				t.Fatalf("lambda %v: Value(%v, %d ms) = %v: grew", lam, s, dt, got)
			}
			if math.Abs(want) > 1e-280 {
				worst = math.Max(worst, (got-want)/math.Abs(want))
			}
		}
	}
	t.Logf("worst relative upward bias %.3g (|law| > 1e-280)", worst)
}

// TestAudit41AddConcurrentExact: G goroutines Add(+1) on one cell at
// GOMAXPROCS 1..8: the cell ends exactly G*N, its stamp the newest now
// any of them used (stamps never move backwards), with stale views.
func TestAudit41AddConcurrentExact(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		r := atomiccell.NewRules(nil, -1e9, 1e9)
		var c atomiccell.Cell
		const G, N = 8, 3000
		var wg sync.WaitGroup
		for g := range G {
			wg.Go(func() {
				var stale atomiccell.Word
				for i := range N {
					now := uint32(1000 + (i*G+g)%5000)
					w := c.Load()
					if i%3 == 0 {
						w = stale
					}
					c.Add(r, now, 1, w)
					if i%2 == 0 {
						c.Add(r, now, 0, c.Load()) // a no-op add
					}
				}
			})
		}
		wg.Wait()
		w := c.Load()
		if w.Score() != G*N {
			t.Fatalf("cell = %v after %d concurrent Add(1), want exactly %d", w.Score(), G*N, G*N)
		}
		maxNow := uint32(0)
		for g := range G {
			for i := range N {
				maxNow = max(maxNow, uint32(1000+(i*G+g)%5000))
			}
		}
		if w.Stamp() != maxNow {
			t.Fatalf("stamp %d, want the newest now %d", w.Stamp(), maxNow)
		}
	})
}

// TestAudit41AddDecayConcurrentOneSided: concurrent Adds under a decay
// law with a clock that moves: the final score is >= the float64
// reference replayed in the stored order's worst case (every add decays
// from its own time): here, with positive adds only and the newest now
// last, score >= sum of each add decayed from its now to the final now.
func TestAudit41AddDecayConcurrentOneSided(t *testing.T) {
	for _, lw := range []decay.Decay{decay.Linear(0.5), decay.Exponential(0.2)} {
		t.Run(fmt.Sprint(lw), func(t *testing.T) {
			sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
				r := atomiccell.NewRules(lw, 0, 1e12)
				var c atomiccell.Cell
				const G, N = 4, 2000
				var wg sync.WaitGroup
				for g := range G {
					wg.Go(func() {
						for i := range N {
							c.Add(r, uint32(i), 1+float64(g), c.Load())
						}
					})
				}
				wg.Wait()
				final := uint32(N)
				got := r.Value(c.Load(), final)
				// A lower bound of the truth: each add of goroutine g at
				// time i, decayed alone from i to final (linear drain is
				// shared, so the sum of separately drained adds is <= the
				// truth for the linear law; exponential is exact-linear).
				var lower float64
				for g := range G {
					for i := range N {
						lower += lw.Apply(1+float64(g), int64(final)-int64(i))
					}
				}
				if got < lower*(1-1e-9) {
					t.Fatalf("%v: cell reads %v at %d, below the lower bound %v", lw, got, final, lower)
				}
			})
		})
	}
}

// TestAudit41SaturateInfBounds: infinite bounds saturate at +-MaxFloat32:
// no Add ever stores Inf or NaN.
func TestAudit41SaturateInfBounds(t *testing.T) {
	r := atomiccell.NewRules(decay.Exponential(1), math.Inf(-1), math.Inf(1))
	var c atomiccell.Cell
	for _, d := range []float64{math.MaxFloat64, math.MaxFloat64, 1e39, -math.MaxFloat64, -math.MaxFloat64, -1e39, math.MaxFloat64} {
		w := c.Add(r, 5, d, c.Load())
		f := float64(w.Score())
		if math.IsInf(f, 0) || math.IsNaN(f) || math.Abs(f) != math.MaxFloat32 {
			t.Fatalf("Add(%v) stored %v, want +-MaxFloat32", d, f)
		}
	}
	if v := r.Value(c.Load(), 5+1000); math.IsInf(v, 0) || v >= math.MaxFloat32 {
		t.Fatalf("saturated cell read %v a second later under Exponential(1)", v)
	}
}

// TestAudit41NoAllocs: the cell operations do not allocate.
func TestAudit41NoAllocs(t *testing.T) {
	r := atomiccell.NewRules(decay.Exponential(0.3), 0, 1e9)
	var c atomiccell.Cell
	now := uint32(0)
	var sink float64
	for name, f := range map[string]func(){
		"Add":     func() { now++; c.Add(r, now, 1, c.Load()) },
		"Next":    func() { now++; sink += float64(r.Next(c.Load(), now, 1).Score()) },
		"Value":   func() { now += 7; sink += r.Value(c.Load(), now) },
		"RoundUp": func() { sink += float64(atomiccell.RoundUp(sink + 0.1)) },
	} {
		if n := testing.AllocsPerRun(1000, f); n != 0 {
			t.Errorf("%s: %v allocs per call", name, n)
		}
	}
	_ = sink
}
