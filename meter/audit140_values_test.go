package meter_test

// Audit 140: special values for meter's parameters not swept before:
// float32-edge weights, fractional-millisecond windows, sizes at the ends.

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testpanic"
	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

func a140Field(err error) string {
	var ce *sketch.ConfigError
	if errors.As(err, &ce) && errors.Is(err, sketch.ErrInvalidConfig) && strings.HasPrefix(err.Error(), "meter: ") {
		return ce.Field
	}
	return ""
}

// TestAudit140RateWeightsAtFloat32Edges: ObserveAt takes 0 <= n <=
// MaxFloat32: the float32 denormals, 1e-300 and MaxFloat32 itself are
// counted (PerSecond never below n/window, finite, never NaN), and the
// next float64 above MaxFloat32 panics with "meter:" without touching the
// key.
func TestAudit140RateWeightsAtFloat32Edges(t *testing.T) {
	for _, w := range []time.Duration{time.Millisecond, 1500 * time.Microsecond, time.Second, time.Hour} {
		clk := sketchtest.NewFakeClock()
		r, err := meter.NewRate(w, meter.WithClock(clk), meter.WithSize(2, 64), meter.WithSeed(140))
		if err != nil {
			t.Fatal(err)
		}
		if r.Window() != w {
			t.Errorf("window %v: Window() = %v, want as given", w, r.Window())
		}
		for i, n := range []float64{5e-324, 1e-300, math.SmallestNonzeroFloat32 / 2, math.SmallestNonzeroFloat32, 0x1p-126, 1, math.MaxFloat32} {
			key := string(rune('a' + i))
			r.ObserveAt(clk.Now(), key, n)
			got := r.PerSecond(key)
			if math.IsNaN(got) || math.IsInf(got, 0) || got < n/w.Seconds() || got == 0 {
				t.Errorf("window %v: ObserveAt(n=%v): PerSecond = %v, want finite and >= %v", w, n, got, n/w.Seconds())
			}
		}
		before := r.PerSecond("z")
		above := math.Nextafter(math.MaxFloat32, math.Inf(1))
		if msg := testpanic.Message(func() { r.ObserveAt(clk.Now(), "z", above) }); !strings.HasPrefix(msg, "meter:") {
			t.Errorf("ObserveAt(n just above MaxFloat32): panic %q, want one starting \"meter:\"", msg)
		}
		if got := r.PerSecond("z"); got != before {
			t.Errorf("a refused ObserveAt changed the key: %v -> %v", before, got)
		}
		// A saturated key stays finite and at most what a cell holds.
		r.ObserveAt(clk.Now(), "g", math.MaxFloat32)
		if got := r.PerSecond("g"); math.IsInf(got, 0) || got < math.MaxFloat32/w.Seconds()*(1-1e-6) {
			t.Errorf("window %v: twice MaxFloat32: PerSecond = %v", w, got)
		}
	}
}

// TestAudit140NoveltyFractionalWindow: "T' being T rounded up to a whole
// millisecond"; "no false negatives within T", "up to T' + 1 ms for a T
// that is not whole milliseconds": Within reports T as given (1.5 ms), a
// mark at 0 is seen at 1 and 2 ms, and forgotten by 4 ms.
func TestAudit140NoveltyFractionalWindow(t *testing.T) {
	for _, c := range []struct {
		within time.Duration
		tp     int64 // T' in ms
	}{
		{1500 * time.Microsecond, 2},
		{time.Millisecond + 1, 2},
		{2900 * time.Microsecond, 3},
	} {
		clk := sketchtest.NewFakeClock()
		n, err := meter.NewNovelty(c.within, meter.WithClock(clk), meter.WithSize(4, 256), meter.WithSeed(140))
		if err != nil {
			t.Fatal(err)
		}
		if n.Within() != c.within {
			t.Errorf("Within() = %v, want %v as given", n.Within(), c.within)
		}
		if n.Seen("k") {
			t.Errorf("T %v: first Seen true", c.within)
		}
		for ms := int64(1); ms <= c.tp; ms++ {
			if !n.ContainsAt(time.UnixMilli(ms), "k") {
				t.Errorf("T %v: mark at 0 not seen at %d ms (within T' = %d ms)", c.within, ms, c.tp)
			}
		}
		clk.Set(c.tp + 2)
		if n.Contains("k") {
			t.Errorf("T %v: mark at 0 still seen at %d ms (past T' + 1 ms)", c.within, c.tp+2)
		}
	}
}

// TestAudit140SizesAndWindowsRefused: sizes and windows at the ends are a
// *sketch.ConfigError prefixed "meter: " naming the field, for all three
// constructors; the smallest size (1 x 1) works.
func TestAudit140SizesAndWindowsRefused(t *testing.T) {
	ctors := map[string]func(opts ...meter.Option) error{
		"Rate":     func(o ...meter.Option) error { _, err := meter.NewRate(time.Second, o...); return err },
		"Novelty":  func(o ...meter.Option) error { _, err := meter.NewNovelty(time.Second, o...); return err },
		"Inflight": func(o ...meter.Option) error { _, err := meter.NewInflight(0, o...); return err },
	}
	for name, ctor := range ctors {
		for _, c := range []struct {
			what  string
			opts  []meter.Option
			field string
		}{
			{"Levels 9", []meter.Option{meter.WithSize(9, 16)}, "Levels"},
			{"Levels MaxUint32", []meter.Option{meter.WithSize(math.MaxUint32, 16)}, "Levels"},
			{"Cells 2^30+1", []meter.Option{meter.WithSize(1, 1<<30+1)}, "CellsPerLevel"},
			{"MaxBytes 1", []meter.Option{meter.WithSize(1, 1), meter.WithMaxBytes(1)}, "Size"},
			{"MaxBytes -1", []meter.Option{meter.WithMaxBytes(-1)}, "MaxBytes"},
		} {
			var err error
			if msg := testpanic.Message(func() { err = ctor(c.opts...) }); msg != "" {
				t.Errorf("%s %s: panicked %q", name, c.what, msg)
				continue
			}
			if got := a140Field(err); got != c.field {
				t.Errorf("%s %s: %v (field %q); want a *sketch.ConfigError prefixed \"meter: \" naming %s", name, c.what, err, got, c.field)
			}
		}
		if err := ctor(meter.WithSize(1, 1)); err != nil {
			t.Errorf("%s WithSize(1, 1): %v", name, err)
		}
	}
	for _, w := range []time.Duration{math.MaxInt64, math.MinInt64, -time.Millisecond, 0, time.Microsecond} {
		_, err := meter.NewRate(w, meter.WithSize(1, 1))
		if a140Field(err) != "Window" {
			t.Errorf("NewRate(%v): %v; want a *sketch.ConfigError naming Window", w, err)
		}
		_, err = meter.NewNovelty(w, meter.WithSize(1, 1))
		if a140Field(err) != "Window" {
			t.Errorf("NewNovelty(%v): %v; want a *sketch.ConfigError naming Window", w, err)
		}
	}
	// A 1 x 1 Inflight: every key shares the one cell, exactly.
	in, err := meter.NewInflight(2, meter.WithSize(1, 1))
	if err != nil {
		t.Fatal(err)
	}
	g1, g2 := in.TryAcquire("a", 2), in.TryAcquire("b", 2)
	if g1 == nil || g2 == nil || in.TryAcquire("c", 2) != nil || in.Count("zzz") != 2 {
		t.Errorf("1 x 1 Inflight: two acquisitions then a refusal and Count 2 expected; got %v %v count %d", g1, g2, in.Count("zzz"))
	}
	g1.Release()
	g2.Release()
	if in.Count("a") != 0 {
		t.Errorf("1 x 1 Inflight after releases: Count %d, want 0", in.Count("a"))
	}
}
