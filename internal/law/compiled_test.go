package law_test

import (
	"math"
	"testing"

	"github.com/lfgrudge/grudge/internal/law"
)

// badLaw returns v whatever it is given.
type badLaw struct{ v float64 }

func (b badLaw) Apply(float64, int64) float64 { return b.v }

// TestCompiledSanitizes: a custom law's NaN, ±Inf, growth or sign change
// reads as no decay or as 0, never as a poisoned or grown score.
func TestCompiledSanitizes(t *testing.T) {
	for _, tt := range []struct {
		v, score, want float64
	}{
		{math.NaN(), 5, 5}, {math.Inf(1), 5, 5}, {math.Inf(-1), -5, -5},
		{50, 5, 5}, {-3, 5, 0}, {3, -5, 0}, {-50, -5, -5}, {2, 5, 2},
	} {
		if got := law.Compile(badLaw{tt.v}).Apply(tt.score, 1000); got != tt.want {
			t.Errorf("a law returning %v for %v: Apply = %v, want %v", tt.v, tt.score, got, tt.want)
		}
	}
}
