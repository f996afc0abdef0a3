package meter_test

import (
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit96MeterNoveltyLongTSweepsKeepMark: Novelty's doc
// (meter/novelty.go:22-29): the key's own mark "stays above for exactly
// T' of the clock's whole milliseconds ... no false negatives within T
// (a mark may last a hair longer: float32 rounding is upward ...)". For
// a T of months to a century the sketch's periodic sweep (every 2^29 to
// 2^30 ms, package sketch, "No locks") re-stamps the idle mark, each time
// rounding it up to a float32, while other keys are seen: the mark is
// still there at exactly T' after it, and gone within one float32 step
// per sweep of lifetime (T x (sweeps + 2) x 2^-24) after T'. Measured:
// 1m26s after T' for 400 days, 1h52m for 10 years, 6 days for 100 years
// (the "hair"; the century runs only at full size).
func TestAudit96MeterNoveltyLongTSweepsKeepMark(t *testing.T) {
	day := 24 * time.Hour
	for _, c := range []struct {
		T, every time.Duration
		full     bool // run only at full size
	}{
		{400 * day, time.Hour, false}, {3650 * day, day, false}, {100 * 365 * day, 6 * day, true},
	} {
		if c.full && testsize.Small() {
			continue
		}
		clk := sketchtest.NewFakeClock()
		clk.Set(1_000_000)
		n, err := meter.NewNovelty(c.T, meter.WithClock(clk), meter.WithSeed(96), meter.WithSize(4, 256), meter.WithPeriodWindows(1))
		if err != nil {
			t.Fatal(err)
		}
		if n.Seen("a") {
			t.Fatalf("T %v: a fresh key told seen", c.T)
		}
		t0 := clk.NowMillis()
		for clk.NowMillis()-t0 < (c.T - c.every).Milliseconds() {
			clk.Advance(c.every)
			n.Seen("zzz-other-key")
		}
		tp := c.T.Milliseconds() // T is whole ms: T' = T
		clk.Set(t0 + tp)
		if !n.Contains("a") {
			t.Errorf("T %v, other keys seen every %v: a mark forgotten at exactly T' after it", c.T, c.every)
		}
		sweeps := float64(tp)/(1<<29) + 2
		hair := time.Duration(float64(c.T)*sweeps*0x1p-24) + time.Millisecond
		clk.Set(t0 + tp + hair.Milliseconds())
		if n.Contains("a") {
			t.Errorf("T %v, other keys seen every %v: a mark still seen %v after T' (one float32 step a sweep)", c.T, c.every, hair)
		}
	}
}
