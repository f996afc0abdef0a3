package grudge_test

import (
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
)

// TestAudit96RootTickerShortPeriodLongIdle: with a Ticker the Period "is
// optional and unused (any value >= 0: the ticks alone rotate)"
// (rotator.go), so a Period of 1 ms with ticks that stop coming must not
// make generations that live for months misread their 32-bit stamps
// (migrating.md, "Idle time": "any idle time, from 1 ms to years, decays
// as grudge's int64 timestamps do"). Linear(1) from 2^24 - 1 read after
// idle times around 2^31 and 2^32 ms and 90 days, in whole seconds (194
// days in all): exact (integers below 2^24), on the primary, with a tick
// (the new primary was written all along, N = 3) in the middle, both
// with another key written every 10 days (sweeps) and without.
func TestAudit96RootTickerShortPeriodLongIdle(t *testing.T) {
	const v0 = 1<<24 - 1
	for _, busy := range []bool{false, true} {
		clk := grudgetest.NewFakeClock()
		clk.Set(time.Unix(1_780_000_000, 0))
		tk := grudgetest.NewFakeTicker()
		r, err := grudge.NewRotator(grudge.RotatorConfig{
			Sketch:      grudge.Config{Levels: 3, CellsPerLevel: 256, Hi: 1 << 24, Decay: grudge.Linear(1), Clock: clk},
			Generations: 3, Period: time.Millisecond, Ticker: tk,
		})
		if err != nil {
			t.Fatal(err)
		}
		k := []byte("k")
		r.Update(k, v0)
		elapsed := int64(0) // s
		for i, idle := range []int64{2147483, 2147484, 1, 4294967, 86400 * 90} {
			for left := idle; left > 0; {
				step := left
				if busy {
					step = min(step, 10*86400)
					r.Update([]byte("other"), 1)
				}
				clk.Advance(time.Duration(step) * time.Second)
				left -= step
			}
			elapsed += idle
			if i == 3 {
				tk.Tick()
			}
			want := math.Max(v0-float64(elapsed), 0)
			if g := r.Query(k); g != want {
				t.Fatalf("busy=%v, %d s after the write (idle %d s): Query = %v, want %v", busy, elapsed, idle, g, want)
			}
		}
		if n := r.Rotations(); n != 1 {
			t.Fatalf("Rotations = %d, want 1", n)
		}
		r.Close()
	}
}
