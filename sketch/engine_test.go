package sketch_test

import (
	"testing"

	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch"
)

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
