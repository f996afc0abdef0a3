package sketch_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/reference"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit92CoreDiffDecisionsAtTheBoundary: sketch/doc.go ("Never below
// the truth ... by induction >= what the float64 reference would hold";
// "a TryUpdate's aggregate + delta <= limit is a float64 compare, as
// theirs") and API.md's sketch/reference (same layout, compared cell for
// cell). The lock-free sketch and the reference run one seeded sequence
// on one fake clock: Updates and TryUpdates of mixed sign whose limits sit
// on the reference's estimate + delta (exactly, or a hair either side),
// clamps at Lo and Hi, idle gaps from 1 ms past 2^32 ms (horizon sweeps)
// and steps back. Since every lock-free cell is at or above the
// reference's (less the reference's float64 rounding), a TryUpdate the
// lock-free sketch admits the reference admits too; where only the
// reference admits, the lock-free sketch gets the same delta by Update so
// both keep one history. Every estimate stays at or above the
// reference's and within a float32-step budget of it.
func TestAudit92CoreDiffDecisionsAtTheBoundary(t *testing.T) {
	steps := 1500
	if testsize.Small() {
		steps = 500
	}
	laws := []struct {
		name string
		d    decay.Decay
	}{{"none", decay.None()}, {"linear", decay.Linear(2)}, {"exp", decay.Exponential(0.01)}}
	aggs := []struct {
		name string
		a    sketch.Aggregator
	}{{"min", sketch.Min}, {"max", sketch.Max}, {"mean", sketch.Mean}}
	gaps := []int64{0, 0, 0, 1, 1, 7, 250, 1000, 60_000, 1<<24 + 3, 1<<31 + 5, 1<<32 + 1}
	for li, lw := range laws {
		for ai, ag := range aggs {
			for bi, b := range [][2]float64{{-50, 200}, {0, 0.1}, {-1e4, 1e4}} {
				t.Run(fmt.Sprintf("%s/%s/[%v,%v]", lw.name, ag.name, b[0], b[1]), func(t *testing.T) {
					lo, hi := b[0], b[1]
					clk := sketchtest.NewFakeClock()
					clk.Set(1 << 40)
					cfg := sketch.Config{Levels: 3, CellsPerLevel: 8, Lo: lo, Hi: hi, Decay: lw.d, Aggregator: ag.a, Clock: clk, Seed: 92}
					lf, err := sketch.New(cfg)
					if err != nil {
						t.Fatal(err)
					}
					rf, err := reference.New(cfg)
					if err != nil {
						t.Fatal(err)
					}
					r := rand.New(rand.NewPCG(uint64(li*100+ai*10+bi), 92))
					keys := make([][]byte, 12)
					for i := range keys {
						keys[i] = []byte(fmt.Sprintf("d%d", i))
					}
					scale := hi - lo
					// Each write may leave a cell up to a float32 step of the
					// bounds' magnitude above the reference's.
					ulp := float64(math.Nextafter32(float32(max(-lo, hi)), float32(math.Inf(1)))) - float64(float32(max(-lo, hi)))
					writes := 0
					// The reference's float64 drift (and, on arm64, fused
					// multiply-adds) moves it by a few float64 ulps of its
					// largest level; Mean can cancel levels, so the slack is
					// taken on the levels, not on the aggregate.
					slack := func(k []byte) float64 {
						m := 1.0
						for _, lv := range rf.QueryDetailed(k).Levels {
							m = math.Max(m, math.Abs(lv.Score))
						}
						return 1e-11 * m
					}
					check := func(step int, what string, k []byte) {
						tol := slack(k)
						l, rv := lf.Query(k), rf.Query(k)
						if l < rv-tol {
							t.Fatalf("step %d after %s: lock-free Query = %v, below the reference's %v", step, what, l, rv)
						}
						if l > rv+float64(writes+1)*ulp+tol {
							t.Fatalf("step %d after %s: lock-free Query = %v, above the reference's %v by more than %d float32 steps of %v", step, what, l, rv, writes+1, ulp)
						}
					}
					for step := range steps {
						k := keys[r.IntN(len(keys))]
						d := (r.Float64()*2 - 0.6) * scale / 20
						if r.IntN(8) == 0 {
							d = math.Copysign(scale, d) // a clamp
						}
						var what string
						switch op := r.IntN(10); {
						case op < 3:
							lf.Update(k, d)
							rf.Update(k, d)
							writes++
							what = fmt.Sprintf("Update(%s, %v)", k, d)
						case op < 4:
							lu, ru := lf.UpdateAndQuery(k, d), rf.UpdateAndQuery(k, d)
							writes++
							what = fmt.Sprintf("UpdateAndQuery(%s, %v)", k, d)
							if lu < ru-slack(k) {
								t.Fatalf("step %d: %s = %v, below the reference's %v", step, what, lu, ru)
							}
						case op < 8:
							est := rf.Query(k)
							lim := est + d
							switch r.IntN(4) {
							case 1:
								lim = math.Nextafter(lim, math.Inf(1))
							case 2:
								lim = math.Nextafter(lim, math.Inf(-1))
							case 3:
								lim += (r.Float64() - 0.5) * scale / 100
							}
							lok, rok := lf.TryUpdate(k, d, lim), rf.TryUpdate(k, d, lim)
							what = fmt.Sprintf("TryUpdate(%s, %v, %v) lock-free %v reference %v", k, d, lim, lok, rok)
							if lok && !rok {
								// The reference denied: its estimate + d passed lim.
								// By more than its own rounding, the lock-free
								// estimate was below it.
								if over := rf.Query(k) + d - lim; over > slack(k) {
									t.Fatalf("step %d: %s: the lock-free sketch admitted what the reference denied", step, what)
								}
								rf.Update(k, d)
							}
							if rok && !lok {
								lf.Update(k, d)
							}
							if lok || rok {
								writes++
							}
						default:
							g := gaps[r.IntN(len(gaps))]
							if r.IntN(10) == 0 {
								g = -int64(r.IntN(50)) // a step back
							}
							clk.Advance(time.Duration(g) * time.Millisecond)
							what = fmt.Sprintf("clock %+d ms", g)
						}
						check(step, what, k)
						if step%50 == 0 {
							for _, q := range keys {
								check(step, what, q)
							}
						}
					}
				})
			}
		}
	}
}
