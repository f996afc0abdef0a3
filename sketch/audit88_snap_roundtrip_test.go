package sketch_test

// Audit 88 (snapshots and merge): a restored sketch against a never-saved
// twin left idle for the downtime.
//
// Contract: sketch/doc.go ("restore on a new process clock with every
// score aged by its downtime"), Sketch.UnmarshalBinary ("answers every
// later Query exactly as the original would have at the same wall time
// ... within one float32 ulp, upward, after [a sweep]; an older cell is
// decayed once ..., rounded up"), docs/snapshots.md "Time across
// restarts".

import (
	"bytes"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

const a88RTT0 = 1_760_000_000_000

// TestAudit88SnapRestoreEqualsIdleTwin: three laws, scores at Hi, at Lo
// (credits), small and mid-range, written at several ages; restored
// (UnmarshalBinary and ReadFrom) on a clock of another process (another
// epoch, or one built at the restore instant, so that every restored
// cell predates its epoch) at T + downtime for downtimes 0, 1 ms, 2^29 - 1 ms, 2^29 ms,
// 2^31 ms and 5 years. Below 2^29 ms of total age every Query equals the
// twin's; above, the restored reading is at or above the twin's and
// within one float32 ulp of it. Then both move on 3 s and must still
// agree the same way.
func TestAudit88SnapRestoreEqualsIdleTwin(t *testing.T) {
	laws := []struct {
		name string
		d    decay.Decay
	}{
		{"none", decay.None()},
		{"exp", decay.Exponential(1e-9)}, // slow: scores survive years of downtime
		{"exp-fast", decay.Exponential(2)},
		{"linear", decay.Linear(1e-6)},
	}
	downs := []int64{0, 1, 1<<29 - 1, 1 << 29, 1 << 31, 5 * 365 * 24 * 3600 * 1000}
	for _, lw := range laws {
		for _, down := range downs {
			for _, mode := range []int{0, 1, 2} {
				stream, freshEpoch := mode == 1, mode == 2
				name := fmt.Sprintf("%s/down=%dms/stream=%v/freshEpoch=%v", lw.name, down, stream, freshEpoch)
				t.Run(name, func(t *testing.T) {
					const lo, hi = -1000, 1000
					c1 := sketchtest.NewFakeClock()
					c1.Set(a88RTT0)
					cfg := sketch.Config{Levels: 2, CellsPerLevel: 16, Decay: lw.d, Lo: lo, Hi: hi, Seed: 5, Clock: c1}
					orig := mustNewSketch(t, cfg)
					keys := make([]string, 12)
					for i := range keys {
						keys[i] = fmt.Sprint("key", i)
						var v float64
						switch i % 4 {
						case 0:
							v = 1e9 // clamps at Hi
						case 1:
							v = -1e9 // clamps at Lo
						case 2:
							v = 3.25
						case 3:
							v = -7.5
						}
						orig.UpdateString(keys[i], v)
						c1.Advance(time.Duration(i*97) * time.Millisecond)
					}
					data, err := orig.MarshalBinary()
					if err != nil {
						t.Fatal(err)
					}
					c2 := sketchtest.NewFakeClock()
					c2.Set(5_000) // another process: another epoch
					cfg2 := cfg
					cfg2.Clock = c2
					var dst *sketch.Sketch
					if !freshEpoch {
						dst = mustNewSketch(t, cfg2)
					}
					c1.Advance(time.Duration(down) * time.Millisecond)
					c2.Set(c1.NowMillis())
					if freshEpoch {
						// Built at the restore: every restored cell is
						// older than the sketch's own epoch.
						dst = mustNewSketch(t, cfg2)
					}
					if stream {
						_, err = dst.ReadFrom(bytes.NewReader(data))
					} else {
						err = dst.UnmarshalBinary(data)
					}
					if err != nil {
						t.Fatal(err)
					}
					for step := range 2 {
						for _, k := range keys {
							want, got := orig.QueryString(k), dst.QueryString(k)
							if math.IsNaN(got) || got < lo || got > hi {
								t.Fatalf("step %d %s: restored %v outside [Lo, Hi]", step, k, got)
							}
							if down < 1<<29-1200 {
								if got != want {
									t.Errorf("step %d %s: restored %v, idle twin %v (want equal)", step, k, got, want)
								}
								continue
							}
							ulp := float64(math.Nextafter32(float32(math.Abs(want)), float32(math.Inf(1)))) - math.Abs(want)
							if got < want || got-want > ulp+1e-30 {
								t.Errorf("step %d %s: restored %v, idle twin %v (want within one float32 ulp, upward)", step, k, got, want)
							}
						}
						c1.Advance(3 * time.Second)
						c2.Advance(3 * time.Second)
					}
				})
			}
		}
	}
}
