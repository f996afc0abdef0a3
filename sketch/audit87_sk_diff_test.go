package sketch_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/reference"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a87Median is a custom aggregator (1-Lipschitz, as Min, Max and Mean)
// that does not allocate (on a copy: it must not modify v).
func a87Median(v []float64) float64 {
	var c [8]float64
	n := copy(c[:], v)
	slices.Sort(c[:n])
	return c[n/2]
}

// TestAudit87SkDiffCellForCell: API.md, sketch/reference: "For the same
// Config (Seed, Hasher, Levels, CellsPerLevel) both implementations map
// a key to the same cells ... so they can be compared cell for cell", and
// doc.go's precision: scores are narrowed to float32 rounding up. Thirty
// keys in 3 x 16 cells (heavy collisions), mixed-sign deltas with Lo < 0,
// clamps, TryUpdates whose limits are clear of the boundary, idle gaps
// across the exponential tables' 2^24 ms, backwards steps; under None,
// Linear and Exponential, with Min, Max, Mean and a custom aggregator,
// XXH3 and SipHash. Every key's cells are the reference's (level and
// index); every level's score is at or above the reference's (less the
// reference's own float64 drift, 2^-40 of the cell's magnitude) and at
// most a float32-step budget above it; Query is QueryDetailed's Score;
// both decide every TryUpdate alike.
func TestAudit87SkDiffCellForCell(t *testing.T) {
	laws := []struct {
		name string
		d    decay.Decay
	}{{"none", decay.None()}, {"linear2.5", decay.Linear(2.5)}, {"exp0.2", decay.Exponential(0.2)}}
	type aggCase struct {
		name string
		agg  sketch.Aggregator
		fn   func([]float64) float64
	}
	aggs := []aggCase{{"min", sketch.Min, nil}, {"max", sketch.Max, nil}, {"mean", sketch.Mean, nil}, {"median", sketch.Min, a87Median}}
	hashers := []sketch.HasherFactory{sketch.XXH3(), sketch.SipHash()}
	for li, lw := range laws {
		for ai, ag := range aggs {
			for hi, h := range hashers {
				for bi, b := range [][2]float64{{-100, 1000}, {0, 50}} {
					name := fmt.Sprintf("%s/%s/h%d/[%g,%g]", lw.name, ag.name, hi, b[0], b[1])
					t.Run(name, func(t *testing.T) {
						clk := sketchtest.NewFakeClock()
						clk.Set(1_700_000_000_000)
						cfg := sketch.Config{Levels: 3, CellsPerLevel: 16, Lo: b[0], Hi: b[1], Decay: lw.d,
							Aggregator: ag.agg, AggregateFunc: ag.fn, Hasher: h, Seed: uint64(li*1000 + ai*100 + hi*10 + bi), Clock: clk}
						s, err := sketch.New(cfg)
						if err != nil {
							t.Fatal(err)
						}
						r, err := reference.New(cfg)
						if err != nil {
							t.Fatal(err)
						}
						a87Diff(t, s, r, clk, cfg.Seed)
					})
				}
			}
		}
	}
}

func a87Diff(t *testing.T, s *sketch.Sketch, r *reference.Sketch, clk *sketchtest.FakeClock, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 87))
	const nkeys = 30
	keys := make([][]byte, nkeys)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "key-%d", i)
	}
	budget := map[[2]uint32]float64{}
	mag := map[[2]uint32]float64{}
	deltas := []float64{1, 3.5, -2, 0.1, -0.7, 40, -40, 500, -500}
	compare := func(step int, k int) (sd, rd sketch.Detail) {
		t.Helper()
		sd, rd = s.QueryDetailed(keys[k]), r.QueryDetailed(keys[k])
		for l := range sd.Levels {
			sl, rl := sd.Levels[l], rd.Levels[l]
			if sl.Level != rl.Level || sl.Index != rl.Index {
				t.Fatalf("step %d key %s level %d: sketch cell (%d, %d), reference (%d, %d)", step, keys[k], l, sl.Level, sl.Index, rl.Level, rl.Index)
			}
			id := [2]uint32{sl.Level, sl.Index}
			m := max(mag[id], math.Abs(rl.Score))
			mag[id] = m
			if sl.Score < rl.Score-0x1p-40*m {
				t.Fatalf("step %d key %s level %d: sketch %.17g below the reference %.17g", step, keys[k], l, sl.Score, rl.Score)
			}
			if sl.Score > rl.Score+budget[id]+0x1p-38*m {
				t.Fatalf("step %d key %s level %d: sketch %.17g above the reference %.17g by more than %.3g", step, keys[k], l, sl.Score, rl.Score, budget[id])
			}
		}
		return sd, rd
	}
	charge := func(k int, d float64) {
		for _, l := range r.QueryDetailed(keys[k]).Levels {
			id := [2]uint32{l.Level, l.Index}
			budget[id] += 0x1p-21 * (2*mag[id] + math.Abs(d))
		}
	}
	for step := range 600 {
		switch x := rng.IntN(100); {
		case x < 3:
			clk.Set(clk.NowMillis() + 1<<24 + rng.Int64N(5))
		case x < 5:
			clk.Set(clk.NowMillis() - rng.Int64N(10_000))
		case x < 50:
			clk.Set(clk.NowMillis() + rng.Int64N(3000))
		}
		k := rng.IntN(nkeys)
		d := deltas[rng.IntN(len(deltas))]
		sd, rd := compare(step, k)
		if q := s.Query(keys[k]); q != sd.Score {
			t.Fatalf("step %d: Query %v, QueryDetailed's Score %v", step, q, sd.Score)
		}
		switch rng.IntN(3) {
		case 0:
			s.Update(keys[k], d)
			r.Update(keys[k], d)
		case 1:
			sq, rq := s.UpdateAndQuery(keys[k], d), r.UpdateAndQuery(keys[k], d)
			if math.IsNaN(sq) || sq < rq-0x1p-30*math.Abs(rq)-1e-9 {
				t.Fatalf("step %d: UpdateAndQuery sketch %v, reference %v", step, sq, rq)
			}
		default:
			margin := 1 + 1e-3*math.Abs(rd.Score)
			limit := rd.Score + d + margin
			if rng.IntN(2) == 0 {
				limit = rd.Score + d - margin
			}
			so, ro := s.TryUpdate(keys[k], d, limit), r.TryUpdate(keys[k], d, limit)
			if so != ro {
				t.Fatalf("step %d: TryUpdate(%v, %v) sketch %v, reference %v (aggregates %v, %v)", step, d, limit, so, ro, sd.Score, rd.Score)
			}
			if !so {
				continue
			}
		}
		charge(k, d)
		compare(step, k)
	}
}
