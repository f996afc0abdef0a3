package rotator

import (
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestConformance runs the contract suite on the lock-free rotator (a
// period of a day: the suite's clock jumps rotate it, which the contract
// allows), with Config.Prefetch off and on.
func TestConformance(t *testing.T) {
	for _, prefetch := range []bool{false, true} {
		t.Run(map[bool]string{false: "prefetch=off", true: "prefetch=on"}[prefetch], func(t *testing.T) {
			sketchtest.TestScorer(t, func(t testing.TB, cfg sketch.Config) sketch.Scorer {
				return newRotator(t, Config{Sketch: cfg, Period: 24 * time.Hour, Prefetch: prefetch})
			})
		})
	}
}
