package sketch_test

import (
	"bytes"
	"fmt"
	"math"
	"testing"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit37SnapshotRoundTripAtBounds: a sketch whose cells sit at the
// clamps (Hi and Lo that no float32 holds, so cells store them rounded
// up; Hi = +Inf and Lo = -Inf with a draining law, so cells saturate at
// ±MaxFloat32) restores its own snapshot (UnmarshalBinary and ReadFrom)
// and reads the same estimates.
func TestAudit37SnapshotRoundTripAtBounds(t *testing.T) {
	for _, c := range []struct {
		name   string
		law    decay.Decay
		lo, hi float64
	}{
		{"tenth", decay.None(), -0.1, 0.1},
		{"1e9+1", decay.Exponential(0.001), -(1e9 + 1), 1e9 + 1},
		{"inf", decay.Linear(1), math.Inf(-1), math.Inf(1)},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			clk.Set(123_456)
			cfg := sketch.Config{Levels: 2, CellsPerLevel: 8, Decay: c.law, Lo: c.lo, Hi: c.hi, Clock: clk}
			src := mustNewSketch(t, cfg)
			for i := range 16 {
				d := math.MaxFloat64 / 4
				if i%2 == 1 {
					d = -d
				}
				src.UpdateString(fmt.Sprintf("k%d", i), d)
			}
			data, err := src.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			for _, stream := range []bool{false, true} {
				dst := mustNewSketch(t, cfg)
				if stream {
					_, err = dst.ReadFrom(bytes.NewReader(data))
				} else {
					err = dst.UnmarshalBinary(data)
				}
				if err != nil {
					t.Fatalf("stream=%v: own snapshot refused: %v", stream, err)
				}
				for i := range 16 {
					k := fmt.Sprintf("k%d", i)
					if a, b := src.QueryString(k), dst.QueryString(k); a != b {
						t.Errorf("stream=%v: Query(%s) = %v after restore, %v before", stream, k, b, a)
					}
				}
			}
		})
	}
}
