package sketch_test

import (
	"bytes"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit67ConcurrentEncodeNeverBelow: docs/snapshots.md, "Consistency
// under concurrent updates": with non-negative deltas, every update that
// completed before T is included (decayed to T), and a cell written
// during the encode is read back to T by its law ("at or above the value
// then, and at or above the earlier updates decayed to any later instant
// plus the write"), stated at Hi where that passes Hi. Writers add
// non-negative deltas and a ticker moves the fake clock while WriteTo
// runs, at GOMAXPROCS 1 to 8, under Exponential, Linear and None, with a
// Hi the writers reach; restored on a clock at or after T, every key reads at
// least the updates before T decayed to each instant (a twin that saw
// only those), clamped at Hi, from the end of the encode (at or after T)
// to 5 s after.
func TestAudit67ConcurrentEncodeNeverBelow(t *testing.T) {
	const t0 = int64(1_700_000_000_000)
	for _, lw := range []struct {
		name string
		d    decay.Decay
		hi   float64
	}{{"exp", decay.Exponential(0.7), 60}, {"lin", decay.Linear(3), 60}, {"none", decay.None(), 1e9}, {"exp-bigHi", decay.Exponential(0.7), 1e9}} {
		t.Run(lw.name, func(t *testing.T) {
			sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
				cfg := func(c sketch.Clock) sketch.Config {
					return sketch.Config{Levels: 3, CellsPerLevel: 512, Seed: 67, Decay: lw.d, Hi: lw.hi, Clock: c}
				}
				clk, tclk := sketchtest.NewFakeClock(), sketchtest.NewFakeClock()
				s, _ := sketch.New(cfg(clk))
				twin, _ := sketch.New(cfg(tclk))
				keys := make([]string, 64)
				for i := range keys {
					keys[i] = fmt.Sprintf("key%d", i)
					at := t0 - int64(10*(i%50))
					clk.Set(at)
					tclk.Set(at)
					v := float64(1 + i%40)
					s.UpdateString(keys[i], v)
					twin.UpdateString(keys[i], v)
				}
				clk.Set(t0)
				var stop atomic.Bool
				var wg sync.WaitGroup
				for g := 0; g < 3; g++ {
					wg.Add(1)
					go func(g int) {
						defer wg.Done()
						for i := 0; !stop.Load(); i++ {
							s.UpdateString(keys[(i*7+g)%len(keys)], float64((i+g)%5))
						}
					}(g)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					for !stop.Load() {
						clk.Set(clk.NowMillis() + 1)
					}
				}()
				var buf bytes.Buffer
				_, err := s.WriteTo(&buf)
				stop.Store(true)
				wg.Wait()
				if err != nil {
					t.Fatalf("WriteTo: %v", err)
				}
				// Restore on a clock at or after T. T is WriteTo's one
				// reading at its start, which the ticker may already have
				// moved past t0 (under -race at GOMAXPROCS 8 it did by
				// 9 ms); a clock behind T would read every record from
				// its own earlier now, as the restore documents, and the
				// twin at t0 higher by the drain in between. The clock
				// after the encode is at or after T.
				tr := clk.NowMillis()
				rclk := sketchtest.NewFakeClock()
				rclk.Set(tr)
				r, _ := sketch.New(cfg(rclk))
				if err := r.UnmarshalBinary(buf.Bytes()); err != nil {
					t.Fatal(err)
				}
				for _, q := range []int64{0, 1, 10, 100, 1000, 5000} {
					rclk.Set(tr + q)
					tclk.Set(tr + q)
					for _, k := range keys {
						got, want := r.QueryString(k), math.Min(twin.QueryString(k), lw.hi)
						if got < want*(1-1e-6) {
							t.Errorf("%s at T+%d ms: restored %v, below the updates before T: %v", k, q, got, want)
						}
					}
				}
			})
		})
	}
}
