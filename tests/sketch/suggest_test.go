package sketch_test

import (
	"math"
	"testing"

	grudge "github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/sketch"
	"pgregory.net/rapid"
)

// fpRate is the false-positive rate SuggestLevels documents:
// (1 - (1 - 1/m)^hot)^levels.
func fpRate(levels, m, hot uint32) float64 {
	return math.Pow(-math.Expm1(float64(hot)*math.Log1p(-1/float64(m))), float64(levels))
}

// TestSuggestLevelsGrudgeOrder: sketch.SuggestLevels takes grudge's
// arguments in grudge's order (hot keys, cells per level, target), so a
// call written for grudge, or for the root package, answers the same.
func TestSuggestLevelsGrudgeOrder(t *testing.T) {
	for _, tt := range []struct {
		hot, m uint32
		p      float64
		want   uint32
	}{
		{1000, 100_000, 0.01, 1},
		{1000, 100_000, 1e-4, 2},
		{1000, 100_000, 1e-8, 4},
		{100_000, 1000, 0.01, sketch.MaxLevels}, // the order matters: every cell is hot
		{1000, 0, 1e-8, 4},                      // 0 cells per level: the default, 100,000
		{0, 100_000, 0.01, 1},                   // no hot key: one level is never wrong
		{1000, 100_000, math.NaN(), sketch.MaxLevels},
	} {
		if got := sketch.SuggestLevels(tt.hot, tt.m, tt.p); got != tt.want {
			t.Errorf("sketch.SuggestLevels(%d, %d, %v) = %d, want %d", tt.hot, tt.m, tt.p, got, tt.want)
		}
	}
}

// TestSuggestLevelsAgreesWithRoot: on every input the root package
// accepts, the two SuggestLevels answer the same L, the smallest whose
// rate is at most the target (or MaxLevels).
func TestSuggestLevelsAgreesWithRoot(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		hot := rapid.Uint32Range(1, 1<<24).Draw(rt, "hot")
		m := rapid.Uint32Range(1, 1<<24).Draw(rt, "m")
		p := math.Pow(10, -rapid.Float64Range(0.01, 12).Draw(rt, "exp"))
		got := sketch.SuggestLevels(hot, m, p)
		if root := suggested(grudge.SuggestLevels(hot, m, p)); root != got {
			rt.Fatalf("sketch.SuggestLevels(%d, %d, %v) = %d, grudge.SuggestLevels = %d", hot, m, p, got, root)
		}
		if got < 1 || got > sketch.MaxLevels {
			rt.Fatalf("SuggestLevels = %d, outside 1..%d", got, sketch.MaxLevels)
		}
		if got < sketch.MaxLevels && fpRate(got, m, hot) > p {
			rt.Fatalf("L=%d: rate %v above the target %v", got, fpRate(got, m, hot), p)
		}
		if got > 1 && fpRate(got-1, m, hot) <= p {
			rt.Fatalf("L=%d is not the smallest: L=%d has rate %v <= %v", got, got-1, fpRate(got-1, m, hot), p)
		}
	})
}
