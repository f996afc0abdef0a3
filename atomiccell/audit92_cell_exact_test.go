package atomiccell_test

import (
	"math"
	"math/big"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/lfgrudge/grudge/atomiccell"
	"github.com/lfgrudge/grudge/decay"
)

// a92cellLeastF32 is the least float32 at or above the exact rational x,
// saturating at ±MaxFloat32.
func a92cellLeastF32(x *big.Rat) float32 {
	f, _ := x.Float32()
	if math.IsInf(float64(f), 1) {
		return math.MaxFloat32
	}
	if math.IsInf(float64(f), -1) {
		return -math.MaxFloat32
	}
	if new(big.Rat).SetFloat64(float64(f)).Cmp(x) < 0 {
		f = math.Nextafter32(f, float32(math.Inf(1)))
	}
	return f
}

func a92cellRat(v float64) *big.Rat { return new(big.Rat).SetFloat64(v) }

// a92cellDraw returns a score-like float64 of a random magnitude and sign.
func a92cellDraw(r *rand.Rand) float64 {
	mag := math.Ldexp(1+r.Float64(), r.IntN(140)-70)
	switch r.IntN(8) {
	case 0:
		return 0
	case 1:
		return float64(r.IntN(1000))
	}
	if r.IntN(2) == 0 {
		return -mag
	}
	return mag
}

// TestAudit92CellNextExactRational: atomiccell/doc.go ("the decayed score
// plus delta is narrowed to float32 rounding the exact sum toward +Inf
// ... Bounds are rounded the same way (see Rules), so a clamped score
// never drops below Lo") and Rules.Next ("the least float32 at or above
// the exact sum, clamped"). Under decay.None at the stored stamp, Next
// must give exactly the least float32 at or above clamp(score + delta,
// RoundUp(lo), RoundUp(hi)), computed in exact rationals; under
// decay.Linear at a later time, at or above the exact linear law plus
// delta (clamped), and at most one float32 step above that least float32
// (the decayed value is a float64 rounded up first). Fixed seed.
func TestAudit92CellNextExactRational(t *testing.T) {
	r := rand.New(rand.NewPCG(92, 1))
	bounds := [][2]float64{{0, 1e9}, {-5, 0.1}, {-0.1, 1e12}, {math.Inf(-1), math.Inf(1)}, {-1e-3, 1e-3}, {0, 1.1}, {-1e38, 3e38}}
	rates := []float64{0.1, 3, 1e-7, 123.456}
	for _, b := range bounds {
		lo, hi := b[0], b[1]
		lo32, hi32 := atomiccell.RoundUp(lo), atomiccell.RoundUp(hi)
		clamp := func(x *big.Rat) *big.Rat {
			if x.Cmp(a92cellRat(float64(lo32))) < 0 {
				return a92cellRat(float64(lo32))
			}
			if x.Cmp(a92cellRat(float64(hi32))) > 0 {
				return a92cellRat(float64(hi32))
			}
			return x
		}
		none := atomiccell.NewRules(decay.None(), lo, hi)
		for range 3000 {
			score := atomiccell.RoundUp(min(max(a92cellDraw(r), float64(lo32)), float64(hi32)))
			delta := a92cellDraw(r)
			if r.IntN(4) == 0 {
				delta = math.Ldexp(delta, -60) // far below the score's ulp
			}
			w := atomiccell.Pack(score, 1000)
			got := none.Next(w, 1000, delta)
			exact := new(big.Rat).Add(a92cellRat(float64(score)), a92cellRat(delta))
			want := a92cellLeastF32(clamp(exact))
			if got.Score() != want || got.Stamp() != 1000 {
				t.Fatalf("bounds [%v, %v]: Next(%v, +%v) = %v @%d, want %v @1000 (the least float32 at or above the exact clamped sum)", lo, hi, score, delta, got.Score(), got.Stamp(), want)
			}
			rate := rates[r.IntN(len(rates))]
			dt := int64(r.IntN(5000) + 1)
			lin := atomiccell.NewRules(decay.Linear(rate), lo, hi)
			gotL := lin.Next(w, uint32(1000+dt), delta)
			drop := new(big.Rat).Mul(a92cellRat(rate), new(big.Rat).SetFrac64(dt, 1000))
			v := a92cellRat(float64(score))
			switch v.Sign() {
			case 1:
				v.Sub(v, drop)
				if v.Sign() < 0 {
					v.SetInt64(0)
				}
			case -1:
				v.Add(v, drop)
				if v.Sign() > 0 {
					v.SetInt64(0)
				}
			}
			exactL := clamp(new(big.Rat).Add(v, a92cellRat(delta)))
			least := a92cellLeastF32(exactL)
			if a92cellRat(float64(gotL.Score())).Cmp(exactL) < 0 {
				t.Fatalf("bounds [%v, %v]: Linear(%v) Next(%v, dt %d, +%v) = %v, below the exact %v", lo, hi, rate, score, dt, delta, gotL.Score(), exactL.FloatString(30))
			}
			if gotL.Score() > math.Nextafter32(least, float32(math.Inf(1))) {
				t.Fatalf("bounds [%v, %v]: Linear(%v) Next(%v, dt %d, +%v) = %v, more than a float32 step above %v", lo, hi, rate, score, dt, delta, gotL.Score(), least)
			}
			if gotL.Stamp() != uint32(1000+dt) {
				t.Fatalf("Linear Next stamped %d, want %d", gotL.Stamp(), 1000+dt)
			}
		}
	}
}

// TestAudit92CellAddConcurrentExactSum: Cell.Add under decay.None from
// several goroutines, with deltas that are not float32 values: each add
// narrows its exact sum up, so the cell ends at or above the exact total
// of all deltas, and at or below what adding them one by one in any order
// with rounding up can reach (each add at most one float32 step up per
// add). Pinned at Hi, adds change nothing and the cell stays at
// RoundUp(Hi) bit for bit.
func TestAudit92CellAddConcurrentExactSum(t *testing.T) {
	rules := atomiccell.NewRules(decay.None(), -10, 1e6)
	var c atomiccell.Cell
	c.Store(atomiccell.Pack(0, 7))
	const workers, per = 4, 500
	deltas := []float64{0.1, 0.3, 1.0 / 3, 2.5e-3}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for range per {
				c.Add(rules, 7, deltas[w], c.Load())
			}
		})
	}
	wg.Wait()
	exact := new(big.Rat)
	for _, d := range deltas {
		exact.Add(exact, new(big.Rat).Mul(a92cellRat(d), big.NewRat(per, 1)))
	}
	got := c.Load()
	if a92cellRat(float64(got.Score())).Cmp(exact) < 0 {
		t.Errorf("cell = %v after %d adds, below their exact total %v", got.Score(), workers*per, exact.FloatString(12))
	}
	// Each add rounds up by less than one float32 ulp of the running
	// score (at most ulp(2^10) = 2^-13 here, the total staying below
	// 2^10): the excess is below adds x 2^-13.
	ex, _ := exact.Float64()
	if excess := float64(got.Score()) - ex; excess > float64(workers*per)*math.Ldexp(1, -13) {
		t.Errorf("cell = %v, %v above the exact total %v: more than a float32 step per add", got.Score(), excess, ex)
	}
	if got.Stamp() != 7 {
		t.Errorf("stamp %d, want 7", got.Stamp())
	}
	// Pinned at Hi: adds change nothing, bit for bit.
	hi := atomiccell.NewRules(decay.None(), 0, 0.1)
	var p atomiccell.Cell
	p.Store(hi.Next(atomiccell.Pack(0, 7), 7, 5))
	pinned := p.Load()
	if pinned.Score() != atomiccell.RoundUp(0.1) {
		t.Fatalf("pinned cell %v, want RoundUp(0.1) = %v", pinned.Score(), atomiccell.RoundUp(0.1))
	}
	for w := range workers {
		wg.Go(func() {
			for i := range per {
				if got := p.Add(hi, 7-uint32(i%2), float64(w+1), p.Load()); got != pinned {
					t.Errorf("Add at Hi returned %x, want the pinned %x", uint64(got), uint64(pinned))
					return
				}
			}
		})
	}
	wg.Wait()
	if p.Load() != pinned {
		t.Errorf("cell pinned at Hi moved: %x, want %x", uint64(p.Load()), uint64(pinned))
	}
}
