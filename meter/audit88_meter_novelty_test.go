package meter_test

import (
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// Every key in one cell (WithSize(1, 1)): the first Seen marks the one
// cell every key reads, so of goroutines racing Seen on many keys at one
// instant exactly one is told new ("exactly one of racing callers is
// told a key is new"; a key sharing all its cells with a key seen is a
// false positive). T' + 1 ms later, again exactly one; at T' none, at
// every GOMAXPROCS.
func TestAudit88MeterNoveltyOneCellExactlyOne(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		clk := sketchtest.NewFakeClock()
		clk.Set(50_000)
		T := 2300 * time.Microsecond // T' = 3 ms
		n, err := meter.NewNovelty(T, meter.WithClock(clk), meter.WithSize(1, 1), meter.WithSeed(2))
		if err != nil {
			t.Fatal(err)
		}
		race := func() int64 {
			var fresh atomic.Int64
			var wg sync.WaitGroup
			for g := range 32 {
				wg.Go(func() {
					for i := range 4 {
						if !n.Seen(string(rune('a'+g%7)) + string(rune('0'+i))) {
							fresh.Add(1)
						}
					}
				})
			}
			wg.Wait()
			return fresh.Load()
		}
		for round := range 4 {
			if got := race(); got != 1 {
				t.Errorf("round %d: %d callers told new; want exactly 1", round, got)
			}
			clk.Advance(3 * time.Millisecond) // T': still seen (every call refreshed)
			if n.Contains("zz") != true {
				t.Errorf("round %d: the cell forgot its mark at T'", round)
			}
			clk.Advance(time.Millisecond) // T' + 1 ms: forgotten
			if n.Contains("zz") {
				t.Errorf("round %d: the cell still marked at T' + 1 ms", round)
			}
		}
	})
}

// Rate at a constant rate (an event every 100 ms, window 1 s), long past
// the startup transient: the estimate's average over each millisecond of
// a period is the rate, to the counter's own arithmetic ("at steady state
// it is unbiased"): exactly the discrete model's mean, C_ss/window x
// mean(exp(-j ms/window)), never below each sample of the model and above
// it by float32 rounding only.
func TestAudit88MeterRateSteadyStateUnbiased(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(10_000_000)
	w := time.Second
	r, err := meter.NewRate(w, meter.WithClock(clk), meter.WithSize(2, 64), meter.WithSeed(3))
	if err != nil {
		t.Fatal(err)
	}
	const step = 100             // ms
	for range 40 * 1000 / step { // 40 windows: transient exp(-40)
		r.Observe("k")
		clk.Advance(step * time.Millisecond)
	}
	r.Observe("k")
	css := 1 / (1 - math.Exp(-float64(step)/1000)) // the steady-state count just after an event
	sum, model := 0.0, 0.0
	for j := range step {
		got := r.PerSecond("k")
		want := css * math.Exp(-float64(j)/1000) // per second = count / 1 s
		if got < want*(1-1e-9) || got > want*(1+1e-5) {
			t.Errorf("%d ms after an event: %v/s; want %v (the model)", j, got, want)
		}
		sum += got
		model += want
		clk.Advance(time.Millisecond)
	}
	mean := sum / step
	if math.Abs(mean-model/step) > 1e-5*mean {
		t.Errorf("mean over a period %v/s; want the model's %v", mean, model/step)
	}
	// The discrete mean is the rate to within the sampling's half-ms bias.
	if math.Abs(mean-10) > 10*0.0006 {
		t.Errorf("mean over a period %v/s; want 10 (the rate)", mean)
	}
}
