package meter_test

// Audit 84 (meter): the one-sided guarantees of Rate and Novelty under
// concurrent use, with a clock that moves (and rotates the meters, Period
// = 1 window) while 6 goroutines each write and read their own key in a
// tiny sketch where every key collides. Each goroutine brackets its own
// operations with clock readings, so it knows each event's and read's
// whole ms to within its bracket, and asserts the bound that holds for
// every time in the brackets: Novelty never forgets a key marked at most
// T' ms before (meter/novelty.go: "no false negatives within T",
// "rotation adds no false negative"); Rate never reads below the events
// the primary has certainly counted (meter/rate.go: "The sketch only errs
// upward ... except the rotation term").
//
// Also: conserved sums (Rate.Observe from 8 goroutines at a fixed time
// reads exactly the total over window), and zero allocations of every
// Rate and Novelty operation across horizon sweeps (reads and writes after
// jumps of 2^29 ms + 1 inside one Period: "it does not allocate, but for
// the call that builds a new generation").

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// audit84meterMover advances clk by 1 ms at a time (0 to 2 ms per
// iteration, sometimes a sub-ms part) until stop is closed.
func audit84meterMover(clk *sketchtest.FakeClock, stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		switch i % 7 {
		case 0, 3:
			clk.Advance(time.Millisecond)
		case 5:
			clk.Advance(400 * time.Microsecond)
		case 6:
			clk.Advance(2 * time.Millisecond)
		}
		for range 50 {
			_ = clk.NowMillis() // let the workers run between moves
		}
	}
}

func TestAudit84MeterNoveltyConcurrentNoFalseNegative(t *testing.T) {
	for _, within := range []time.Duration{time.Millisecond, 3 * time.Millisecond, 2500 * time.Microsecond} {
		for _, cells := range []uint32{1, 3} {
			clk := sketchtest.NewFakeClock()
			clk.Set(audit84meterT0)
			n, err := meter.NewNovelty(within, meter.WithClock(clk), meter.WithSeed(21), meter.WithSize(2, cells), meter.WithPeriodWindows(1))
			if err != nil {
				t.Fatal(err)
			}
			tp := audit84meterWholeMs(within)
			stop := make(chan struct{})
			var mw, ww sync.WaitGroup
			mw.Add(1)
			go audit84meterMover(clk, stop, &mw)
			var bad atomic.Value
			for g := range 6 {
				ww.Add(1)
				go func() {
					defer ww.Done()
					key := fmt.Sprint("key", g)
					markLo := int64(-1) // the earliest the last mark can be
					for i := range testsize.Pick(1500, 150) {
						if i%3 == 0 {
							lo := clk.NowMillis()
							got := n.Seen(key)
							hi := clk.NowMillis()
							if markLo >= 0 && hi-markLo <= tp && !got {
								bad.Store(fmt.Sprintf("T=%v M=%d: Seen(%s) new in [%d, %d], marked at or after %d (T' = %d)", within, cells, key, lo-audit84meterT0, hi-audit84meterT0, markLo-audit84meterT0, tp))
								return
							}
							markLo = lo
						} else {
							got := n.Contains(key)
							hi := clk.NowMillis()
							if markLo >= 0 && hi-markLo <= tp && !got {
								bad.Store(fmt.Sprintf("T=%v M=%d: Contains(%s) false at or before %d, marked at or after %d (T' = %d)", within, cells, key, hi-audit84meterT0, markLo-audit84meterT0, tp))
								return
							}
						}
					}
				}()
			}
			ww.Wait()
			close(stop)
			mw.Wait()
			if b := bad.Load(); b != nil {
				t.Fatal(b)
			}
		}
	}
}

func TestAudit84MeterRateConcurrentNeverBelowRecent(t *testing.T) {
	for _, window := range []time.Duration{2 * time.Millisecond, 5 * time.Millisecond} {
		for _, cells := range []uint32{1, 3} {
			clk := sketchtest.NewFakeClock()
			clk.Set(audit84meterT0)
			r, err := meter.NewRate(window, meter.WithClock(clk), meter.WithSeed(22), meter.WithSize(2, cells), meter.WithPeriodWindows(1))
			if err != nil {
				t.Fatal(err)
			}
			pms := int64(audit84meterPeriod(window, 1) / time.Millisecond)
			stop := make(chan struct{})
			var mw, ww sync.WaitGroup
			mw.Add(1)
			go audit84meterMover(clk, stop, &mw)
			var bad atomic.Value
			for g := range 6 {
				ww.Add(1)
				go func() {
					defer ww.Done()
					key := fmt.Sprint("key", g)
					var evLo []int64 // the earliest ms of each event
					for i := range testsize.Pick(1500, 150) {
						if i%2 == 0 {
							evLo = append(evLo, clk.NowMillis())
							r.Observe(key)
							continue
						}
						got := r.PerSecond(key)
						qHi := clk.NowMillis()
						var lo float64
						for _, e := range evLo {
							if e >= qHi-pms {
								lo += audit84meterDecayed(1, qHi-e, window)
							}
						}
						lo /= window.Seconds()
						if got < lo*(1-1e-12) {
							bad.Store(fmt.Sprintf("w=%v M=%d: PerSecond(%s) = %v at or before ms %d, below %v", window, cells, key, got, qHi-audit84meterT0, lo))
							return
						}
					}
				}()
			}
			ww.Wait()
			close(stop)
			mw.Wait()
			if b := bad.Load(); b != nil {
				t.Fatal(b)
			}
		}
	}
}

func TestAudit84MeterRateConservedSum(t *testing.T) {
	for _, cells := range []uint32{1, 1 << 10} {
		clk := sketchtest.NewFakeClock()
		clk.Set(audit84meterT0)
		r, err := meter.NewRate(time.Second, meter.WithClock(clk), meter.WithSeed(23), meter.WithSize(4, cells))
		if err != nil {
			t.Fatal(err)
		}
		const G, N = 8, 2000
		var wg sync.WaitGroup
		for g := range G {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range N {
					if i%2 == 0 {
						r.Observe(fmt.Sprint("k", g%2))
					} else {
						r.ObserveAt(clk.Now(), fmt.Sprint("k", g%2), 1)
					}
				}
			}()
		}
		wg.Wait()
		for k := range 2 {
			want := float64(G / 2 * N)
			if cells == 1 {
				want = G * N // every key in one cell per level
			}
			if got := r.PerSecond(fmt.Sprint("k", k)); got != want {
				t.Fatalf("M=%d: PerSecond(k%d) = %v, want exactly %v", cells, k, got, want)
			}
		}
	}
}

func TestAudit84MeterNoAllocsAcrossSweeps(t *testing.T) {
	for _, pf := range []bool{true, false} {
		for _, h := range []sketch.HasherFactory{nil, sketch.XXH3()} {
			clk := sketchtest.NewFakeClock()
			opts := []meter.Option{meter.WithClock(clk), meter.WithSeed(1), meter.WithSize(3, 64), meter.WithPrefetch(pf)}
			if h != nil {
				opts = append(opts, meter.WithHasher(h))
			}
			jump := func() { clk.Advance((1<<29 + 1) * time.Millisecond) }
			var n *meter.Novelty
			var r *meter.Rate
			for name, f := range map[string]func(){
				"Seen":        func() { jump(); n.Seen("k") },
				"Contains":    func() { jump(); n.Contains("k") },
				"SeenAt":      func() { jump(); n.SeenAt(clk.Now(), "k") },
				"ContainsAt":  func() { jump(); n.ContainsAt(clk.Now(), "k") },
				"Observe":     func() { jump(); r.Observe("k") },
				"PerSecond":   func() { jump(); r.PerSecond("k") },
				"ObserveAt":   func() { jump(); r.ObserveAt(clk.Now(), "k", 2) },
				"PerSecondAt": func() { jump(); r.PerSecondAt(clk.Now(), "k") },
			} {
				// 30-day windows: Period 480 days, and 21 jumps of 6.2
				// days stay inside the first one
				clk.Set(audit84meterT0)
				n, _ = meter.NewNovelty(30*24*time.Hour, opts...)
				r, _ = meter.NewRate(30*24*time.Hour, opts...)
				n.Seen("k")
				r.Observe("k")
				n.Seen("j")
				r.Observe("j")
				if a := testing.AllocsPerRun(20, f); a != 0 {
					t.Errorf("prefetch %v XXH3 %v: %s after a horizon jump: %v allocs, want 0", pf, h != nil, name, a)
				}
			}
		}
	}
}
