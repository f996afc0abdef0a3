package rotator_test

import (
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit53FarClockSnapshot: a rotator (N = 2, Period 1 h, no decay)
// whose fake clock reads 2^40, 2^52 or 2^60 ms, or is within half a
// Period of MaxInt64 ms: a write, a save, then a restore on a clock 1 ms
// later and one 2 Periods + 1 ms later. The restored rotator reads what
// the never-saved one reads (the write, then 0 after N Periods); the
// deadline arithmetic neither overflows nor stops rotation.
func TestAudit53FarClockSnapshot(t *testing.T) {
	const P = int64(3_600_000)
	// Past 2^61 ms the decoder bounds wall times to +-2^61 ms (against
	// forged headers: internal/core/rotator_snapshot.go), so a clock that
	// far out restores with no downtime; 2^62 ms is not tried.
	for _, start := range []int64{1 << 40, 1 << 52, 1 << 60, math.MaxInt64 - P/2} {
		clk := sketchtest.NewFakeClock()
		clk.Set(start)
		r := a53New(t, clk, 2, time.Hour, 1)
		r.UpdateString("k", 3)
		data, err := r.MarshalBinary()
		if err != nil {
			t.Fatalf("start %d: %v", start, err)
		}
		for _, down := range []int64{1, 2*P + 1} {
			at := start + down
			if at < start { // overflow
				continue
			}
			rc := sketchtest.NewFakeClock()
			rc.Set(at)
			nr := a53New(t, rc, 2, time.Hour, 1)
			if err := nr.UnmarshalBinary(data); err != nil {
				t.Fatalf("start %d down %d: %v", start, down, err)
			}
			clk.Set(at)
			if o, g := r.QueryString("k"), nr.QueryString("k"); o != g {
				t.Errorf("start %d ms, downtime %d ms: restored reads %v, never-saved %v", start, down, g, o)
			}
		}
	}
}
