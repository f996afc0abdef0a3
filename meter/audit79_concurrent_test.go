package meter_test

import (
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit79RateConcurrentMovingClock: workers Observe keys (some
// colliding in a small sketch) while a mover advances the fake clock
// across many rotation deadlines; at the end each key's estimate is at
// least the lower bound of its events of the last Period (each event
// taken at the clock read before it, so its age is at most that),
// GOMAXPROCS 1..8, -race. rate.go: the estimate is never lowered but by
// the rotation term; writes past a deadline are never lost (package
// rotator, "Operations during a promotion").
func TestAudit79RateConcurrentMovingClock(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		window := 20 * time.Millisecond
		period := int64(16 * 20)
		clk := sketchtest.NewFakeClock()
		clk.Set(100_000)
		r, err := meter.NewRate(window, meter.WithClock(clk), meter.WithSeed(3), meter.WithSize(2, 8))
		if err != nil {
			t.Fatal(err)
		}
		const workers, nkeys = 4, 12
		logs := make([][]audit79Event, workers*nkeys)
		stop := make(chan struct{})
		var mv sync.WaitGroup
		mv.Add(1)
		go func() {
			defer mv.Done()
			for i := 0; i < 1500; i++ {
				clk.Advance(time.Millisecond)
				if i%50 == 0 {
					time.Sleep(50 * time.Microsecond)
				}
			}
			close(stop)
		}()
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					k := i % nkeys
					before := clk.NowMillis()
					r.Observe(fmt.Sprint("k", k))
					logs[w*nkeys+k] = append(logs[w*nkeys+k], audit79Event{before, 1})
					if i%64 == 0 {
						time.Sleep(10 * time.Microsecond)
					}
				}
			}(w)
		}
		mv.Wait()
		wg.Wait()
		final := clk.NowMillis()
		for k := 0; k < nkeys; k++ {
			low := 0.0
			n := 0
			for w := 0; w < workers; w++ {
				for _, e := range logs[w*nkeys+k] {
					if final-e.ms < period {
						low += math.Exp(-float64(final-e.ms) / 20)
						n++
					}
				}
			}
			got := r.PerSecond(fmt.Sprint("k", k)) * window.Seconds()
			if k == 0 {
				t.Logf("key k0: %d events in the last Period, count %v, bound %v", n, got, low)
			}
			if got < low*(1-1e-6) {
				t.Errorf("key k%d at %d: count %v below the lower bound %v of its %d events of the last Period", k, final, got, low, n)
			}
		}
	})
}

// TestAudit79NoveltyConcurrentMovingClock: workers mark keys with Seen
// while the fake clock moves across rotation deadlines (PeriodWindows 1,
// the minimum); at the end every key whose mark began less than T ago is
// contained (no false negative within T, rotation adds none).
func TestAudit79NoveltyConcurrentMovingClock(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		T := 30 * time.Millisecond
		clk := sketchtest.NewFakeClock()
		clk.Set(777)
		n, err := meter.NewNovelty(T, meter.WithClock(clk), meter.WithSeed(4), meter.WithSize(4, 1<<12), meter.WithPeriodWindows(1))
		if err != nil {
			t.Fatal(err)
		}
		const workers = 4
		type mark struct {
			key    string
			before int64
		}
		marks := make([][]mark, workers)
		stop := make(chan struct{})
		var mv sync.WaitGroup
		mv.Add(1)
		go func() {
			defer mv.Done()
			for i := 0; i < 400; i++ {
				clk.Advance(time.Millisecond)
				time.Sleep(20 * time.Microsecond)
			}
			close(stop)
		}()
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					key := fmt.Sprintf("w%d-%d", w, i)
					before := clk.NowMillis()
					n.Seen(key)
					after := clk.NowMillis()
					marks[w] = append(marks[w], mark{key, before})
					// immediately after: contained as long as less than T passed
					if clk.NowMillis()-before < T.Milliseconds() && after-before < T.Milliseconds() {
						if !n.Contains(key) && clk.NowMillis()-before < T.Milliseconds() {
							t.Errorf("%s marked at >= %d not contained at %d", key, before, clk.NowMillis())
							return
						}
					}
					if i%64 == 0 {
						time.Sleep(10 * time.Microsecond)
					}
				}
			}(w)
		}
		mv.Wait()
		wg.Wait()
		final := clk.NowMillis()
		checked := 0
		for w := range marks {
			for _, m := range marks[w] {
				if final-m.before < T.Milliseconds() {
					checked++
					if !n.Contains(m.key) {
						t.Errorf("%s marked at >= %d not contained at %d (< T later)", m.key, m.before, final)
					}
				}
			}
		}
		t.Logf("checked %d recent marks", checked)
	})
}
