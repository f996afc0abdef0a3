package meter_test

import (
	"testing"
	"time"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit18RateClockBack: a clock that steps back is no elapsed time
// for a meter.Rate: the rate read an hour or 2^31 ms behind the time
// used is the rate at that time (not decayed, not grown), at any stale
// t too, and a t ahead of the clock counts as the clock's reading (the
// rate there is the same).
func TestAudit18RateClockBack(t *testing.T) {
	for _, back := range []time.Duration{time.Millisecond, time.Hour, 1 << 31 * time.Millisecond, 400 * 24 * time.Hour} {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_700_000_000_000)
		r, err := meter.NewRate(10*time.Second, meter.WithClock(clk), meter.WithSeed(1))
		if err != nil {
			t.Fatal(err)
		}
		for range 50 {
			r.Observe("k")
			clk.Advance(100 * time.Millisecond)
		}
		at := clk.Now()
		want := r.PerSecond("k")
		if want <= 0 {
			t.Fatalf("PerSecond = %v", want)
		}
		clk.Advance(-back)
		for _, got := range []float64{r.PerSecond("k"), r.PerSecondAt(at.Add(-back), "k"), r.PerSecondAt(at, "k"), r.PerSecondAt(at.Add(time.Hour), "k")} {
			if got != want {
				t.Fatalf("back %v: PerSecond %v, want %v (no time elapsed)", back, got, want)
			}
		}
		// Observations while behind count at the time used.
		r.Observe("k")
		clk.Set(at.UnixMilli())
		if got := r.PerSecond("k"); got <= want {
			t.Fatalf("back %v: an observation behind the mark did not count: %v <= %v", back, got, want)
		}
	}
}
