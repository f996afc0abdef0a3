package rotator

import (
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestConformance runs the rotators' contract suite on the lock-free
// rotator, with Config.Prefetch off and on.
func TestConformance(t *testing.T) {
	for _, prefetch := range []bool{false, true} {
		t.Run(map[bool]string{false: "prefetch=off", true: "prefetch=on"}[prefetch], func(t *testing.T) {
			sketchtest.TestRotator(t, func(t testing.TB, cfg sketch.Config, n uint32, period time.Duration) sketch.Scorer {
				return newRotator(t, Config{Sketch: cfg, Generations: n, Period: period, Prefetch: prefetch})
			})
		})
	}
}
