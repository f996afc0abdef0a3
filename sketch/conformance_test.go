package sketch_test

import (
	"testing"

	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestConformance runs the contract suite on the lock-free sketch.
func TestConformance(t *testing.T) {
	sketchtest.TestScorer(t, func(t testing.TB, cfg sketch.Config) sketch.Scorer { return mustNewSketch(t, cfg) })
}
