package meter_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testpanic"
	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit125ZeroValuesClearPanic: every method of the zero Rate, Inflight
// and Novelty panics "meter: zero X; use NewX" (meter/doc.go); the zero and
// nil Guard's Release does nothing.
func TestAudit125ZeroValuesClearPanic(t *testing.T) {
	var r meter.Rate
	var in meter.Inflight
	var n meter.Novelty
	for _, c := range []struct {
		name, want string
		f          func()
	}{
		{"Rate.Observe", "meter: zero Rate", func() { r.Observe("k") }},
		{"Rate.PerSecond", "meter: zero Rate", func() { r.PerSecond("k") }},
		{"Rate.Window", "meter: zero Rate", func() { r.Window() }},
		{"Rate.SnapshotSize", "meter: zero Rate", func() { r.SnapshotSize() }},
		{"Inflight.Acquire", "meter: zero Inflight", func() { in.Acquire("k") }},
		{"Inflight.Count", "meter: zero Inflight", func() { in.Count("k") }},
		{"Novelty.Seen", "meter: zero Novelty", func() { n.Seen("k") }},
		{"Novelty.Within", "meter: zero Novelty", func() { n.Within() }},
	} {
		if got := testpanic.Message(c.f); !strings.HasPrefix(got, c.want) {
			t.Errorf("%s: panic %q, want one starting %q", c.name, got, c.want)
		}
	}
	var g meter.Guard
	var gp *meter.Guard
	if got := testpanic.Message(func() { g.Release(); gp.Release() }); got != "" {
		t.Errorf("zero/nil Guard.Release panicked: %q", got)
	}
}

// TestAudit125BadArgumentsTypedAndNoStateChange: constructor misuse is a
// *sketch.ConfigError prefixed "meter: "; a bad ObserveAt n or TryAcquire
// max panics "meter:" and leaves the key's reading unchanged; -0 and
// subnormal n are accepted (rounded up, never NaN).
func TestAudit125BadArgumentsTypedAndNoStateChange(t *testing.T) {
	small := meter.WithSize(2, 16)
	for _, c := range []struct {
		name string
		f    func() error
	}{
		{"Rate window 0", func() error { _, err := meter.NewRate(0, small); return err }},
		{"Rate window MinInt64", func() error { _, err := meter.NewRate(math.MinInt64, small); return err }},
		{"Rate window MaxInt64", func() error { _, err := meter.NewRate(math.MaxInt64, small); return err }},
		{"Novelty within 1ns", func() error { _, err := meter.NewNovelty(1, small); return err }},
		{"Novelty within -1", func() error { _, err := meter.NewNovelty(-1, small); return err }},
		{"Inflight -1", func() error { _, err := meter.NewInflight(-1, small); return err }},
		{"Inflight 2^24+1", func() error { _, err := meter.NewInflight(1<<24+1, small); return err }},
		{"Inflight MinInt64", func() error { _, err := meter.NewInflight(math.MinInt64, small); return err }},
		{"nil option", func() error { _, err := meter.NewRate(time.Second, nil); return err }},
		{"PeriodWindows NaN", func() error {
			_, err := meter.NewRate(time.Second, small, meter.WithPeriodWindows(math.NaN()))
			return err
		}},
		{"PeriodWindows 0.5", func() error { _, err := meter.NewNovelty(time.Second, small, meter.WithPeriodWindows(0.5)); return err }},
		{"PeriodWindows +Inf", func() error {
			_, err := meter.NewRate(time.Second, small, meter.WithPeriodWindows(math.Inf(1)))
			return err
		}},
		{"MaxBytes -1", func() error { _, err := meter.NewRate(time.Second, meter.WithMaxBytes(-1)); return err }},
		{"Size 9 levels", func() error { _, err := meter.NewRate(time.Second, meter.WithSize(9, 16)); return err }},
	} {
		err := c.f()
		var ce *sketch.ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, sketch.ErrInvalidConfig) || !strings.HasPrefix(fmt.Sprint(err), "meter: ") {
			t.Errorf("%s: err %v, want a *sketch.ConfigError prefixed \"meter: \"", c.name, err)
		}
	}

	clk := sketchtest.NewFakeClock()
	r, err := meter.NewRate(time.Second, small, meter.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	r.ObserveAt(clk.Now(), "k", 3)
	want := r.PerSecond("k")
	for _, n := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), -1, -5e-324, 1e308, math.MaxFloat32 * 2} {
		if got := testpanic.Message(func() { r.ObserveAt(clk.Now(), "k", n) }); !strings.HasPrefix(got, "meter:") {
			t.Errorf("ObserveAt(n=%v): panic %q, want one starting \"meter:\"", n, got)
		}
		if got := r.PerSecond("k"); got != want {
			t.Errorf("after ObserveAt(n=%v): PerSecond %v, want %v", n, got, want)
		}
	}
	for _, n := range []float64{math.Copysign(0, -1), 0, 5e-324} {
		r.ObserveAt(clk.Now(), "k", n)
		if got := r.PerSecond("k"); math.IsNaN(got) || got < want {
			t.Errorf("ObserveAt(n=%v): PerSecond %v, want >= %v", n, got, want)
		}
	}

	in, err := meter.NewInflight(10, small)
	if err != nil {
		t.Fatal(err)
	}
	g := in.Acquire("i")
	for _, m := range []int{0, -1, 11, math.MaxInt64, math.MinInt64} {
		if got := testpanic.Message(func() { in.TryAcquire("i", m) }); !strings.HasPrefix(got, "meter:") {
			t.Errorf("TryAcquire(max=%d): panic %q, want one starting \"meter:\"", m, got)
		}
	}
	if got := in.Count("i"); got != 1 {
		t.Errorf("after refused TryAcquires: Count %d, want 1", got)
	}
	g.Release()
	g.Release()
	if got := in.Count("i"); got != 0 {
		t.Errorf("after double Release: Count %d, want 0", got)
	}
}
