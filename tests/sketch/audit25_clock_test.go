package sketch_test

import (
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit25ClockExtremes: a Clock that starts anywhere in int64 (MinInt64,
// negative, near MaxInt64, pinned at MaxInt64) never makes New or an
// operation panic, and the sketch never reads NaN or below the reference
// (int64 stamps) under None, Exponential and Linear.
func TestAudit25ClockExtremes(t *testing.T) {
	for _, st := range []int64{math.MinInt64, math.MinInt64 + 1, -1 << 40, -1, 0, 1 << 62, math.MaxInt64 - 1<<40, math.MaxInt64 - 100000, math.MaxInt64} {
		for _, d := range []decay.Decay{decay.None(), decay.Exponential(math.Ln2 / 60), decay.Linear(1)} {
			clk := sketchtest.NewFakeClock()
			clk.Set(st)
			cfg := sketch.Config{Levels: 2, CellsPerLevel: 16, Hi: 1e9, Decay: d, Clock: clk}
			var s *sketch.Sketch
			p := a25Panics(t, "new", func() { s = mustNewSketch(t, cfg) })
			if p != nil {
				t.Errorf("start %d: New panicked %v", st, p)
				continue
			}
			r := mustNewReference(t, cfg)
			for _, step := range []int64{0, 1, 1000, 1 << 31, 1 << 33, 1 << 40} {
				if st > math.MaxInt64-step-10 {
					clk.Set(math.MaxInt64)
				} else {
					clk.Advance(time.Duration(step) * time.Millisecond)
				}
				p := a25Panics(t, "ops", func() {
					s.UpdateString("k", 100)
					r.UpdateString("k", 100)
					s.TryUpdateString("k", 1, 1e9)
					r.TryUpdateString("k", 1, 1e9)
				})
				if p != nil {
					t.Errorf("start %d %v: ops panicked %v", st, d, p)
					break
				}
				g, w := s.QueryString("k"), r.QueryString("k")
				if g < w || math.IsNaN(g) {
					t.Errorf("start %d %#v step %d: Query %v < ref %v", st, d, step, g, w)
				}
			}
		}
	}
}
