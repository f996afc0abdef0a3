package grudge_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit18RotationsClockWalk: a lazy grudge.Rotator counts the periods
// the clock's high-water mark has crossed since NewRotator: a backwards
// step rotates nothing (and is no elapsed time when the clock comes back),
// a jump over k periods counts k, including jumps of 2^31 ms and more.
func TestAudit18RotationsClockWalk(t *testing.T) {
	steps := []int64{0, 1, 999, 1000, 1001, 3_600_000, 86_400_000, 1 << 31, 1<<31 + 1, 1 << 33}
	for seed := range uint64(6) {
		rng := rand.New(rand.NewPCG(seed, 18))
		clk := sketchtest.NewFakeClock()
		const t0 = 1_700_000_000_000
		clk.Set(t0)
		period := time.Duration(1+rng.IntN(3000)) * time.Millisecond
		rot, err := grudge.NewRotator(grudge.RotatorConfig{
			Sketch: grudge.Config{Levels: 2, CellsPerLevel: 64, Decay: grudge.Linear(1), Hi: 1e9, Clock: clk},
			Period: period,
		})
		if err != nil {
			t.Fatal(err)
		}
		P := period.Milliseconds()
		hw := int64(t0)
		for i := range 300 {
			s := steps[rng.IntN(len(steps))]
			if rng.IntN(2) == 0 {
				s = int64(rng.IntN(int(3 * P)))
			}
			if rng.IntN(3) == 0 {
				s = -s
			}
			clk.Set(clk.NowMillis() + s)
			hw = max(hw, clk.NowMillis())
			if rng.IntN(2) == 0 {
				rot.Update([]byte("k"), 1)
			}
			if got, want := rot.Rotations(), (hw-t0)/P; got != want {
				t.Fatalf("seed %d step %d (period %v): clock %d, hw %d: Rotations = %d, want %d", seed, i, period, clk.NowMillis(), hw, got, want)
			}
		}
		rot.Close()
	}
}
