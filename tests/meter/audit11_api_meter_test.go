package meter_test

// Contract conformance (audit11): package meter as issues 15, 24, 25 and
// 28 state it: Rate, Inflight (Acquire, a guard whose Release is
// idempotent, TryAcquire(key, max) exact under contention), Novelty,
// typed constructor errors, WriteTo/ReadFrom on Rate and Novelty.

import (
	"bytes"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
	"github.com/lfgrudge/grudge/sketch/snapshot"
)

var (
	_ func(time.Duration, ...meter.Option) (*meter.Rate, error)    = meter.NewRate
	_ func(time.Duration, ...meter.Option) (*meter.Novelty, error) = meter.NewNovelty
	_ func(int, ...meter.Option) (*meter.Inflight, error)          = meter.NewInflight

	_ snapshot.Source      = (*meter.Rate)(nil)
	_ snapshot.Destination = (*meter.Rate)(nil)
	_ snapshot.Source      = (*meter.Novelty)(nil)
	_ snapshot.Destination = (*meter.Novelty)(nil)
)

func TestAudit11APIMeterInflight(t *testing.T) {
	in, err := meter.NewInflight(100)
	if err != nil {
		t.Fatal(err)
	}
	var _ func(string) *meter.Guard = in.Acquire
	var _ func(string, int) *meter.Guard = in.TryAcquire
	g := in.Acquire("k")
	if c := in.Count("k"); c != 1 {
		t.Fatalf("Count after Acquire = %d", c)
	}
	g.Release()
	g.Release() // idempotent
	if c := in.Count("k"); c != 0 {
		t.Fatalf("Count after two Releases of one guard = %d, want 0", c)
	}
	// TryAcquire(key, max) exact under contention.
	const max, workers = 10, 32
	var got atomic.Int64
	var held sync.WaitGroup
	release := make(chan struct{})
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if g := in.TryAcquire("hot", max); g != nil {
				got.Add(1)
				held.Add(1)
				go func() { <-release; g.Release(); held.Done() }()
			}
		}()
	}
	wg.Wait()
	if n := got.Load(); n != max {
		t.Errorf("TryAcquire(hot, %d) by %d goroutines: %d acquired, want exactly %d", max, workers, n, max)
	}
	close(release)
	held.Wait()
	if c := in.Count("hot"); c != 0 {
		t.Errorf("Count after every release = %d", c)
	}
}

func TestAudit11APIMeterRateNovelty(t *testing.T) {
	fc := sketchtest.NewFakeClock()
	r, err := meter.NewRate(time.Second, meter.WithClock(fc), meter.WithSize(4, 4096))
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		r.Observe("k")
	}
	if ps := r.PerSecond("k"); ps <= 0 {
		t.Errorf("PerSecond after 10 events = %v", ps)
	}
	if ps := r.PerSecond("other"); ps != 0 {
		t.Errorf("PerSecond of an unseen key = %v", ps)
	}
	n, err := meter.NewNovelty(time.Second, meter.WithClock(fc), meter.WithSize(4, 4096))
	if err != nil {
		t.Fatal(err)
	}
	if n.Seen("x") {
		t.Error("Seen(x) the first time = true")
	}
	if !n.Seen("x") {
		t.Error("Seen(x) again at once = false")
	}
	fc.Advance(10 * time.Second)
	if n.Seen("x") {
		t.Error("Seen(x) 10 T later = true")
	}
	var buf bytes.Buffer
	if _, err := r.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	r2, err := meter.NewRate(time.Second, meter.WithClock(fc), meter.WithSize(4, 4096))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r2.ReadFrom(&buf); err != nil {
		t.Fatal(err)
	}
}

// Issue 24: meter.New* return typed errors; nil options are refused.
func TestAudit11APIMeterErrors(t *testing.T) {
	for name, err := range map[string]error{
		"NewRate(0)":       func() error { _, err := meter.NewRate(0); return err }(),
		"NewRate(nil opt)": func() error { _, err := meter.NewRate(time.Second, nil); return err }(),
		"NewNovelty(0)":    func() error { _, err := meter.NewNovelty(0); return err }(),
		"NewInflight(-1)":  func() error { _, err := meter.NewInflight(-1); return err }(),
		"NewInflight(nil)": func() error { _, err := meter.NewInflight(5, nil); return err }(),
	} {
		var ce *sketch.ConfigError
		if !errors.Is(err, sketch.ErrInvalidConfig) || !errors.As(err, &ce) {
			t.Errorf("%s: %v, want a *sketch.ConfigError", name, err)
		}
	}
}
