package rotator_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testpanic"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
)

// TestAudit125FixedZeroRotatorRawNilPanic (audit 125; fixed at stop 63, the text below says what was wrong): "Create one with New; the zero
// Rotator is not usable" (rotator/rotator.go:19). Its Close and Stats work
// (no-op, zero Stats), but every Scorer method crashes with "runtime error:
// invalid memory address or nil pointer dereference", where limit's and
// meter's zero values panic with "<pkg>: zero X; use New" (the team rule:
// "a clear panic"). Expected: a panic starting "rotator: zero Rotator".
// Observed: a runtime nil dereference. Fix: a nil check of the engine in
// rotator/rotator.go's methods (or in internal/core's Rotator entry points).
func TestAudit125FixedZeroRotatorRawNilPanic(t *testing.T) {
	var r rotator.Rotator
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"Update", func() { r.Update([]byte("k"), 1) }},
		{"QueryString", func() { r.QueryString("k") }},
		{"TryUpdateString", func() { r.TryUpdateString("k", 1, 2) }},
	} {
		if got := testpanic.Message(c.f); !strings.HasPrefix(got, "rotator: zero Rotator") {
			t.Errorf("zero Rotator.%s: panic %q, want one starting %q", c.name, got, "rotator: zero Rotator")
		}
	}
}

// TestAudit125ConfigErrors: rotator.New refuses bad Period and Generations
// with a *sketch.ConfigError matching ErrInvalidConfig, prefixed "rotator: ";
// Close is idempotent and operations still work after it.
func TestAudit125ConfigErrors(t *testing.T) {
	sc := sketch.Config{Hi: 10, CellsPerLevel: 16}
	for _, c := range []struct {
		name string
		cfg  rotator.Config
	}{
		{"Period 0", rotator.Config{Sketch: sc}},
		{"Period -1", rotator.Config{Sketch: sc, Period: -1}},
		{"Period MinInt64", rotator.Config{Sketch: sc, Period: math.MinInt64}},
		{"Period 1ns", rotator.Config{Sketch: sc, Period: 1}},
		{"Generations 1", rotator.Config{Sketch: sc, Period: time.Second, Generations: 1}},
		{"Generations huge", rotator.Config{Sketch: sc, Period: time.Second, Generations: math.MaxUint32}},
		{"bad sketch", rotator.Config{Sketch: sketch.Config{Hi: math.NaN()}, Period: time.Second}},
	} {
		r, err := rotator.New(c.cfg)
		var ce *sketch.ConfigError
		if r != nil || !errors.As(err, &ce) || !errors.Is(err, sketch.ErrInvalidConfig) {
			t.Errorf("%s: New = %v, %v; want nil and a *sketch.ConfigError", c.name, r, err)
		}
	}
	r, err := rotator.New(rotator.Config{Sketch: sc, Period: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	r.Close()
	r.UpdateString("k", 1)
	if got := r.QueryString("k"); got < 1 {
		t.Errorf("after Close: Query = %v, want >= 1", got)
	}
	if got := testpanic.Message(func() { r.UpdateString("k", math.NaN()) }); !strings.HasPrefix(got, "sketch:") {
		t.Errorf("Update(NaN): panic %q, want one starting \"sketch:\"", got)
	}
}
