package rotator_test

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// audit24Procs runs f under GOMAXPROCS 1, 2 and 4.
func audit24Procs(t *testing.T, f func(t *testing.T)) {
	for _, p := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("procs=%d", p), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(p))
			f(t)
		})
	}
}

// audit24Race runs g goroutines, each calling op(goroutine, i) for i in
// [0, per), while a clock goroutine advances clk by one period each time
// the calls done so far cross one of steps (a promotion per step, mid
// race). It returns once all are done.
func audit24Race(clk *sketchtest.FakeClock, p time.Duration, g, per int, steps []int64, op func(w, i int)) {
	var done, claimed, stepped atomic.Int64
	var wg sync.WaitGroup
	var cwg sync.WaitGroup
	cwg.Add(1)
	go func() {
		defer cwg.Done()
		for _, s := range steps {
			for done.Load() < s {
				runtime.Gosched()
			}
			clk.Advance(p)
			stepped.Add(1)
		}
	}()
	for w := 0; w < g; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < per; i++ {
				// A call numbered past a step waits for its clock
				// advance, so each step lands mid-race with calls on
				// both sides of it.
				idx := claimed.Add(1) - 1
				for j, s := range steps {
					for idx >= s+int64(g) && stepped.Load() <= int64(j) {
						runtime.Gosched()
					}
				}
				op(w, i)
				done.Add(1)
			}
		}(w)
	}
	wg.Wait()
	cwg.Wait()
}

// TestAudit24TryUpdateExactAcrossPromotionsColliding: every key collides
// (one cell per level), no decay, limit 300, 8 goroutines x 100 calls on
// 8 keys while the clock crosses two deadlines (N = 3, so the last
// primary was live from the start and holds every admission): exactly
// 300 admitted over all keys, never more, and every key's Query reads the
// conserved sum 300.
func TestAudit24TryUpdateExactAcrossPromotionsColliding(t *testing.T) {
	audit24Procs(t, func(t *testing.T) {
		for rep := 0; rep < 8; rep++ {
			clk := sketchtest.NewFakeClock()
			clk.Set(1_000_000)
			r := newRotator(t, rotator.Config{
				Sketch:      sketch.Config{Levels: 2, CellsPerLevel: 1, Hi: 1e9, Clock: clk},
				Generations: 3, Period: time.Second, Prefetch: rep%2 == 1,
			})
			const limit = 300
			var admitted atomic.Int64
			keys := []string{"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7"}
			audit24Race(clk, time.Second, 8, 100, []int64{120, 260}, func(w, i int) {
				if r.TryUpdateString(keys[(w+i)%len(keys)], 1, limit) {
					admitted.Add(1)
				}
			})
			if st := r.Stats(); st.Promotions != 2 {
				t.Fatalf("Promotions = %d, want 2", st.Promotions)
			}
			if got := admitted.Load(); got != limit {
				t.Fatalf("rep %d: admitted %d across two promotions, want exactly %d", rep, got, limit)
			}
			for _, k := range keys {
				if q := r.QueryString(k); q != limit {
					t.Fatalf("rep %d: Query(%s) = %v, want %d (the conserved sum)", rep, k, q, limit)
				}
			}
		}
	})
}

// TestAudit24TryUpdateExactAcrossPromotionsOneKey: one key alone, limit
// 500 with deltas of 1 and 2 mixed, 8 goroutines across two promotions
// (N = 3): the admitted deltas sum to at most 500, and to at least
// 499 (a 2 may be denied at 499), and the key reads exactly that sum.
func TestAudit24TryUpdateExactAcrossPromotionsOneKey(t *testing.T) {
	audit24Procs(t, func(t *testing.T) {
		for rep := 0; rep < 8; rep++ {
			clk := sketchtest.NewFakeClock()
			clk.Set(1_000_000)
			r := newRotator(t, rotator.Config{
				Sketch:      sketch.Config{CellsPerLevel: 4096, Hi: 1e9, Clock: clk},
				Generations: 3, Period: time.Second, Prefetch: rep%2 == 0,
			})
			const limit = 500
			var sum atomic.Int64
			audit24Race(clk, time.Second, 8, 100, []int64{150, 300}, func(w, i int) {
				d := int64(1 + (w+i)%2)
				if r.TryUpdateString("hot", float64(d), limit) {
					sum.Add(d)
				}
			})
			got := sum.Load()
			if got > limit || got < limit-1 {
				t.Fatalf("rep %d: admitted deltas sum to %d, want %d or %d", rep, got, limit-1, limit)
			}
			if q := r.QueryString("hot"); q != float64(got) {
				t.Fatalf("rep %d: Query = %v, want the admitted sum %d", rep, q, got)
			}
		}
	})
}

// TestAudit24ConservedSumAcrossPromotions: Update, UpdateAndQuery and
// an always-admitted TryUpdate on colliding keys, racing two promotions
// (N = 3): no write is lost by the generation that was live throughout,
// so every key reads the sum of all deltas; each UpdateAndQuery returns
// at least its own running contribution and at most the final sum.
func TestAudit24ConservedSumAcrossPromotions(t *testing.T) {
	audit24Procs(t, func(t *testing.T) {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_000_000)
		r := newRotator(t, rotator.Config{
			Sketch:      sketch.Config{Levels: 3, CellsPerLevel: 1, Hi: 1e9, Clock: clk},
			Generations: 3, Period: time.Second,
		})
		var total atomic.Int64
		var mine [6]int64
		var bad atomic.Value
		audit24Race(clk, time.Second, 6, 150, []int64{200, 600}, func(w, i int) {
			k := fmt.Sprintf("k%d", (w*7+i)%5)
			d := int64(1 + i%3)
			switch i % 3 {
			case 0:
				r.UpdateString(k, float64(d))
			case 1:
				v := r.UpdateAndQueryString(k, float64(d))
				if v < float64(mine[w]+d) {
					bad.Store(fmt.Sprintf("UpdateAndQuery = %v below the caller's own %d", v, mine[w]+d))
				}
			case 2:
				if !r.TryUpdateString(k, float64(d), 1e8) {
					bad.Store("TryUpdate under a limit of 1e8 denied")
				}
			}
			mine[w] += d
			total.Add(d)
		})
		if b := bad.Load(); b != nil {
			t.Fatal(b)
		}
		for i := 0; i < 5; i++ {
			k := fmt.Sprintf("k%d", i)
			if q := r.QueryString(k); q != float64(total.Load()) {
				t.Fatalf("Query(%s) = %v, want the sum of all deltas %d", k, q, total.Load())
			}
		}
	})
}
