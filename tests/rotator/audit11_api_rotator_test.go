package rotator_test

// Contract conformance (audit11): package rotator as shared/API.md states
// it: Config{Sketch, Generations, Period}, New, the Sketch's methods plus
// Close, lazy rotation, no goroutine, Close an idempotent no-op.

import (
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

var (
	_ func(rotator.Config) (*rotator.Rotator, error) = rotator.New
	_ sketch.Scorer                                  = (*rotator.Rotator)(nil)
)

func TestAudit11APIRotatorSurface(t *testing.T) {
	fc := sketchtest.NewFakeClock()
	var (
		sk  sketch.Config = sketch.Config{Levels: 3, CellsPerLevel: 256, Hi: 100, Decay: decay.None(), Clock: fc}
		gen uint32        = 2
		per time.Duration = time.Second
	)
	r, err := rotator.New(rotator.Config{Sketch: sk, Generations: gen, Period: per})
	if err != nil {
		t.Fatal(err)
	}
	// "same methods as Sketch, plus Close()".
	var (
		_ func([]byte, float64)                          = r.Update
		_ func([]byte) float64                           = r.Query
		_ func([]byte, float64) float64                  = r.UpdateAndQuery
		_ func([]byte, float64, float64) bool            = r.TryUpdate
		_ func([]byte) sketch.Detail                     = r.QueryDetailed
		_ func(string, float64)                          = r.UpdateString
		_ func(string) float64                           = r.QueryString
		_ func(string, float64) float64                  = r.UpdateAndQueryString
		_ func(string, float64, float64) bool            = r.TryUpdateString
		_ func(time.Time, string, float64)               = r.UpdateAt
		_ func(time.Time, string) float64                = r.QueryAt
		_ func(time.Time, string, float64) float64       = r.UpdateAndQueryAt
		_ func(time.Time, string, float64, float64) bool = r.TryUpdateAt
		_ func()                                         = r.Close
	)
	if !r.TryUpdate([]byte("k"), 4, 5) || r.TryUpdate([]byte("k"), 5, 4) {
		t.Fatal("TryUpdate(key, delta, limit): order not as stated")
	}
	if q := r.Query([]byte("k")); q != 4 {
		t.Fatalf("Query = %v, want 4", q)
	}
	r.Close()
	r.Close() // idempotent
	// "Close is an idempotent no-op kept for drop-in compatibility": the
	// rotator still works after it.
	r.Update([]byte("k"), 1)
	if q := r.Query([]byte("k")); q != 5 {
		t.Errorf("Query after Close = %v, want 5 (Close is a no-op)", q)
	}
}

// TestAudit11APIRotatorConfig: "Generations 0 means 2; at least 2",
// "Period > 0"; errors are *sketch.ConfigError naming the field.
func TestAudit11APIRotatorConfig(t *testing.T) {
	sk := sketch.Config{CellsPerLevel: 64, Hi: 10}
	r, err := rotator.New(rotator.Config{Sketch: sk, Period: time.Second})
	if err != nil {
		t.Fatalf("Generations 0: %v", err)
	}
	if g := r.Config().Generations; g != 2 {
		t.Errorf("Generations 0 became %d, want 2", g)
	}
	for _, tc := range []struct {
		cfg   rotator.Config
		field string
	}{
		{rotator.Config{Sketch: sk, Generations: 1, Period: time.Second}, "Generations"},
		{rotator.Config{Sketch: sk, Generations: 2}, "Period"},
		{rotator.Config{Sketch: sk, Generations: 2, Period: -time.Second}, "Period"},
		{rotator.Config{Sketch: sketch.Config{Lo: 1, Hi: 10}, Period: time.Second}, "Lo"},
	} {
		_, err := rotator.New(tc.cfg)
		var ce *sketch.ConfigError
		if !errors.Is(err, sketch.ErrInvalidConfig) || !errors.As(err, &ce) {
			t.Errorf("%+v: err %v, want a *sketch.ConfigError", tc.cfg, err)
			continue
		}
		if ce.Field != tc.field && ce.Field != "Sketch."+tc.field {
			t.Errorf("%+v: Field %q, want %s", tc.cfg, ce.Field, tc.field)
		}
	}
}

// TestAudit11APIRotatorLazy: "Reads from the oldest generation, writes to
// all; rotation happens lazily on access (no ticker, no goroutine)": a
// score outlives one rotation (the younger generation holds it) and is
// gone after Generations x Period without writes; New starts no goroutine.
func TestAudit11APIRotatorLazy(t *testing.T) {
	fc := sketchtest.NewFakeClock()
	before := runtime.NumGoroutine()
	r, err := rotator.New(rotator.Config{
		Sketch:      sketch.Config{Levels: 3, CellsPerLevel: 256, Hi: 100, Clock: fc},
		Generations: 2,
		Period:      time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if after := runtime.NumGoroutine(); after > before {
		t.Errorf("rotator.New started %d goroutines", after-before)
	}
	r.Update([]byte("k"), 7)
	fc.Advance(1100 * time.Millisecond) // one rotation, taken on the next access
	if q := r.Query([]byte("k")); q != 7 {
		t.Errorf("after one period: %v, want 7 (written to every generation)", q)
	}
	if n := r.Stats().Promotions; n < 1 {
		t.Errorf("Promotions %d after one period and an access, want >= 1", n)
	}
	fc.Advance(2200 * time.Millisecond) // Generations x Period more, no write
	if q := r.Query([]byte("k")); q != 0 {
		t.Errorf("after Generations x Period idle: %v, want 0", q)
	}
	if after := runtime.NumGoroutine(); after > before {
		t.Errorf("rotation started %d goroutines", after-before)
	}
}
