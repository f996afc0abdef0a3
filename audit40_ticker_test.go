package grudge_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

func a40Cfg(clk grudge.Clock) grudge.Config {
	return grudge.Config{Levels: 3, CellsPerLevel: 512, Hi: 1e9, Decay: grudge.None(), Clock: clk}
}

// A Ticker-driven Rotator rotates once per tick and never on access;
// Rotations counts ticks; Close is idempotent, stops the ticker, and
// operations keep working without rotating.
func TestAudit40TickerRotations(t *testing.T) {
	clk := grudgetest.NewFakeClock()
	tk := grudgetest.NewFakeTicker()
	r, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: a40Cfg(clk), Generations: 2, Ticker: tk})
	if err != nil {
		t.Fatal(err)
	}
	k := []byte("k")
	r.Update(k, 1)
	clk.Advance(10 * time.Hour) // beyond the stand-in Period: no lazy rotation
	if got := r.Rotations(); got != 0 {
		t.Fatalf("Rotations %d before any tick, want 0", got)
	}
	if q := r.Query(k); q != 1 {
		t.Fatalf("Query %v, want 1 (no rotation without a tick)", q)
	}
	r.Update(k, 2)
	tk.Tick() // A retires; B (created at New) holds 3
	if got := r.Rotations(); got != 1 {
		t.Fatalf("Rotations %d after one tick", got)
	}
	if q := r.Query(k); q != 3 {
		t.Fatalf("after tick 1: Query %v, want 3", q)
	}
	r.Update(k, 4) // B, C
	tk.Tick()      // C (created at tick 1) holds 4
	if q := r.Query(k); q != 4 {
		t.Fatalf("after tick 2: Query %v, want 4", q)
	}
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 5; j++ {
				tk.Tick()
			}
		}()
	}
	wg.Wait()
	if got := r.Rotations(); got != 22 {
		t.Fatalf("Rotations %d after 22 ticks", got)
	}
	r.Close()
	r.Close()
	if !tk.Stopped() {
		t.Fatalf("Close did not stop the ticker")
	}
	tk.Tick()
	r.Update(k, 1)
	clk.Advance(100 * time.Hour)
	if got := r.Rotations(); got != 22 {
		t.Fatalf("Rotations %d after Close, want 22", got)
	}
	if q := r.Query(k); q != 1 {
		t.Fatalf("after Close: Query %v, want 1", q)
	}
}

// A lazy Rotator counts the periods elapsed, a jump of k counting k, as
// k ticks would have; both kinds agree on what they read.
func TestAudit40LazyAgreesWithTicker(t *testing.T) {
	clk := grudgetest.NewFakeClock()
	lazy, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: a40Cfg(clk), Generations: 3, Period: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer lazy.Close()
	defer lazy.Close()
	tk := grudgetest.NewFakeTicker()
	tclk := grudgetest.NewFakeClock()
	tick, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: a40Cfg(tclk), Generations: 3, Period: 10 * time.Millisecond, Ticker: tk})
	if err != nil {
		t.Fatal(err)
	}
	defer tick.Close()
	k := []byte("k")
	for step := 1; step <= 8; step++ {
		lazy.Update(k, float64(step))
		tick.Update(k, float64(step))
		clk.Advance(10 * time.Millisecond)
		tclk.Advance(10 * time.Millisecond)
		tk.Tick()
		if a, b := lazy.Rotations(), tick.Rotations(); a != int64(step) || b != int64(step) {
			t.Fatalf("step %d: lazy %d, ticker %d rotations", step, a, b)
		}
		if a, b := lazy.Query(k), tick.Query(k); a != b {
			t.Fatalf("step %d: lazy reads %v, ticker %v", step, a, b)
		}
	}
	clk.Advance(35 * time.Millisecond)
	if got := lazy.Rotations(); got != 11 {
		t.Fatalf("lazy after a 3.5-period jump: %d rotations, want 11", got)
	}
}

// TryUpdate through a Ticker rotator is exact across the first tick
// (both generations built at New hold every admission).
func TestAudit40TickerTryUpdateExact(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		for round := 0; round < 5; round++ {
			tk := grudgetest.NewFakeTicker()
			r, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: a40Cfg(grudgetest.NewFakeClock()), Generations: 2, Ticker: tk})
			if err != nil {
				t.Fatal(err)
			}
			const L = 400
			var got atomic.Int64
			var wg sync.WaitGroup
			for w := 0; w < 8; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					for i := 0; i < 100; i++ {
						if w == 0 && i == 20 {
							tk.Tick()
						}
						if r.TryUpdate([]byte("k"), 1, L) {
							got.Add(1)
						}
					}
				}(w)
			}
			wg.Wait()
			r.Close()
			if g := got.Load(); g != L {
				t.Fatalf("round %d: %d admissions across a tick, want %d", round, g, L)
			}
			if q := r.Query([]byte("k")); q != L {
				t.Fatalf("round %d: primary %v, want %d", round, q, L)
			}
		}
	})
}

// Period is optional with a Ticker, required without one.
func TestAudit40TickerPeriodOptional(t *testing.T) {
	if _, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: a40Cfg(nil)}); err == nil {
		t.Fatalf("no Period, no Ticker: accepted")
	}
	tk := grudgetest.NewFakeTicker()
	r, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: a40Cfg(nil), Ticker: tk})
	if err != nil {
		t.Fatalf("Ticker without Period: %v", err)
	}
	r.Close()
}

// Rotations: "For a lazy rotator it first brings rotation up to date ...
// and counts the periods that elapsed". With Period 2.9 ms (the Period was
// truncated to 2 ms in the core), 29 ms counted 14. Fixed: a Period is
// counted in whole ms rounded up (3 ms, so a generation is the primary
// for at least Period), so 29 ms are 9 of them.
func TestAudit40FixedRotationsSubMsPeriod(t *testing.T) {
	clk := grudgetest.NewFakeClock()
	r, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: a40Cfg(clk), Period: 2900 * time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(29 * time.Millisecond)
	if got := r.Rotations(); got != 9 {
		t.Errorf("Rotations() = %d after 29 ms with Period 2.9 ms, want 9 (root rotator.go Rotations: \"counts the periods that elapsed\", of Period rounded up to 3 ms)", got)
	}
}
