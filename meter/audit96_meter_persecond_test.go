package meter_test

import (
	"testing"
	"time"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit96MeterRateFixedPerSecondBelowExact (audit 96; fixed at stop
// 59, the text below says what was wrong; PerSecond is now C/window
// rounded up). Rate's doc
// (meter/rate.go:20, 26-28): "The estimate is C/window ... The sketch only
// errs upward: collisions (Min of L cells) and float32 rounding (up) can
// raise an estimate, never lower it, except the rotation term", and
// meter/doc.go:51 pseudo-code "Rate.PerSecond(k): s.Query(k) /
// window.Seconds()". n events observed at one instant and read at that
// instant leave the count C = n exactly (no decay, a whole float32), so
// the estimate is n/window, here a whole number of events a second. The
// code multiplies C by a rounded 1/window instead
// (PerSecond = Query x perSec), which lands one float64 ulp below it:
// 13 events on a 130 ms window read 99.99999999999999/s, not 100 (the
// pseudo-code's division gives 100), 13 on 65 ms 199.99999999999997,
// 195 on 3 ms 64999.99999999999, 21 on 21 ms 999.9999999999999 (there
// the division by 0.021 is below too). A caller's PerSecond(k) >= 100
// then misses a key at exactly 100/s. 4,301 of the windows from 1 ms to
// 20 s have such a whole rate below 2,000/s (common ones, 1 s, 1 min, 1 h,
// do not).
func TestAudit96MeterRateFixedPerSecondBelowExact(t *testing.T) {
	for _, c := range []struct {
		wms  int64   // window in ms
		n    float64 // events at one instant
		rate float64 // n/window, exactly
	}{{130, 13, 100}, {65, 13, 200}, {3, 195, 65000}, {21, 21, 1000}} {
		w := time.Duration(c.wms) * time.Millisecond
		clk := sketchtest.NewFakeClock()
		clk.Set(1_000_000)
		r, err := meter.NewRate(w, meter.WithClock(clk), meter.WithSeed(96), meter.WithSize(2, 64))
		if err != nil {
			t.Fatal(err)
		}
		now := clk.Now()
		r.ObserveAt(now, "k", c.n)
		if got := r.PerSecondAt(now, "k"); got < c.rate {
			t.Errorf("window %v, %v events read at their instant: PerSecond %v, below the exact %v (= C/window, C = %v)", w, c.n, got, c.rate, c.n)
		}
		if got := r.PerSecond("k"); got < c.rate {
			t.Errorf("window %v, %v events, short form: PerSecond %v, below the exact %v", w, c.n, got, c.rate)
		}
	}
}
