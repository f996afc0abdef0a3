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
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit88NegOracleLoneKeyNeverBelowTruth: keys alone in their cells
// (checked with QueryDetailed's indexes), Lo < 0, sequential Update,
// UpdateAndQuery, TryUpdate (and their At forms at the clock's time) with
// mostly negative deltas that pin the cells at Lo, repeated within one
// millisecond (the "no write when nothing changes" shortcut at Lo) and
// across idle gaps from 1 ms to 2^33 ms (horizon sweeps and urgent
// re-bases on negative scores), under None, Linear and Exponential. An
// exact model (float64, the mutex reference's law: decay, add, clamp to
// [Lo, Hi]; a TryUpdate counts only when admitted) gives each key's
// truth; every estimate (Query, UpdateAndQuery's return, each level of
// QueryDetailed) must be at or above it, and an admission must fit the
// limit on the estimate before the call.
func TestAudit88NegOracleLoneKeyNeverBelowTruth(t *testing.T) {
	testsize.Serial(t)
	type law struct {
		name  string
		d     decay.Decay
		apply func(v float64, dt int64) float64
	}
	laws := []law{
		{"none", decay.None(), func(v float64, _ int64) float64 { return v }},
		{"linear", decay.Linear(2e-5), func(v float64, dt int64) float64 {
			drop := 2e-5 * float64(dt) / 1000
			if v > 0 {
				return math.Max(v-drop, 0)
			}
			return math.Min(v+drop, 0)
		}},
		{"linear-fast", decay.Linear(3), func(v float64, dt int64) float64 {
			drop := 3 * float64(dt) / 1000
			if v > 0 {
				return math.Max(v-drop, 0)
			}
			return math.Min(v+drop, 0)
		}},
		{"exp", decay.Exponential(3e-7), func(v float64, dt int64) float64 { return v * math.Exp(-3e-7*float64(dt)/1000) }},
		{"exp-fast", decay.Exponential(0.9), func(v float64, dt int64) float64 { return v * math.Exp(-0.9*float64(dt)/1000) }},
	}
	gaps := []int64{0, 0, 0, 1, 7, 250, 1000, 1 << 29, 1 << 30, 1<<31 - 1, 1 << 31, 1<<31 + 3, 1 << 32, 1 << 33}
	for _, lw := range laws {
		for _, bounds := range [][2]float64{{-20, 30}, {-1e6, 1e6}, {-0.3, 0.7}} {
			lo, hi := bounds[0], bounds[1]
			t.Run(fmt.Sprintf("%s/lo%g/hi%g", lw.name, lo, hi), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(88, uint64(len(lw.name))+uint64(hi)))
				clk := sketchtest.NewFakeClock()
				clk.Set(1_700_000_000_000)
				s := a88negSketch(t, sketch.Config{Levels: 3, CellsPerLevel: 4096, Decay: lw.d, Lo: lo, Hi: hi, Seed: 88, Clock: clk})
				// Keys alone in their cells: no two share an index at any level.
				var keys [][]byte
				used := map[[2]uint32]bool{}
				for i := 0; len(keys) < 4; i++ {
					k := []byte(fmt.Sprintf("a88neg-lone-%d", i))
					det := s.QueryDetailed(k)
					ok := true
					for _, l := range det.Levels {
						if used[[2]uint32{l.Level, l.Index}] {
							ok = false
						}
					}
					if !ok {
						continue
					}
					for _, l := range det.Levels {
						used[[2]uint32{l.Level, l.Index}] = true
					}
					keys = append(keys, k)
				}
				truth := make([]float64, len(keys))
				last := make([]int64, len(keys)) // ms of the key's last model step
				now := int64(0)
				step := func(i int, d float64) {
					v := lw.apply(truth[i], now-last[i]) + d
					truth[i] = math.Min(math.Max(v, lo), hi)
					last[i] = now
				}
				tol := func(v float64) float64 { return 1e-9 * math.Max(1, math.Abs(v)) }
				for op := range testsize.Pick(3000, 600) {
					if rng.IntN(6) == 0 {
						g := gaps[rng.IntN(len(gaps))]
						clk.Advance(time.Duration(g) * time.Millisecond)
						now += g
					}
					i := rng.IntN(len(keys))
					k := keys[i]
					// Mostly negative deltas, often far past Lo.
					var d float64
					switch rng.IntN(5) {
					case 0:
						d = (rng.Float64() - 0.2) * (hi - lo)
					case 1:
						d = lo * 3
					case 2:
						d = -rng.Float64()
					case 3:
						d = float64(rng.IntN(5)) - 3
					default:
						d = -1e-3 * rng.Float64()
					}
					switch rng.IntN(5) {
					case 0:
						s.Update(k, d)
						step(i, d)
					case 1:
						got := s.UpdateAndQuery(k, d)
						step(i, d)
						if got < truth[i]-tol(truth[i]) {
							t.Fatalf("op %d: UpdateAndQuery(%s, %v) = %v below the truth %v", op, k, d, got, truth[i])
						}
					case 2:
						s.UpdateAt(clk.Now(), string(k), d)
						step(i, d)
					default:
						before := s.Query(k)
						limit := before + d + (rng.Float64()-0.5)*2
						if s.TryUpdate(k, d, limit) {
							if !(before+d <= limit) {
								t.Fatalf("op %d: TryUpdate(%s, %v, %v) admitted on an estimate %v", op, k, d, limit, before)
							}
							step(i, d)
						}
					}
					for j, kk := range keys {
						step(j, 0) // the model at now
						det := s.QueryDetailed(kk)
						if det.Score < truth[j]-tol(truth[j]) {
							t.Fatalf("op %d (now +%d ms): %s reads %v, below its truth %v; levels %+v", op, now, kk, det.Score, truth[j], det.Levels)
						}
						for _, l := range det.Levels {
							if l.Score < truth[j]-tol(truth[j]) || l.Score < lo || l.Score > hi {
								t.Fatalf("op %d: %s level %d reads %v, truth %v, bounds [%v, %v]", op, kk, l.Level, l.Score, truth[j], lo, hi)
							}
						}
					}
				}
			})
		}
	}
}
