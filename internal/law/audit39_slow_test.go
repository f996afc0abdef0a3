package law_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/law"
	"github.com/lfgrudge/grudge/internal/testsize"
)

// TestAudit39ExpSlowLawsOneSided: exponential laws around the table
// threshold (1000 x 2^-39 = 1.819e-9/s) and far below and above it:
// Apply (and ExpFast where it answers) never reads below the true decay
// s x e^(-lambda dt/1000) (beyond float64 noise of the reference, about x x 2^-52 relative: the
// nudge is 2^-40 = 9.1e-13) nor above the score's magnitude, for positive and
// negative scores, tiny to MaxFloat32, dt from 1 ms to 2^31 ms.
func TestAudit39ExpSlowLawsOneSided(t *testing.T) {
	thr := 1000 * math.Ldexp(1, -39)
	lams := []float64{1e-15, 1e-12, 1e-10, 1e-9, thr * 0.999, thr * (1 - 1e-9), thr, thr * (1 + 1e-9), thr * 1.001, thr * 1.01, 2 * thr, 1e-8, 1e-6, 1e-3, 0.3, 100, 1e5}
	for i := 1; i < 20; i++ {
		lams = append(lams, math.Nextafter(thr, 0)-float64(i)*1e-24, thr+float64(i)*1e-24)
	}
	rng := rand.New(rand.NewPCG(39, 3))
	dts := []int64{1, 2, 3, 1000, 1<<24 - 1, 1 << 24, 1<<24 + 1, 1 << 30, 1<<31 - 1}
	for _, lam := range lams {
		c := law.Compile(decay.Exponential(lam))
		for range 3000 {
			s := float64(float32(math.Ldexp(1+rng.Float64(), rng.IntN(250)-120)))
			if rng.IntN(3) == 0 {
				s = -s
			}
			if rng.IntN(20) == 0 {
				s = math.MaxFloat32
			}
			dt := dts[rng.IntN(len(dts))]
			if rng.IntN(2) == 0 {
				dt = 1 + rng.Int64N(1<<31-1)
			}
			x := lam * float64(dt) / 1000
			truth := s * math.Exp(-x/2) * math.Exp(-x/2) // no subnormal factor
			got := c.Apply(s, dt)
			tol := math.Abs(truth)*(1e-15+x*4e-16) + 1e-322 // float64 noise of the reference
			if s > 0 && (got < truth-tol || got > s) {
				t.Fatalf("lambda=%v s=%v dt=%d: Apply = %v, want in [%v, %v] (true decay, score)", lam, s, dt, got, truth, s)
			}
			if s < 0 && (got < truth-tol || got > 0) {
				t.Fatalf("lambda=%v s=%v dt=%d: Apply = %v, want in [%v, 0]", lam, s, dt, got, truth)
			}
			if v, ok := c.ExpFast(s, dt); ok {
				if s > 0 && (v < truth-tol || v > s) || s < 0 && (v < truth-tol || v > 0) {
					t.Fatalf("lambda=%v s=%v dt=%d: ExpFast = %v, true %v", lam, s, dt, v, truth)
				}
			}
		}
	}
}

// TestAudit39ExpNeverGrowsUnderWrites: laws around the threshold, a
// float32 score re-stamped every ms with its decayed value rounded up
// (what a zero add stores), 200,000 times: never above the start.
func TestAudit39ExpNeverGrowsUnderWrites(t *testing.T) {
	testsize.Serial(t)
	thr := 1000 * math.Ldexp(1, -39)
	for _, lam := range []float64{1e-12, thr * 0.5, math.Nextafter(thr, 0), thr, math.Nextafter(thr, 1), thr * 1.0001, thr * 2, 1e-8} {
		c := law.Compile(decay.Exponential(lam))
		for _, s0 := range []float32{1000, 1, 16777215, math.MaxFloat32, 3e-30, -1000, -7} {
			s := s0
			for range 200000 {
				v := c.Apply(float64(s), 1)
				n := float32(v)
				if float64(n) < v {
					n = math.Nextafter32(n, float32(math.Inf(1)))
				}
				s = n
			}
			if s0 > 0 && s > s0 || s0 < 0 && (s > 0 || s < s0) {
				t.Fatalf("lambda=%v: %v after 200,000 1-ms re-stamps reads %v: decay grew the score", lam, s0, s)
			}
		}
	}
}
