package ref

import (
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestConformance runs the contract suite on the mutex reference and its
// rotator (ticker period far beyond any test).
func TestConformance(t *testing.T) {
	t.Run("impl=sketch", func(t *testing.T) {
		sketchtest.TestScorer(t, func(t testing.TB, cfg sketch.Config) sketch.Scorer { return newTestSketch(t, cfg) })
	})
	t.Run("impl=rotator", func(t *testing.T) {
		sketchtest.TestScorer(t, func(t testing.TB, cfg sketch.Config) sketch.Scorer {
			r, err := NewRotator(RotatorConfig{Sketch: cfg, Period: 1000 * time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(r.Close)
			return r
		})
	})
}
