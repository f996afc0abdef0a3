package sketch_test

import (
	"math"
	"testing"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit37FixedExpNudgeGrowsScore: with a valid but slow
// Exponential law (lambda = 1e-10/s, which New accepts), a decay of 1 ms
// multiplies a score by exp(-1e-13), which is above 1 - 2^-40, so the
// 2^-40 upward nudge makes the "decayed" value larger than the score.
// RoundUp turns that into one float32 ulp, so every Update(k, 0) at a new
// millisecond raises the cell by one ulp. After 100,000 zero adds, one a
// ms, a key that received 1000 and nothing since reads 1006.1, though
// its truth (and the reference) is 1000*exp(-1e-5) = 999.99. That breaks:
//   - decay/decay.go, Decay.Apply: "Monotone toward 0";
//   - docs/precision.md: "2^-40 is 2^16 times below float32 resolution,
//     so the nudge costs nothing visible";
//   - docs/design.md, section 1: the bias "covers the few float64 ulps by
//     which the table product can differ from math.Exp of the whole gap".
//
// The zero deltas add nothing; the growth comes from the nudge alone.
func TestAudit37FixedExpNudgeGrowsScore(t *testing.T) {
	const lambda = 1e-10
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	cfg := sketch.Config{Levels: 2, CellsPerLevel: 64, Decay: decay.Exponential(lambda), Hi: 1e9, Clock: clk}
	s := mustNewSketch(t, cfg)
	r := mustNewReference(t, cfg)
	s.UpdateString("k", 1000)
	r.UpdateString("k", 1000)
	const n = 100_000
	for range n {
		clk.Set(clk.NowMillis() + 1)
		s.UpdateString("k", 0)
		r.UpdateString("k", 0)
	}
	got, ref := s.QueryString("k"), r.QueryString("k")
	truth := 1000 * math.Exp(-lambda*n/1000)
	if got > 1000 {
		t.Errorf("after %d Update(k, 0), one a ms, under Exponential(%g): Query = %.4f > 1000, the score before them (truth %.6f, reference %.6f): the 2^-40 nudge makes exponential decay grow a score, and RoundUp makes each write keep one float32 ulp of that growth (decay/decay.go: Apply is \"Monotone toward 0\"; docs/precision.md: the nudge \"costs nothing visible\")", n, lambda, got, truth, ref)
	}
}
