package meter_test

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit96MeterMaxBytesZeroIsDefault: WithMaxBytes's doc
// (meter/meter.go:34-40) gives the default, 4 GiB, and collect refuses
// a negative MaxBytes; 0 is the default (the error text says "0 means
// ..."; the option's doc does not): a size the default admits is
// admitted under WithMaxBytes(0), one above it refused naming Size, for
// all three constructors.
func TestAudit96MeterMaxBytesZeroIsDefault(t *testing.T) {
	ctors := map[string]func(...meter.Option) error{
		"Rate":     func(o ...meter.Option) error { _, err := meter.NewRate(time.Second, o...); return err },
		"Novelty":  func(o ...meter.Option) error { _, err := meter.NewNovelty(time.Second, o...); return err },
		"Inflight": func(o ...meter.Option) error { _, err := meter.NewInflight(0, o...); return err },
	}
	for name, f := range ctors {
		if err := f(meter.WithMaxBytes(0), meter.WithSize(2, 64)); err != nil {
			t.Errorf("%s: WithMaxBytes(0): %v", name, err)
		}
		err := f(meter.WithMaxBytes(0), meter.WithSize(8, 1<<27)) // 8 GiB of cells a sketch
		var ce *sketch.ConfigError
		if !errors.As(err, &ce) || ce.Field != "Size" || !strings.HasPrefix(err.Error(), "meter: ") {
			t.Errorf("%s: WithMaxBytes(0) with 8 GiB of cells: %v, want a *sketch.ConfigError naming Size", name, err)
		}
	}
}

// TestAudit96MeterInflightIgnoresRotationOptions: NewInflight's doc
// (meter/inflight.go:73-76): "Rotation options do not apply", and
// WithPrefetch's: "Inflight has one sketch and ignores it". A
// PeriodWindows that NewRate and NewNovelty refuse (NaN, -1, 0.5) builds
// an Inflight that counts as any other.
func TestAudit96MeterInflightIgnoresRotationOptions(t *testing.T) {
	for _, opt := range []meter.Option{meter.WithPeriodWindows(math.NaN()), meter.WithPeriodWindows(-1), meter.WithPeriodWindows(0.5), meter.WithPrefetch(false)} {
		in, err := meter.NewInflight(3, opt, meter.WithSize(2, 64), meter.WithSeed(96))
		if err != nil {
			t.Fatalf("NewInflight with a rotation option: %v", err)
		}
		var gs []*meter.Guard
		for g := in.TryAcquire("k", 3); g != nil; g = in.TryAcquire("k", 3) {
			gs = append(gs, g)
		}
		if len(gs) != 3 || in.Count("k") != 3 {
			t.Errorf("admitted %d, Count %d; want 3 and 3", len(gs), in.Count("k"))
		}
		for _, g := range gs {
			g.Release()
		}
		if in.Count("k") != 0 {
			t.Errorf("after the releases: Count %d", in.Count("k"))
		}
	}
}

// TestAudit96MeterSnapshotPeriodIsWholeMs: a meter's snapshot header
// holds the Period in whole ms (meter/persist.go's format) and ReadFrom
// compares that, not PeriodWindows: a 1 ms Rate built with
// PeriodWindows 15.5 (Period 15.5 ms, rounded up to 16) restores into
// one built with the default 16, the same rotator, counts intact, while
// 17 windows is another configuration, refused naming Period and leaving
// the meter as it was (meter/doc.go, "Saving and restoring").
func TestAudit96MeterSnapshotPeriodIsWholeMs(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	mk := func(seed uint64, opts ...meter.Option) *meter.Rate {
		r, err := meter.NewRate(time.Millisecond, append([]meter.Option{meter.WithClock(clk), meter.WithSeed(seed), meter.WithSize(2, 64)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	src := mk(1, meter.WithPeriodWindows(15.5))
	src.ObserveAt(clk.Now(), "k", 7)
	var buf bytes.Buffer
	if _, err := src.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	snap := buf.Bytes()
	same := mk(2)
	if _, err := same.ReadFrom(bytes.NewReader(snap)); err != nil {
		t.Fatalf("PeriodWindows 15.5 into 16 (both a 16 ms Period): %v", err)
	}
	if got := same.PerSecond("k"); got != src.PerSecond("k") {
		t.Errorf("restored %v, original %v", got, src.PerSecond("k"))
	}
	other := mk(3, meter.WithPeriodWindows(17))
	other.ObserveAt(clk.Now(), "mine", 5)
	_, err := other.ReadFrom(bytes.NewReader(snap))
	if !errors.Is(err, sketch.ErrSnapshotMismatch) || !strings.Contains(err.Error(), "Period") {
		t.Errorf("PeriodWindows 15.5 into 17: %v, want ErrSnapshotMismatch naming Period", err)
	}
	if other.PerSecond("mine") != 5000 || other.PerSecond("k") != 0 {
		t.Errorf("refused restore changed the meter: mine %v, k %v", other.PerSecond("mine"), other.PerSecond("k"))
	}
}
