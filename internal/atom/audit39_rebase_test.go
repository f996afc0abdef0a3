package atom

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/testsize"
)

// TestAudit39RebaseOneSided: for linear laws of whole drains (odd ones
// 65..4095, powers of two, huge ones) and fractional drains, every swept
// cell (score, back) reads at the sweep and at every later time at or
// above what the unswept cell reads then, never above hi, back within
// [0, maxBack]; and where the value is whole, the drain whole and a
// float32 in f's binade or the next, under hi and within maxBack, drains
// back to v exactly, the sweep leaves no remainder.
func TestAudit39RebaseOneSided(t *testing.T) {
	testsize.Serial(t)
	rng := rand.New(rand.NewPCG(39, 1))
	drains := []float64{2, 3, 5, 7, 63, 64, 65, 67, 97, 127, 129, 255, 1023, 1025, 2047, 3001, 4093, 4095, 4096, 4097,
		1 << 20, 1<<20 + 1, 1<<31 - 1, 1.5, 2.5, 0.001, 1.0 / 3, 4095.5, 100.25}
	his := []float64{math.MaxFloat32, 1 << 24, 1<<24 + 2, 1 << 25, 1 << 30, 4095 * (1 << 24), 8191 * 60000}
	walk := func(f, v, d, hi float64, maxBack int64) (float64, bool) {
		_, e := math.Frexp(f)
		lim := math.Ldexp(1, e+1)
		g := f
		for g < lim && g <= hi {
			if k := (g - v) / d; k == math.Trunc(k) {
				if k <= float64(maxBack) {
					return g, true
				}
				return 0, false
			}
			g = float64(math.Nextafter32(float32(g), float32(math.Inf(1))))
		}
		return 0, false
	}
	n := 0
	for i := range 12000 {
		d := drains[i%len(drains)]
		hi := his[rng.IntN(len(his))]
		r := NewRules(decay.Linear(1000*d), 0, hi)
		e := 20 + rng.IntN(30)
		s := float64(RoundUp(math.Min(math.Ldexp(1+rng.Float64(), e), r.hi)))
		if i%5 == 0 {
			s = float64(RoundUp(math.Nextafter(math.Ldexp(1, e), 0)))
		}
		var age int64
		switch rng.IntN(3) {
		case 0:
			age = 1<<29 + rng.Int64N(1<<30)
		case 1:
			age = rng.Int64N(1 << 31)
		default:
			// leave v just above a binade edge
			edge := math.Ldexp(1, 24+rng.IntN(26))
			if s > edge+d {
				age = int64((s - edge) / d)
			} else {
				age = rng.Int64N(1 << 20)
			}
		}
		maxBack := int64(1) << 29
		if i%11 == 0 {
			maxBack = rng.Int64N(64)
		}
		v := r.Decay(s, age)
		score, back := r.Rebase(s, age, maxBack)
		f := float64(score)
		if f > r.hi {
			t.Fatalf("d=%v hi=%v s=%v age=%d: score %v above hi", d, hi, s, age, f)
		}
		if back < 0 || back > maxBack {
			t.Fatalf("d=%v s=%v age=%d: back %d outside [0, %d]", d, s, age, back, maxBack)
		}
		for _, dt := range []int64{0, 1, 2, 3, 7, 1000, 12345, 1 << 20, 1 << 28, 1<<29 - 1} {
			if back+dt >= 1<<31 || age+dt >= 1<<31 {
				continue
			}
			got := r.law.LinearApply(f, back+dt)
			want := r.Decay(s, age+dt)
			tol := 0.0
			if d != math.Trunc(d) || 1000*d*float64(age+dt) >= 1<<53 { // float64 noise of an inexact drop, in both readings
				tol = 4 * (math.Nextafter(s, math.Inf(1)) - s)
			}
			if v <= r.hi && got < want-tol {
				t.Fatalf("d=%v hi=%v s=%v age=%d maxBack=%d: swept (%v, back %d) reads %v at +%d ms, below the unswept %v", d, hi, s, age, maxBack, f, back, got, dt, want)
			}
		}
		if v > 0 && d > 1 && d == math.Trunc(d) && v == math.Trunc(v) && float64(RoundUp(v)) > v && v <= r.hi {
			if g, ok := walk(float64(RoundUp(v)), v, d, r.hi, maxBack); ok {
				n++
				if got := r.law.LinearApply(f, back); got != v {
					t.Fatalf("d=%v hi=%v s=%v age=%d maxBack=%d: a float32 %v drains to v=%v exactly, Rebase gave (%v, %d) reading %v (+%v)", d, hi, s, age, maxBack, g, v, f, back, got, got-v)
				}
			}
		}
	}
	t.Logf("%d exact cases checked", n)
}
