package grudge_test

import (
	"testing"
	"time"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
)

// TestAudit53RotationsAcrossJumps: a lazy grudge Rotator's Rotations()
// under clock steps of -1 h, 0, 1 ms, Period-1, Period, Period+1, N x
// Period and N x Period +- 1 ms, 2^24, 2^29, 2^31 and 2^32 ms, for
// Periods of 1 ms, 7 ms, 3 s and 2^31 ms and N = 2 and 3: after every
// step it equals the whole Periods elapsed between New and the clock's
// high-water mark, floor((hw - t0) / Period). rotator.go: "For a lazy rotator it first brings
// rotation up to date ... and counts the periods that elapsed (a clock
// jump over k periods counts k, as k ticks would have)"; rotator/doc.go:
// "a backwards step rotates nothing".
func TestAudit53RotationsAcrossJumps(t *testing.T) {
	for _, n := range []uint32{2, 3} {
		for _, pms := range []int64{1, 7, 3000, 1 << 31} {
			clk := grudgetest.NewFakeClock()
			t0 := time.UnixMilli(1_700_000_000_000)
			clk.Set(t0)
			r, err := grudge.NewRotator(grudge.RotatorConfig{
				Sketch:      grudge.Config{Levels: 3, CellsPerLevel: 512, Hi: 1e9, Decay: grudge.None(), Clock: clk},
				Generations: n, Period: time.Duration(pms) * time.Millisecond,
			})
			if err != nil {
				t.Fatal(err)
			}
			np := int64(n) * pms
			steps := []int64{-3_600_000, 0, 1, pms - 1, pms, pms + 1, np - 1, np, np + 1, 1 << 24, 1 << 29, 1 << 31, 1 << 32}
			hw := t0.UnixMilli()
			x := uint64(pms) + uint64(n)
			for i := range 80 {
				x = x*6364136223846793005 + 1442695040888963407
				step := steps[int(x>>33)%len(steps)]
				clk.Set(clk.Now().Add(time.Duration(step) * time.Millisecond))
				hw = max(hw, clk.NowMillis())
				if got, want := r.Rotations(), (hw-t0.UnixMilli())/pms; got != want {
					t.Fatalf("N=%d Period=%d ms step %d (%+d ms): Rotations() = %d; want %d", n, pms, i, step, got, want)
				}
			}
			r.Close()
		}
	}
}
