package sketch_test

import (
	"fmt"
	"testing"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit37LinearSweepLargeScores: Linear(3000/s) (3 units a ms, whole
// and odd: Rebase's grid search) on scores around 1e13 (float32 step
// 2^20), idles that cross the horizon sweep (2^30 ms and more) and the
// 2^31 re-base, some keys written between idles: every estimate is at or
// above the float64 reference, and within a few float32 steps of it.
func TestAudit37LinearSweepLargeScores(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(5_000)
	cfg := sketch.Config{Levels: 2, CellsPerLevel: 512, Decay: decay.Linear(3000), Hi: 1e15, Clock: clk}
	s := mustNewSketch(t, cfg)
	r := mustNewReference(t, cfg)
	idles := []int64{1 << 29, 1<<30 + 7, 1 << 29, 1<<31 + 3, 12345, 1<<30 - 1, 1 << 30, 1<<32 + 1}
	for i, idle := range idles {
		for j := range 10 {
			if (i+j)%2 == 0 {
				k := fmt.Sprintf("k%d", j)
				d := 1e13 + float64(j)*1.7e11
				s.UpdateString(k, d)
				r.UpdateString(k, d)
			}
		}
		clk.Set(clk.NowMillis() + idle)
		for j := range 10 {
			k := fmt.Sprintf("k%d", j)
			lf, rf := s.QueryString(k), r.QueryString(k)
			if lf < rf || lf > rf+8*(1<<21) {
				t.Errorf("after idle %d (step %d): Query(%s) = %v, reference %v (diff %v)", idle, i, k, lf, rf, lf-rf)
			}
		}
	}
}
