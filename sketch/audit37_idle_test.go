package sketch_test

import (
	"fmt"
	"testing"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit37IdleAtStampEdges: idles at the 32-bit stamp edges (2^31-1,
// 2^31, 2^31+1, 2^32-1, 2^32, 2^32+1 ms) and years, between writes of
// some keys while others stay idle, with the clock also stepping back
// (which must count as no time): every estimate is within float32
// rounding of the float64 reference and never below it ("Any idle time,
// 1 ms to years, decays as int64 stamps would").
func TestAudit37IdleAtStampEdges(t *testing.T) {
	idles := []int64{1<<31 - 1, 1 << 31, 1<<31 + 1, 1<<32 - 1, 1 << 32, 1<<32 + 1, 3 * 365 * 86400_000, 1, 0}
	for _, lw := range []struct {
		name string
		law  decay.Decay
	}{{"exp", decay.Exponential(1e-9)}, {"linear", decay.Linear(1e-6)}, {"none", decay.None()}} {
		t.Run(lw.name, func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			clk.Set(1_000)
			cfg := sketch.Config{Levels: 3, CellsPerLevel: 1024, Decay: lw.law, Hi: 1e9, Clock: clk}
			s := mustNewSketch(t, cfg)
			r := mustNewReference(t, cfg)
			for i, idle := range idles {
				for j := range 8 {
					if (i+j)%3 == 0 {
						k := fmt.Sprintf("k%d", j)
						s.UpdateString(k, 1000)
						r.UpdateString(k, 1000)
					}
				}
				now := clk.NowMillis()
				clk.Set(now - 5000) // a step back: no time
				for j := range 8 {
					k := fmt.Sprintf("k%d", j)
					s.QueryString(k)
				}
				clk.Set(now + idle)
				for j := range 8 {
					k := fmt.Sprintf("k%d", j)
					lf, rf := s.QueryString(k), r.QueryString(k)
					if lf < rf*(1-1e-12) || lf > rf*(1+1e-6)+1e-30 {
						t.Errorf("after idle %d ms (step %d): Query(%s) = %v, reference %v", idle, i, k, lf, rf)
					}
				}
			}
		})
	}
}
