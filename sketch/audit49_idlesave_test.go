package sketch_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit49IdleThenSave: the source sketch is idle for 2^29 ms to 2^40
// ms (across the horizon sweep, the urgent re-base past 2^31 ms and the
// 32-bit stamp wrap) and then saved (WriteTo does the horizon work
// first); the snapshot restores (no downtime, and 1 h later) to keys >=
// their closed-form truth and, at no downtime, within one float32 ulp
// above what the source reads at the same instant (every record is older
// than 2^29 ms, so it is decayed once and rounded up). None, Exponential and Linear.
func TestAudit49IdleThenSave(t *testing.T) {
	const t0 = int64(1_700_000_000_000)
	for _, lw := range a49Laws() {
		for _, idle := range []int64{1<<29 + 3, 1<<30 + 1, 1<<31 - 1, 1 << 31, 1<<31 + 1, 1<<32 - 2, 1<<32 + 7, 1 << 40} {
			clk := sketchtest.NewFakeClock()
			clk.Set(t0)
			cfg := sketch.Config{Levels: 3, CellsPerLevel: 512, Decay: lw.d, Hi: 1e6, Seed: 5, Clock: clk}
			src := mustNewSketch(t, cfg)
			for i := range 10 {
				clk.Set(t0 + int64(i)*777)
				src.UpdateString(fmt.Sprintf("i%d", i), float64(100+10*i))
			}
			T := t0 + 9*777 + idle
			clk.Set(T)
			snap, err := src.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			for _, down := range []int64{0, 3_600_000} {
				rc := sketchtest.NewFakeClock()
				rc.Set(T + down)
				rcfg := cfg
				rcfg.Clock = rc
				r := mustNewSketch(t, rcfg)
				if err := r.UnmarshalBinary(snap); err != nil {
					t.Fatal(err)
				}
				for i := range 10 {
					k := fmt.Sprintf("i%d", i)
					got := r.QueryString(k)
					truth := lw.truth(float64(100+10*i), T+down-(t0+int64(i)*777))
					if got < truth {
						t.Errorf("%s idle %d down %d key %s: restored %v < truth %v", lw.name, idle, down, k, got, truth)
					}
					if down == 0 {
						// Every record is older than 2^29 ms: decayed once
						// and rounded up on restore, so within one float32
						// ulp of the source, upward (docs/snapshots.md).
						o := src.QueryString(k)
						up := float64(math.Nextafter32(float32(o), float32(math.Inf(1))))
						if got < o || got > up {
							t.Errorf("%s idle %d key %s: restored %v, source %v at the same instant (want within one float32 ulp upward, <= %v)", lw.name, idle, k, got, o, up)
						}
					}
				}
			}
		}
	}
}
