package meter_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit79NoveltyNoFalseNegativeAcrossRotation: a key marked at ms m
// is seen at every whole ms m+d with d < T, whatever rotations fall in
// between, for PeriodWindows 1 (the minimum: Period = T) and 1.5, and for
// several T. meter/novelty.go: "no false negatives within T", "rotation
// adds no false negative".
func TestAudit79NoveltyNoFalseNegativeAcrossRotation(t *testing.T) {
	for _, T := range []time.Duration{time.Millisecond, 2 * time.Millisecond, 7 * time.Millisecond, 50 * time.Millisecond} {
		for _, k := range []float64{1, 1.5, 16} {
			t.Run(fmt.Sprintf("T=%v/k=%v", T, k), func(t *testing.T) {
				clk := sketchtest.NewFakeClock()
				clk.Set(12345)
				n, err := meter.NewNovelty(T, meter.WithClock(clk), meter.WithSeed(5), meter.WithSize(4, 4096), meter.WithPeriodWindows(k))
				if err != nil {
					t.Fatal(err)
				}
				tm := T.Milliseconds()
				// mark key i at ms start+i; check every key at every ms
				const span = 400
				start := clk.NowMillis()
				for ms := start; ms < start+span+tm; ms++ {
					clk.Set(ms)
					if i := ms - start; i < span {
						if n.Seen(fmt.Sprint("k", i)) {
							// a false positive is allowed, but unlikely here
							t.Logf("ms %d: new key k%d reported seen", ms, i)
						}
					}
					for j := max(0, ms-start-tm+1); j <= ms-start && j < span; j++ {
						key := fmt.Sprint("k", j)
						if !n.Contains(key) || !n.ContainsAt(clk.Now(), key) {
							t.Fatalf("T=%v k=%v: key marked at %d not contained at %d (age %d ms < T)", T, k, start+j, ms, ms-start-j)
						}
					}
				}
			})
		}
	}
}

// TestAudit79NoveltyRacingSeenAcrossRotation: goroutines race Seen on
// fresh keys while another goroutine moves the fake clock across rotation
// deadlines (PeriodWindows 1); for every key exactly one caller is told
// new (novelty.go: "exactly one of racing callers is told a key is new"),
// at GOMAXPROCS 1..8 under -race.
func TestAudit79NoveltyRacingSeenAcrossRotation(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		clk := sketchtest.NewFakeClock()
		T := 20 * time.Millisecond
		n, err := meter.NewNovelty(T, meter.WithClock(clk), meter.WithSeed(9), meter.WithSize(4, 1<<14), meter.WithPeriodWindows(1))
		if err != nil {
			t.Fatal(err)
		}
		const keys, racers = 200, 6
		for k := 0; k < keys; k++ {
			key := fmt.Sprint("r", k)
			var fresh atomic.Int32
			var wg sync.WaitGroup
			startGate := make(chan struct{})
			for g := 0; g < racers; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-startGate
					if !n.Seen(key) {
						fresh.Add(1)
					}
				}()
			}
			wg.Add(1)
			go func() { defer wg.Done(); <-startGate; clk.Advance(3 * time.Millisecond) }()
			close(startGate)
			wg.Wait()
			if f := fresh.Load(); f != 1 {
				t.Fatalf("key %s at %d ms: %d racers told new, want exactly 1", key, clk.NowMillis(), f)
			}
			// and it stays seen within T after the race
			if !n.Contains(key) {
				t.Fatalf("key %s not contained right after the race", key)
			}
		}
	})
}

// TestAudit79NoveltyLongIdle: after an idle of a day a key is new again,
// exactly once, and the latch then works as before.
func TestAudit79NoveltyLongIdle(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	n, err := meter.NewNovelty(time.Second, meter.WithClock(clk), meter.WithSeed(2), meter.WithSize(4, 1024))
	if err != nil {
		t.Fatal(err)
	}
	if n.Seen("a") {
		t.Fatal("fresh key seen")
	}
	for _, idle := range []time.Duration{time.Hour, 24 * time.Hour, 400 * 24 * time.Hour} {
		clk.Advance(idle)
		if n.Contains("a") {
			t.Fatalf("after %v: still contained", idle)
		}
		if n.Seen("a") {
			t.Fatalf("after %v: Seen said seen", idle)
		}
		clk.Advance(999 * time.Millisecond)
		if !n.Seen("a") {
			t.Fatalf("after %v + 999ms: forgotten", idle)
		}
	}
}
