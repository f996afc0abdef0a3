package decay_test

import (
	"math"
	"testing"

	"pgregory.net/rapid"

	"github.com/lfgrudge/grudge/decay"
)

// TestCompiledRemain: what a refund may take back is never more than is
// left of a positive increment (and never less of a negative one).
func TestCompiledRemain(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		laws := []decay.Decay{decay.None(), decay.Exponential(rapid.Float64Range(1e-4, 50).Draw(t, "lambda")), decay.Linear(rapid.Float64Range(1e-3, 1e4).Draw(t, "rate"))}
		law := laws[rapid.IntRange(0, 2).Draw(t, "law")]
		c := decay.Compile(law)
		inc := rapid.Float64Range(-1e6, 1e6).Draw(t, "inc")
		dt := rapid.Int64Range(-5, 1<<33).Draw(t, "dt")
		got := c.Remain(inc, dt)
		var left float64 // what is left of inc on its own
		switch k, p := decay.Params(law); k {
		case decay.KindExponential:
			left = inc * math.Exp(-p*float64(max(dt, 0))/1000)
		case decay.KindLinear:
			left = law.Apply(inc, dt)
			if inc < 0 {
				left = inc // a drain need not have touched it
			}
		default:
			left = inc
		}
		if inc > 0 && !(got <= left && got >= 0) {
			t.Fatalf("%v: Remain(%v, %d) = %v, want within [0, %v]", law, inc, dt, got, left)
		}
		if inc < 0 && got > left {
			t.Fatalf("%v: Remain(%v, %d) = %v, want <= %v", law, inc, dt, got, left)
		}
	})
}

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
		if got := decay.Compile(badLaw{tt.v}).Apply(tt.score, 1000); got != tt.want {
			t.Errorf("a law returning %v for %v: Apply = %v, want %v", tt.v, tt.score, got, tt.want)
		}
	}
}
