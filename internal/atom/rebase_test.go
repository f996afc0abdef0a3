package atom

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/testsize"
)

// TestWholeDrain checks wholeDrain's closed form against a walk up the
// float32 grid: for whole v <= f (f a float32 above 2^24) and whole d, the
// least float32 g >= f within 2d steps with g - v a multiple of d, and
// none when the walk finds none. Odd drains above 64 are the case the
// old 64-step search gave up on (audit 36).
func TestWholeDrain(t *testing.T) {
	testsize.Serial(t)
	rng := rand.New(rand.NewPCG(36, 1))
	walk := func(f, v, d float64) (float64, bool) {
		g := f
		for range 2*int(d) + 2 {
			if math.Mod(g-v, d) == 0 {
				return g, true
			}
			g = float64(math.Nextafter32(float32(g), float32(math.Inf(1))))
		}
		return 0, false
	}
	ds := []float64{2, 3, 6, 64, 65, 67, 1000, 3001, 4093, 4095, 4096, 40961, 1<<20 + 1}
	for i := range 5000 {
		d := ds[i%len(ds)]
		e := 24 + rng.IntN(26) // f in [2^24, 2^50)
		f := float64(float32(math.Ldexp(1+rng.Float64(), e)))
		if i%7 == 0 { // the top of a binade: the solution may be in the next one
			f = float64(math.Nextafter32(float32(math.Ldexp(1, e+1)), 0))
		}
		step := float64(math.Nextafter32(float32(f), float32(math.Inf(1)))) - f
		v := f - math.Floor(rng.Float64()*step)
		got, ok := wholeDrain(f, v, d)
		if d > 4096 { // the walk is too slow; the properties are checked below
			if ok && (math.Mod(got-v, d) != 0 || got < f || float64(float32(got)) != got) {
				t.Fatalf("wholeDrain(%v, %v, %v) = %v: not a float32 >= f with g - v a multiple of d", f, v, d, got)
			}
			continue
		}
		want, wok := walk(f, v, d)
		if ok && (math.Mod(got-v, d) != 0 || got < f || float64(float32(got)) != got) {
			t.Fatalf("wholeDrain(%v, %v, %v) = %v: not a float32 >= f with g - v a multiple of d", f, v, d, got)
		}
		if ok && wok && got != want {
			t.Fatalf("wholeDrain(%v, %v, %v) = %v, want the least, %v", f, v, d, got, want)
		}
		if !ok && wok && want < math.Ldexp(1, e+1) {
			t.Fatalf("wholeDrain(%v, %v, %v) found none; the walk found %v in f's binade", f, v, d, want)
		}
	}
}

// TestRebaseOddDrainExact: a linear law of an odd drain above 64 units a
// ms (limit's short-fraction units, e.g. 4093/2^20 tokens a second) swept
// many times reads, after each sweep, exactly what it read before it: the
// sweep leaves no remainder to add up (audit 36: 1 ms early after a
// sweep, one more at each).
func TestRebaseOddDrainExact(t *testing.T) {
	for _, d := range []float64{65, 67, 999, 4093, 4095} {
		r := NewRules(decay.Linear(1000*d), 0, math.MaxFloat32)
		rng := rand.New(rand.NewPCG(uint64(d), 2))
		for range 200 {
			s := float64(RoundUp(math.Floor(math.Ldexp(1+rng.Float64(), 36+rng.IntN(8)))))
			age := int64(0) // the cell's age at the last sweep (its back-dating)
			for sweep := range 5 {
				age += 1<<29 + rng.Int64N(1<<20)
				v := r.law.LinearApply(s, age) // what the cell reads before the sweep
				if v <= 0 {
					break
				}
				score, back := r.Rebase(s, age, 1<<29)
				if got := r.law.LinearApply(float64(score), back); got != v {
					t.Fatalf("d=%v sweep %d: the swept cell reads %v, %v above what it read before (a remainder stayed in the cell)", d, sweep, got, got-v)
				}
				s, age = float64(score), back
			}
		}
	}
}
