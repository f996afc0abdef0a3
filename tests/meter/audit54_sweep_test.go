package meter_test

// Audit 54: a sweep of the meter promises a black-box acceptance test
// would check (package doc and type docs; API.md "limit, meter,
// limit/httplimit"), through the public API only.

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit54InflightExact: "N goroutines racing TryAcquire(k, 100)
// without releasing get exactly 100 guards", and through collisions (every
// key in one cell per level) the total over all keys is exactly max; after
// every guard is released (twice: idempotent) the count is 0 and the full
// max is available again.
func TestAudit54InflightExact(t *testing.T) {
	const max, g = 100, 16
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		for _, cells := range []uint32{4096, 1} {
			in, err := meter.NewInflight(0, meter.WithSize(4, cells), meter.WithSeed(5))
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var guards []*meter.Guard
			var wg sync.WaitGroup
			for i := range g {
				wg.Add(1)
				go func() {
					defer wg.Done()
					key := "k"
					if cells == 1 {
						key = fmt.Sprint("key-", i)
					}
					for range 2 * max / g {
						if gd := in.TryAcquire(key, max); gd != nil {
							mu.Lock()
							guards = append(guards, gd)
							mu.Unlock()
						}
					}
				}()
			}
			wg.Wait()
			if len(guards) != max {
				t.Fatalf("M=%d: %d guards, want exactly %d", cells, len(guards), max)
			}
			for _, gd := range guards {
				gd.Release()
				gd.Release()
			}
			var nilGuard *meter.Guard
			nilGuard.Release()
			if c := in.Count("k"); c != 0 {
				t.Errorf("M=%d: Count after every release = %d, want 0", cells, c)
			}
			n := 0
			for in.TryAcquire("k", max) != nil {
				n++
			}
			if n != max {
				t.Errorf("M=%d: %d acquired after the releases, want %d", cells, n, max)
			}
		}
	})
}

// TestAudit54NoveltyExactlyOneNew: "of N goroutines racing Seen on a key
// not seen within T, exactly one is told it is new"; "no false negatives
// within T": seen 1 ms before T after the mark, and forgotten well after.
func TestAudit54NoveltyExactlyOneNew(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		fc := sketchtest.NewFakeClock()
		fc.Set(1_700_000_000_000)
		nv, err := meter.NewNovelty(time.Minute, meter.WithClock(fc), meter.WithSize(4, 1024))
		if err != nil {
			t.Fatal(err)
		}
		for round := range 20 {
			key := fmt.Sprint("event-", round)
			var fresh atomic.Int64
			var wg sync.WaitGroup
			for range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if !nv.Seen(key) {
						fresh.Add(1)
					}
				}()
			}
			wg.Wait()
			if f := fresh.Load(); f != 1 {
				t.Fatalf("round %d: %d racers told the key is new, want exactly 1", round, f)
			}
		}
		nv.Seen("mark")
		fc.Advance(time.Minute - time.Millisecond)
		if !nv.Contains("mark") {
			t.Error("a key marked T-1ms ago is not contained: a false negative within T")
		}
		fc.Advance(time.Minute)
		if nv.Contains("mark") {
			t.Error("a key marked ~2T ago is still contained")
		}
	})
}

// TestAudit54MeterErrorsAndPanics: constructor errors are
// *sketch.ConfigError matching ErrInvalidConfig, prefixed "meter: "; the
// zero values and bad arguments panic with messages that start "meter:".
func TestAudit54MeterErrorsAndPanics(t *testing.T) {
	for name, f := range map[string]func() error{
		"NewRate(0)":           func() error { _, err := meter.NewRate(0); return err },
		"NewRate(nil option)":  func() error { _, err := meter.NewRate(time.Second, nil); return err },
		"NewNovelty(0)":        func() error { _, err := meter.NewNovelty(0); return err },
		"NewInflight(-1)":      func() error { _, err := meter.NewInflight(-1); return err },
		"NewInflight(2^24+1)":  func() error { _, err := meter.NewInflight(1<<24 + 1); return err },
		"NewRate(PeriodWin 0)": func() error { _, err := meter.NewRate(time.Second, meter.WithPeriodWindows(0.5)); return err },
	} {
		err := f()
		var ce *sketch.ConfigError
		if !errors.Is(err, sketch.ErrInvalidConfig) || !errors.As(err, &ce) || !strings.HasPrefix(err.Error(), "meter: ") {
			t.Errorf("%s: %v, want a *sketch.ConfigError prefixed \"meter: \"", name, err)
		}
	}
	in, err := meter.NewInflight(10)
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]func(){
		"zero Rate.Observe":      func() { new(meter.Rate).Observe("k") },
		"zero Novelty.Seen":      func() { new(meter.Novelty).Seen("k") },
		"zero Inflight.Acquire":  func() { new(meter.Inflight).Acquire("k") },
		"TryAcquire(max 0)":      func() { in.TryAcquire("k", 0) },
		"TryAcquire(max > lim)":  func() { in.TryAcquire("k", 11) },
		"zero Rate.PerSecond":    func() { new(meter.Rate).PerSecond("k") },
		"zero Inflight.Count":    func() { new(meter.Inflight).Count("k") },
		"zero Novelty.Contains":  func() { new(meter.Novelty).Contains("k") },
		"zero Inflight.TryAcq.":  func() { new(meter.Inflight).TryAcquire("k", 1) },
		"zero Novelty.SeenAt":    func() { new(meter.Novelty).SeenAt(time.Now(), "k") },
		"zero Rate.PerSecondAt ": func() { new(meter.Rate).PerSecondAt(time.Now(), "k") },
	} {
		if msg := sketchtest.Panics(f); !strings.HasPrefix(msg, "meter:") {
			t.Errorf("%s: panic %q, want one starting \"meter:\"", name, msg)
		}
	}
}

// TestAudit54RateOneSided: "The sketch only errs upward: collisions ...
// can raise an estimate, never lower it": in a tiny sketch crowded with
// other keys, every key's PerSecond is at least its own closed form
// n/window x exp(-dt/window).
func TestAudit54RateOneSided(t *testing.T) {
	fc := sketchtest.NewFakeClock()
	fc.Set(1_700_000_000_000)
	r, err := meter.NewRate(10*time.Second, meter.WithClock(fc), meter.WithSize(3, 7))
	if err != nil {
		t.Fatal(err)
	}
	const keys = 50
	for k := range keys {
		r.ObserveAt(fc.Now(), fmt.Sprint("k", k), float64(k+1))
	}
	fc.Advance(3 * time.Second)
	for k := range keys {
		want := float64(k+1) / 10 * 0.7408182206817179 // exp(-0.3)
		if got := r.PerSecond(fmt.Sprint("k", k)); got < want*(1-1e-12) {
			t.Errorf("key %d: PerSecond %v < its own %v", k, got, want)
		}
	}
}
