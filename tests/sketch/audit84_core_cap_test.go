package sketch_test

import (
	"math"
	"testing"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit84CoreCapAtHi: docs/precision.md: "every read of the sketch
// (Query, UpdateAndQuery, QueryDetailed's levels, TryUpdate's decision)
// caps a level's score back at the configured Hi"; "no read exceeds Hi"
// (sketch package doc). Checked for every aggregator, the At forms and the
// rotator, with Hi values no float32 holds.
func TestAudit84CoreCapAtHi(t *testing.T) {
	for _, hi := range []float64{0.1, 1.1, 1e9 + 1, 3.3e38, math.Nextafter(1, 2)} {
		for _, agg := range []sketch.Aggregator{sketch.Min, sketch.Max, sketch.Mean} {
			for _, rot := range []bool{false, true} {
				clk := sketchtest.NewFakeClock()
				cfg := sketch.Config{Levels: 3, CellsPerLevel: 4, Lo: -hi, Hi: hi, Aggregator: agg, Decay: decay.Exponential(1e-3), Clock: clk}
				var s audit84coreAt
				if rot {
					r, err := rotator.New(rotator.Config{Sketch: cfg, Period: 1 << 40})
					if err != nil {
						t.Fatal(err)
					}
					s = r
				} else {
					s, _ = sketch.New(cfg)
				}
				for _, k := range []string{"a", "b", "c", "d", "e"} {
					if got := s.UpdateAndQueryString(k, 2*hi); got != hi {
						t.Errorf("hi=%v %v rot=%v: UpdateAndQuery = %v; want %v", hi, agg, rot, got, hi)
					}
					if got := s.UpdateAndQueryAt(clk.Now(), k, hi); got != hi {
						t.Errorf("hi=%v %v rot=%v: UpdateAndQueryAt = %v; want %v", hi, agg, rot, got, hi)
					}
					if got := s.QueryAt(clk.Now(), k); got != hi {
						t.Errorf("hi=%v %v rot=%v: QueryAt = %v; want %v", hi, agg, rot, got, hi)
					}
					d := s.QueryDetailed([]byte(k))
					if d.Score != hi {
						t.Errorf("hi=%v %v rot=%v: QueryDetailed.Score = %v; want %v", hi, agg, rot, d.Score, hi)
					}
					for _, l := range d.Levels {
						if l.Score != hi {
							t.Errorf("hi=%v %v rot=%v: level %d reads %v; want %v", hi, agg, rot, l.Level, l.Score, hi)
						}
					}
					if !s.TryUpdateString(k, 0, hi) || !s.TryUpdateAt(clk.Now(), k, 0, hi) {
						t.Errorf("hi=%v %v rot=%v: TryUpdate(k, 0, Hi) denied at the clamp", hi, agg, rot)
					}
					if s.TryUpdateString(k, 0, math.Nextafter(hi, 0)) {
						t.Errorf("hi=%v %v rot=%v: TryUpdate(k, 0, below Hi) admitted at the clamp", hi, agg, rot)
					}
					// and the Lo side: a negative clamp reads Lo, never below
					if got := s.UpdateAndQueryString(k, -4*hi); got < -hi {
						t.Errorf("hi=%v %v rot=%v: UpdateAndQuery at Lo = %v; below Lo %v", hi, agg, rot, got, -hi)
					}
				}
			}
		}
	}
}
