package sketch_test

// Audit 92 (snapshots, merge, restore over long idle times and clock
// jumps): a snapshot restored, used, saved again and restored again, hop
// after hop, each hop on the clock of another process (another epoch),
// with downtimes from 0 to years.
//
// Contract: API.md ("Min aggregation never under-estimates ... whatever
// the ... clock jumps"; "Any idle time, 1 ms to years, decays as the
// reference (int64 ms) does"), Sketch.UnmarshalBinary ("every score aged
// by the time since it was taken"; below 2^29 ms of total age "the
// restored sketch answers every later Query exactly as the original
// would have at the same wall time"; an older cell "is decayed once ...
// rounded up"), docs/snapshots.md "Time across restarts". Earlier audits
// restored once (audit 88's idle twin) or chained at one clock (audit
// 67); none carried a cell's age through several restores whose
// downtimes add up past 2^29 and 2^31 ms.

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

// a92ChainTruth is the exact decayed value of v written dt ms earlier.
func a92ChainTruth(law string, v float64, dt int64) float64 {
	s := float64(dt) / 1000
	switch law {
	case "exp":
		return v * math.Exp(-1e-9*s)
	case "expfast":
		return v * math.Exp(-2e-6*s)
	case "linear":
		return math.Max(v-1e-6*s, 0)
	}
	return v
}

// TestAudit92SnapChainHopsEqualIdleTwin: one key per sketch (L=1, M=1,
// so no collision), written once; then eight hops, each a snapshot taken
// after the restored sketch was read at a few later instants, restored
// into a sketch built on a fresh fake clock at the snapshot's wall time
// plus the hop's downtime (alternately built at the restore and an hour
// before it), through UnmarshalBinary or ReadFrom. The downtimes add up
// past 2^29 ms (6.2 days) and then 2^31 ms (24.8 days) and years. At
// every read: never below the exact decayed value; at most a few float32
// ulps above it (one rounding per decay-once or sweep); and equal to the
// never-saved twin (on its own clock at the same wall time) while the
// cell's whole age is below 2^29 ms.
func TestAudit92SnapChainHopsEqualIdleTwin(t *testing.T) {
	laws := []struct {
		name string
		d    decay.Decay
	}{
		{"none", decay.None()},
		{"exp", decay.Exponential(1e-9)},
		{"expfast", decay.Exponential(2e-6)},
		{"linear", decay.Linear(1e-6)},
	}
	const t0 = int64(1_790_000_000_000)
	day := int64(86_400_000)
	hops := []int64{0, 1, 3 * 3600_000, 5 * day, 2 * day, 40 * day, 3 * 365 * day, 7}
	for _, lw := range laws {
		for _, v0 := range []float64{1000, 0.75, 3} {
			name := fmt.Sprintf("%s/v=%v", lw.name, v0)
			cfg := func(c sketch.Clock) sketch.Config {
				return sketch.Config{Levels: 1, CellsPerLevel: 1, Decay: lw.d, Lo: 0, Hi: 1000, Seed: 3, Clock: c}
			}
			c0 := sketchtest.NewFakeClock()
			c0.Set(t0)
			twin := mustNewSketch(t, cfg(c0))
			twin.UpdateString("k", v0)
			cur := twin
			curClock := c0
			wall := t0
			check := func(hop int, at int64, s *sketch.Sketch) {
				t.Helper()
				got := s.QueryString("k")
				truth := a92ChainTruth(lw.name, v0, at-t0)
				if got < truth*(1-1e-12) {
					t.Fatalf("%s hop %d at t0+%d ms: read %v, below the exact decayed value %v", name, hop, at-t0, got, truth)
				}
				slack := truth*1e-6 + 3e-45 // float32 steps, the least positive one included
				if lw.name == "linear" {
					slack = 1e-3 // an absolute rounding excess: Linear does not shrink it
				}
				if got > truth+slack {
					t.Fatalf("%s hop %d at t0+%d ms: read %v, far above the exact decayed value %v", name, hop, at-t0, got, truth)
				}
				if at-t0 < 1<<29-5000 {
					c0.Set(at)
					if w := twin.QueryString("k"); got != w {
						t.Fatalf("%s hop %d at t0+%d ms: restored reads %v, the never-saved twin %v (want equal below 2^29 ms of age)", name, hop, at-t0, got, w)
					}
				}
			}
			for h, down := range hops {
				// The live sketch is read at a few later instants (a read
				// after a long idle runs its horizon sweep), then saved.
				for _, dt := range []int64{0, 999, 1234} {
					wall += dt
					curClock.Set(wall)
					check(h, wall, cur)
				}
				var buf bytes.Buffer
				if _, err := cur.WriteTo(&buf); err != nil {
					t.Fatalf("%s hop %d: WriteTo: %v", name, h, err)
				}
				wall += down
				nc := sketchtest.NewFakeClock()
				if h%2 == 0 {
					nc.Set(wall - 3600_000)
				} else {
					nc.Set(wall)
				}
				dst := mustNewSketch(t, cfg(nc))
				nc.Set(wall)
				var err error
				if h%3 == 1 {
					_, err = dst.ReadFrom(bytes.NewReader(buf.Bytes()))
				} else {
					err = dst.UnmarshalBinary(buf.Bytes())
				}
				if err != nil {
					t.Fatalf("%s hop %d (downtime %v): restore: %v", name, h, time.Duration(down)*time.Millisecond, err)
				}
				cur, curClock = dst, nc
				check(h, wall, cur)
			}
		}
	}
}
