package sketch_test

import (
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit55SnapshotWallTimeWithFractions: a sketch whose fake clock
// carries a sub-ms fraction (from Advance) at creation, at writes and at
// the save, restored into a sketch whose clock carries another fraction
// at its creation and the same Unix ms at the restore: every later Query
// equals the original's at the same clock reading (docs/snapshots.md,
// "Time across restarts": "The restored sketch then answers every Query
// exactly as the original would at the same wall time"), for downtimes 0,
// 1 ms and 1 s.
func TestAudit55SnapshotWallTimeWithFractions(t *testing.T) {
	const t0 = 1_700_000_000_000
	for _, of := range []time.Duration{0, 1, 300 * time.Microsecond, 999_999} {
		for _, rf := range []time.Duration{0, 1, 700 * time.Microsecond, 999_999} {
			for _, down := range []int64{0, 1, 1000} {
				oc := sketchtest.NewFakeClock()
				oc.Set(t0)
				oc.Advance(of)
				cfg := sketch.Config{Levels: 3, CellsPerLevel: 128, Decay: decay.Exponential(0.5), Hi: 1e9, Seed: 55, Clock: oc}
				o, err := sketch.New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				for i := range 20 {
					oc.Advance(37*time.Millisecond + 123*time.Microsecond)
					o.UpdateString(string(rune('a'+i%5)), float64(i+1))
				}
				b, err := o.MarshalBinary()
				if err != nil {
					t.Fatal(err)
				}
				saveMs := oc.NowMillis()
				rc := sketchtest.NewFakeClock()
				rc.Set(saveMs - 5000)
				rc.Advance(rf)
				cfg.Clock = rc
				r, err := sketch.New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				rc.Set(saveMs + down)
				if err := r.UnmarshalBinary(b); err != nil {
					t.Fatal(err)
				}
				oc.Set(saveMs + down)
				for step := range 5 {
					for k := range 5 {
						key := string(rune('a' + k))
						if got, want := r.QueryString(key), o.QueryString(key); got != want {
							t.Fatalf("fractions %v/%v, downtime %d ms, +%d s: restored %s = %v, original %v", of, rf, down, step, key, got, want)
						}
					}
					oc.Advance(time.Second)
					rc.Advance(time.Second)
				}
			}
		}
	}
}
