package meter_test

import (
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit146FixedAtClockNowForgotten (audit 146; fixed at stop 65, the text below
// says what was wrong): a Rate and a Novelty built
// while their fake clock read MinInt64 ms, the clock then at MaxInt64 -
// 1000 ms: ObserveAt(clk.Now(), k, 5) is not seen by PerSecond(k) at the
// same millisecond, and after SeenAt(clk.Now(), k) Contains(k) is false,
// and a second SeenAt reports the key unseen (new) again.
//
// sketch/doc.go "Time" (which meter's At forms follow: ObserveAt and
// SeenAt are named there): "a fake clock's Now() ... mean[s] what [it]
// say[s]"; meter's Seen "reports whether key was marked within the last T".
// Observed: PerSecond 0; Contains false; the second SeenAt false.
// Cause: internal/core/clock.go convert maps the clock's own Now to -1 ms
// (the difference t - anchor saturated at MaxInt64, added to
// MinInt64), see sketch/audit146_ends_test.go. Fix there.
func TestAudit146FixedAtClockNowForgotten(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(math.MinInt64)
	r, err := meter.NewRate(time.Second, meter.WithClock(clk), meter.WithSize(2, 64), meter.WithSeed(146))
	if err != nil {
		t.Fatal(err)
	}
	nv, err := meter.NewNovelty(time.Hour, meter.WithClock(clk), meter.WithSize(2, 64))
	if err != nil {
		t.Fatal(err)
	}
	clk.Set(math.MaxInt64 - 1000)
	r.ObserveAt(clk.Now(), "k", 5)
	if got := r.PerSecond("k"); got <= 0 {
		t.Errorf("Rate: ObserveAt(clk.Now(), k, 5) then PerSecond(k) at the same ms = %v, want > 0", got)
	}
	if nv.SeenAt(clk.Now(), "k") {
		t.Fatal("Novelty: a fresh key's first SeenAt reported it seen")
	}
	if !nv.Contains("k") {
		t.Errorf("Novelty: SeenAt(clk.Now(), k) then Contains(k) at the same ms = false, want true")
	}
	if !nv.SeenAt(clk.Now(), "k") {
		t.Errorf("Novelty: a second SeenAt(clk.Now(), k) at the same ms reports the key not seen")
	}
}

// TestAudit146MetersAcrossEndsHold: with New at each end value and the
// clock moved to another whose span fits int64, the short and the At
// forms at the clock's Now agree: a Rate sees what was observed this
// millisecond and none of what was observed more than a window before;
// a Novelty keeps a key seen now and forgets one seen long before; a
// step back keeps what was there (zero elapsed).
func TestAudit146MetersAcrossEndsHold(t *testing.T) {
	ends := []int64{math.MinInt64, -1 << 40, -1, 0, 1 << 40, math.MaxInt64 - 1000, math.MaxInt64}
	for _, start := range ends {
		for _, to := range ends {
			if to == start || math.Abs(float64(to)-float64(start)) > 9e18 {
				continue
			}
			clk := sketchtest.NewFakeClock()
			clk.Set(start)
			r, err := meter.NewRate(time.Second, meter.WithClock(clk), meter.WithSize(2, 64), meter.WithSeed(146))
			if err != nil {
				t.Fatal(err)
			}
			nv, err := meter.NewNovelty(time.Minute, meter.WithClock(clk), meter.WithSize(2, 64), meter.WithSeed(146))
			if err != nil {
				t.Fatal(err)
			}
			r.Observe("old")
			nv.Seen("old")
			clk.Set(to)
			r.ObserveAt(clk.Now(), "k", 5)
			if a, b := r.PerSecond("k"), r.PerSecondAt(clk.Now(), "k"); a <= 0 || a != b {
				t.Errorf("New %d, clock %d: Rate after ObserveAt(now, 5): PerSecond %v, PerSecondAt(now) %v", start, to, a, b)
			}
			if nv.SeenAt(clk.Now(), "k") || !nv.Seen("k") || !nv.ContainsAt(clk.Now(), "k") {
				t.Errorf("New %d, clock %d: Novelty: a key seen now is not kept", start, to)
			}
			oldRate, oldSeen := r.PerSecond("old"), nv.Contains("old")
			switch {
			case to < start && (oldRate <= 0 || !oldSeen):
				t.Errorf("New %d, clock stepped back to %d: Rate %v, Novelty %v for a key seen at New; want kept (zero elapsed)", start, to, oldRate, oldSeen)
			case to-start > int64(time.Hour/time.Millisecond) && (oldRate != 0 || oldSeen):
				t.Errorf("New %d, clock %d (%d ms later): Rate %v, Novelty %v for a key seen at New; want 0, false", start, to, to-start, oldRate, oldSeen)
			}
		}
	}
}
