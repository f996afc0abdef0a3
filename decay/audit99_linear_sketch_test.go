package decay_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit99LinearSketchTinyRateCellMatchesLaw: a sketch evaluates
// Linear inline (decay/doc.go, "On the hot path": the compiled law,
// docs/precision.md: "decay.Linear.Apply (and the engine's inlined
// law.Compiled.LinearApply, the same function)"). Through a 1x1 sketch
// (the only cell is the key's), under rates on both sides of 2^-900 and
// ordinary ones, a float32 score stored at 0 ms and read at ages up to
// 2^20 ms reads decay.Linear(rate).Apply of it bit for bit, and at ages
// up to 2^30 ms (past a horizon sweep) never below the exact drain; and after writes of 0 at later times (each decayed
// value stored rounded up to a float32) the read is never below the
// exact drain of the whole age (API.md, "Min aggregation never
// under-estimates").
func TestAudit99LinearSketchTinyRateCellMatchesLaw(t *testing.T) {
	rng := rand.New(rand.NewPCG(99, 21))
	rates := []float64{5e-324, 0x1p-1022, 0x1p-960, 0x1p-901, math.Nextafter(0x1p-900, 0), 0x1p-900, math.Nextafter(0x1p-900, 1), 1e-250, 0.1, 0.7, 1000}
	for range 4 {
		rates = append(rates, math.Ldexp(1+rng.Float64(), -901-rng.IntN(174)))
	}
	var scores []float64
	for _, f := range []float32{math.SmallestNonzeroFloat32, 0x1p-126, 0x1p-100, 0.1, 1, 1 << 24, 3e38} {
		scores = append(scores, float64(f), -float64(f))
	}
	for range 4 {
		f := float32(math.Ldexp(1+rng.Float64(), rng.IntN(250)-149))
		scores = append(scores, float64(f), -float64(f))
	}
	reads := []int64{1, 2, 999, 1000, 1001, 1 << 20, 1 << 30}
	writes := []int64{3, 1500, 1 << 25}
	for _, r := range rates {
		law := decay.Linear(r)
		for _, s := range scores {
			clk := sketchtest.NewFakeClock()
			sk, err := sketch.New(sketch.Config{Levels: 1, CellsPerLevel: 1, Decay: law, Lo: -math.MaxFloat32, Hi: math.MaxFloat32, Clock: clk})
			if err != nil {
				t.Fatalf("sketch.New(Linear(%v)): %v", r, err)
			}
			sk.UpdateString("k", s)
			for _, dt := range reads {
				clk.Set(dt)
				got, want := sk.QueryString("k"), law.Apply(s, dt)
				// Past 2^30 ms a horizon sweep re-stamps the cell (its
				// value rounded up to a float32): the law's bits hold
				// before it.
				if dt < 1<<30 && math.Float64bits(got) != math.Float64bits(want) {
					t.Errorf("Linear(%v): %v stored, read at %d ms = %.17g; Apply = %.17g", r, s, dt, got, want)
				}
				if ex := a99Exact(r, s, dt); a99Below(got, ex) {
					t.Errorf("Linear(%v): %v stored, read at %d ms = %.17g below the exact %s", r, s, dt, got, a99Str(ex))
				}
			}
			// Writes of 0 after the reads, at later times: the cell then
			// holds each decayed value rounded up to a float32.
			base := reads[len(reads)-1]
			for _, w := range writes {
				clk.Set(base + w)
				sk.UpdateString("k", 0)
				got := sk.QueryString("k")
				if ex := a99Exact(r, s, base+w); a99Below(got, ex) {
					t.Errorf("Linear(%v): %v stored, written with 0 to %d ms, read %.17g below the exact %s", r, s, base+w, got, a99Str(ex))
				}
				if math.Abs(got) > math.Abs(s) || got*s < 0 {
					t.Errorf("Linear(%v): %v stored, written with 0 to %d ms, read %v: past the score or across 0", r, s, base+w, got)
				}
			}
		}
	}
}
