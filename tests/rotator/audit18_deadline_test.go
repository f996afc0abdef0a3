package rotator_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit18RotationDeadlines: a lazy rotator's rotations follow the
// high-water mark of the times its operations used, on the Period grid
// from its creation: Stats().Periods is floor((hw - created) / Period)
// after every operation, whatever the clock does (steps back by ms to
// 2^31 ms and more, which rotate nothing, and forward by as much), and
// for At operations with stale t (counts as the mark) and future t
// (counts as the clock's reading).
func TestAudit18RotationDeadlines(t *testing.T) {
	steps := []int64{0, 1, 999, 1000, 1001, 3_600_000, 86_400_000, 1 << 31, 1<<31 + 1, 1 << 33}
	for _, gens := range []uint32{2, 3} {
		for _, period := range []time.Duration{time.Second, 1500 * time.Millisecond, time.Hour} {
			for seed := range uint64(4) {
				t.Run(fmt.Sprintf("N%d/%v/%d", gens, period, seed), func(t *testing.T) {
					rng := rand.New(rand.NewPCG(seed, uint64(gens)))
					clk := sketchtest.NewFakeClock()
					const t0 = 1_700_000_000_000
					clk.Set(t0)
					r, err := rotator.New(rotator.Config{
						Sketch:      sketch.Config{Levels: 2, CellsPerLevel: 64, Decay: decay.Linear(1), Lo: 0, Hi: 1e6, Aggregator: sketch.Min, Seed: seed, Clock: clk},
						Generations: gens, Period: period,
					})
					if err != nil {
						t.Fatal(err)
					}
					defer r.Close()
					P := period.Milliseconds()
					hw := int64(t0)
					for i := range 300 {
						s := steps[rng.IntN(len(steps))]
						if rng.IntN(2) == 0 {
							s = int64(rng.IntN(int(2 * P)))
						}
						switch rng.IntN(3) {
						case 0:
							clk.Set(clk.NowMillis() + s)
						case 1:
							clk.Set(clk.NowMillis() - s)
						}
						c := clk.NowMillis()
						at := c
						switch rng.IntN(3) {
						case 1:
							at = c - steps[rng.IntN(len(steps))]
						case 2:
							at = c + steps[rng.IntN(len(steps))]
						}
						hw = max(hw, min(at, c))
						if rng.IntN(2) == 0 {
							r.UpdateAt(time.UnixMilli(at), "k", 500)
						} else {
							r.QueryAt(time.UnixMilli(at), "k")
						}
						if st, want := r.Stats(), uint64((hw-t0)/P); st.Periods != want {
							t.Fatalf("step %d: clock %d, t %d, hw %d: Periods = %d, want %d", i, c, at, hw, st.Periods, want)
						}
					}
				})
			}
		}
	}
}
