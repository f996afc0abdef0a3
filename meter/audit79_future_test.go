package meter_test

import (
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit79FutureAndStaleTimes: an At form given a time a day ahead of
// the clock counts as the clock's reading (the rotator's time rule), so
// it neither rotates the meter early nor loses any other key's count or
// mark; a stale time counts as the latest time used (no negative decay).
func TestAudit79FutureAndStaleTimes(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	r, _ := meter.NewRate(time.Second, meter.WithClock(clk), meter.WithSeed(1), meter.WithSize(4, 256))
	n, _ := meter.NewNovelty(time.Second, meter.WithClock(clk), meter.WithSeed(1), meter.WithSize(4, 256))
	r.ObserveAt(clk.Now(), "a", 100)
	n.Seen("a")
	future := clk.Now().Add(24 * time.Hour)
	r.ObserveAt(future, "b", 1)
	n.SeenAt(future, "b")
	_ = r.PerSecondAt(future, "a")
	_ = n.ContainsAt(future, "a")
	if g := r.PerSecond("a"); g < 100 || g > 100.01 {
		t.Errorf("Rate: a future-time call changed another key: %v, want 100", g)
	}
	if g := r.PerSecond("b"); g < 1 || g > 1.0001 {
		t.Errorf("Rate: future-time event reads %v now, want 1", g)
	}
	if !n.Contains("a") || !n.Contains("b") {
		t.Errorf("Novelty: a future-time call lost a mark")
	}
	clk.Advance(500 * time.Millisecond)
	stale := clk.Now().Add(-400 * time.Millisecond)
	// no call used a time after stale yet: the event is at stale, and
	// reads decayed by 400 ms now
	r.ObserveAt(stale, "c", 10)
	if g, w := r.PerSecond("c"), 10*math.Exp(-0.4); g < w*(1-1e-6) || g > w*(1+1e-4) {
		t.Errorf("Rate: event at a past time not yet passed reads %v, want %v", g, w)
	}
	// now that the clock's reading was used, a stale time counts as it
	r.ObserveAt(stale, "d", 10)
	if g := r.PerSecond("d"); g < 10 || g > 10.001 {
		t.Errorf("Rate: stale event reads %v, want 10 (counted at the latest time used)", g)
	}
	if !n.SeenAt(stale, "a") {
		t.Errorf("Novelty: SeenAt a stale time forgot a mark of age 500 ms (T = 1 s)")
	}
}
