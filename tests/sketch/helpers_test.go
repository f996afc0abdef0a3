package sketch_test

import (
	"testing"

	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/internal/ref"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// forEachGOMAXPROCS runs f at GOMAXPROCS 1, 2, 4 and 8 (the suite's
// helper, sketchtest.ForEachGOMAXPROCS).
var forEachGOMAXPROCS = sketchtest.ForEachGOMAXPROCS

var allAggregators = []sketch.Aggregator{sketch.Min, sketch.Max, sketch.Mean}

// fataler is what the helpers need of a test: a *testing.T or B, or a
// *rapid.T.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// mustNewSketch is sketch.New that fails t on an error.
func mustNewSketch(t fataler, cfg sketch.Config) *sketch.Sketch {
	t.Helper()
	s, err := sketch.New(cfg)
	if err != nil {
		t.Fatalf("sketch.New(%+v): %v", cfg, err)
	}
	return s
}

func mustNewReference(t testing.TB, cfg sketch.Config) *ref.Sketch {
	t.Helper()
	r, err := ref.New(cfg)
	if err != nil {
		t.Fatalf("ref.New(%+v): %v", cfg, err)
	}
	return r
}

// newEngine builds a sketch through New and returns the engine under it
// (internal/core), for the tests of the engine's own methods: hashed
// keys, receipts, refunds and the test hooks.
func newEngine(cfg sketch.Config) (*core.Sketch, error) {
	s, err := sketch.New(cfg)
	if err != nil {
		return nil, err
	}
	return core.SketchOf(s), nil
}

// mustNewEngine is newEngine that fails t on an error.
func mustNewEngine(t testing.TB, cfg sketch.Config) *core.Sketch {
	t.Helper()
	return core.SketchOf(mustNewSketch(t, cfg))
}
