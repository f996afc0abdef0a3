package sketch_test

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit37CellLinearizableMixedSign: one cell (L=1, M=1), clamps at
// Lo=-5 and Hi=5 that no-write adds hit at both ends, mixed-sign deltas;
// two goroutines run four UpdateAndQuery / Update / TryUpdate calls each
// on keys of distinct stripes. Every round, the final cell and every
// value UpdateAndQuery returned, and every TryUpdate verdict, must be
// those of one interleaving of the two programs ("Each cell is
// linearizable on its own", sketch/doc.go).
func TestAudit37CellLinearizableMixedSign(t *testing.T) {
	type op struct {
		kind  int // 0 UpdateAndQuery, 1 TryUpdate(limit)
		d     float64
		limit float64
	}
	progs := [2][4]op{
		{{0, 4, 0}, {0, 3, 0}, {1, -4, -2}, {0, -3, 0}},
		{{0, -4, 0}, {1, 2, 4}, {0, 4, 0}, {1, -6, 0}},
	}
	clamp := func(v float64) float64 { return math.Max(-5, math.Min(5, v)) }
	// Enumerate the interleavings' outcomes: per op its observed result
	// (the cell after a UQ, 1/0 for a TryUpdate verdict), and the final.
	type outcome struct {
		res   [2][4]float64
		final float64
	}
	var all []outcome
	var rec func(i, j int, v float64, o outcome)
	rec = func(i, j int, v float64, o outcome) {
		if i == 4 && j == 4 {
			o.final = v
			all = append(all, o)
			return
		}
		step := func(g, k int, v float64, o outcome) (float64, outcome) {
			p := progs[g][k]
			switch p.kind {
			case 0:
				v = clamp(v + p.d)
				o.res[g][k] = v
			case 1:
				if v+p.d <= p.limit {
					v = clamp(v + p.d)
					o.res[g][k] = 1
				} else {
					o.res[g][k] = 0
				}
			}
			return v, o
		}
		if i < 4 {
			nv, no := step(0, i, v, o)
			rec(i+1, j, nv, no)
		}
		if j < 4 {
			nv, no := step(1, j, v, o)
			rec(i, j+1, nv, no)
		}
	}
	rec(0, 0, 0, outcome{})
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		s := mustNewSketch(t, sketch.Config{Levels: 1, CellsPerLevel: 1, Lo: -5, Hi: 5, Clock: sketchtest.NewFakeClock()})
		keys := keysOnDistinctStripes(t, s, 2)
		seen := map[outcome]bool{}
		defer func() { t.Logf("%d distinct outcomes of %d possible interleavings", len(seen), len(all)) }()
		for round := range 3000 {
			s.Reset()
			var got outcome
			var wg sync.WaitGroup
			var ready atomic.Int32
			for g := range 2 {
				wg.Go(func() {
					// A spinning barrier (yielding at GOMAXPROCS 1), so
					// the two programs start together and overlap.
					ready.Add(1)
					for ready.Load() < 2 {
						runtime.Gosched()
					}
					for k, p := range progs[g] {
						switch p.kind {
						case 0:
							got.res[g][k] = s.UpdateAndQuery(keys[g], p.d)
						case 1:
							if s.TryUpdate(keys[g], p.d, p.limit) {
								got.res[g][k] = 1
							}
						}
					}
				})
			}
			wg.Wait()
			got.final = s.Query(keys[0])
			seen[got] = true
			ok := false
			for _, o := range all {
				if o == got {
					ok = true
					break
				}
			}
			if !ok {
				t.Fatalf("round %d: results %v final %v match no interleaving of the two programs", round, got.res, got.final)
			}
		}
	})
}
