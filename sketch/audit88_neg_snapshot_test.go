package sketch_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit88NegSnapshotCreditsAcrossDowntime: keys alone in their cells
// holding credits (Lo < 0: some pinned at Lo, some just above) and debts
// of various ages, snapshotted (MarshalBinary) and restored
// (UnmarshalBinary) on a clock later by 0 ms to 2^33 ms (past the stamp
// horizon: the restore decays the old cells once and re-stamps them),
// then written again with negative deltas and read across further idle
// gaps past 2^31 ms (horizon sweeps on negative scores). Every read must
// be at or above the key's exact truth (float64 model: decay, add, clamp).
func TestAudit88NegSnapshotCreditsAcrossDowntime(t *testing.T) {
	testsize.Serial(t)
	type law struct {
		name  string
		d     decay.Decay
		apply func(v float64, dt int64) float64
	}
	lin := func(rate float64) func(float64, int64) float64 {
		return func(v float64, dt int64) float64 {
			drop := rate * float64(dt) / 1000
			if v > 0 {
				return math.Max(v-drop, 0)
			}
			return math.Min(v+drop, 0)
		}
	}
	laws := []law{
		{"none", decay.None(), func(v float64, _ int64) float64 { return v }},
		{"linear", decay.Linear(1e-5), lin(1e-5)},
		{"exp", decay.Exponential(2e-7), func(v float64, dt int64) float64 { return v * math.Exp(-2e-7*float64(dt)/1000) }},
	}
	const lo, hi = -40.0, 60.0
	const t0 = 1_700_000_000_000
	for _, lw := range laws {
		for _, down := range []int64{0, 1, 1000, 1 << 29, 1<<31 - 1, 1 << 31, 1<<31 + 7, 1 << 33} {
			t.Run(fmt.Sprintf("%s/down%d", lw.name, down), func(t *testing.T) {
				clk := sketchtest.NewFakeClock()
				clk.Set(t0)
				cfg := sketch.Config{Levels: 3, CellsPerLevel: 1024, Decay: lw.d, Lo: lo, Hi: hi, Seed: 8, Clock: clk}
				s := a88negSketch(t, cfg)
				deltas := []float64{-100, -39.5, -7.25, -0.001, 3, -3}
				var keys [][]byte
				used := map[[2]uint32]bool{}
				for i := 0; len(keys) < len(deltas); i++ {
					k := []byte(fmt.Sprintf("a88neg-snap-%d", i))
					det := s.QueryDetailed(k)
					ok := true
					for _, l := range det.Levels {
						ok = ok && !used[[2]uint32{l.Level, l.Index}]
					}
					if ok {
						for _, l := range det.Levels {
							used[[2]uint32{l.Level, l.Index}] = true
						}
						keys = append(keys, k)
					}
				}
				truth := make([]float64, len(keys))
				last := make([]int64, len(keys))
				now := int64(0)
				step := func(i int, d float64) {
					truth[i] = math.Min(math.Max(lw.apply(truth[i], now-last[i])+d, lo), hi)
					last[i] = now
				}
				// Writes of various ages before the snapshot.
				for i, d := range deltas {
					s.Update(keys[i], d)
					step(i, d)
					clk.Advance(time.Duration(1+i*37) * time.Second)
					now += int64(1+i*37) * 1000
				}
				snap, err := s.MarshalBinary()
				if err != nil {
					t.Fatal(err)
				}
				rc := sketchtest.NewFakeClock()
				rc.Set(t0 + now + down)
				now += down
				cfg.Clock = rc
				r := a88negSketch(t, cfg)
				if err := r.UnmarshalBinary(snap); err != nil {
					t.Fatal(err)
				}
				check := func(when string) {
					t.Helper()
					for i, k := range keys {
						step(i, 0)
						got := r.Query(k)
						if got < truth[i]-1e-9*math.Max(1, math.Abs(truth[i])) {
							t.Fatalf("%s: %s reads %v, below its truth %v", when, k, got, truth[i])
						}
					}
				}
				check("right after the restore")
				for round, gap := range []int64{0, 5, 1 << 30, 1<<31 + 1, 1 << 32} {
					rc.Advance(time.Duration(gap) * time.Millisecond)
					now += gap
					for i, k := range keys {
						d := -float64(1+round) * 4
						r.Update(k, d)
						step(i, d)
					}
					check(fmt.Sprintf("round %d (gap %d ms)", round, gap))
				}
			})
		}
	}
}
