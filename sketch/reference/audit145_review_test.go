package reference_test

// Audit 145: audit 140's typed-nil refusals (core.IsNil on the Hasher a
// factory returns) went into every constructor but the reference's.

import (
	"errors"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testpanic"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/reference"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a145Hasher is a pointer Hasher whose methods read their receiver.
type a145Hasher struct{ seed uint64 }

func (h *a145Hasher) Sum64(b []byte) uint64       { return h.seed ^ uint64(len(b)) }
func (h *a145Hasher) Sum64String(s string) uint64 { return h.seed ^ uint64(len(s)) }

// TestAudit145FixedReferenceAcceptsNilHasher (audit 145; fixed at stop 65, the text below
// says what was wrong): reference.New "returns
// the mutex reference sketch for cfg, or the *sketch.ConfigError
// sketch.New would return" (sketch/reference/reference.go:20-21), and
// NewRotator "the *sketch.ConfigError rotator.New would return (and then
// starts nothing)"; sketch/hash.go: a HasherFactory "must return a
// non-nil Hasher for every seed" and a nil one is a *ConfigError naming
// Hasher. Observed: for a factory returning nil, or a typed nil
// ((*T)(nil)), sketch.New returns "sketch: the HasherFactory returned a
// nil Hasher (for seed 0)", while reference.New and reference.NewRotator
// return a nil error, and the first UpdateString panics with "runtime
// error: invalid memory address or nil pointer dereference" (NewRotator
// has started its ticker goroutine too). Fix: internal/ref/sketch.go:74,
// after `hasher: n.Hasher(n.Seed)`, `if core.IsNil(s.hasher) { return
// nil, core.NilHasherErr("sketch", n.Seed) }` (as internal/core/sketch.go:88
// does); NewRotator builds its generations through ref.New.
func TestAudit145FixedReferenceAcceptsNilHasher(t *testing.T) {
	for _, c := range []struct {
		name string
		f    sketch.HasherFactory
	}{
		{"nil", func(uint64) sketch.Hasher { return nil }},
		{"typed nil", func(uint64) sketch.Hasher { return (*a145Hasher)(nil) }},
	} {
		cfg := sketch.Config{Hi: 1, CellsPerLevel: 16, Hasher: c.f}
		_, serr := sketch.New(cfg)
		var ce *sketch.ConfigError
		if !errors.As(serr, &ce) || ce.Field != "Hasher" {
			t.Fatalf("%s: sketch.New = %v; the premise (a *ConfigError naming Hasher) fails", c.name, serr)
		}
		r, err := reference.New(cfg)
		if err == nil {
			msg := testpanic.Message(func() { r.UpdateString("k", 1) })
			t.Errorf("%s Hasher: reference.New = nil error (first UpdateString panics %q); sketch.New returns %q", c.name, msg, serr)
		} else if !errors.As(err, &ce) || ce.Field != "Hasher" {
			t.Errorf("%s Hasher: reference.New = %v; want sketch.New's %v", c.name, err, serr)
		}
		rot, err := reference.NewRotator(reference.RotatorConfig{Sketch: cfg, Generations: 2, Period: time.Hour})
		if err == nil {
			rot.Close()
			t.Errorf("%s Hasher: reference.NewRotator = nil error; want the *ConfigError naming Hasher", c.name)
		}
	}
}

// TestAudit145ReferenceRefusesTypedNilClock: the typed-nil Clock goes
// through conv.Normalize, so the reference refuses it as sketch.New does.
func TestAudit145ReferenceRefusesTypedNilClock(t *testing.T) {
	cfg := sketch.Config{Hi: 1, CellsPerLevel: 16, Clock: (*sketchtest.FakeClock)(nil)}
	var err error
	msg := testpanic.Message(func() { _, err = reference.New(cfg) })
	var ce *sketch.ConfigError
	if msg != "" || !errors.As(err, &ce) || ce.Field != "Clock" {
		t.Errorf("reference.New(typed-nil Clock): panic %q, err %v; want a *ConfigError naming Clock", msg, err)
	}
	msg = testpanic.Message(func() {
		_, err = reference.NewRotator(reference.RotatorConfig{Sketch: cfg, Generations: 2, Period: time.Hour})
	})
	if msg != "" || !errors.As(err, &ce) || ce.Field != "Clock" {
		t.Errorf("reference.NewRotator(typed-nil Clock): panic %q, err %v; want a *ConfigError naming Clock", msg, err)
	}
}
