package decay_test

import (
	"math"
	"testing"

	"github.com/lfgrudge/grudge/decay"
)

// TestAudit125ExtremeArgumentsKeepGuarantees: for valid parameters at the
// edges (subnormal, 1e308) and extreme scores and times, the provided laws
// keep the documented guarantees: dt <= 0 is the identity, |Apply| <= |s|,
// the sign never flips, NaN in gives NaN out, nothing becomes ±Inf.
func TestAudit125ExtremeArgumentsKeepGuarantees(t *testing.T) {
	laws := map[string]decay.Decay{
		"None":               decay.None(),
		"Exponential(min)":   decay.Exponential(5e-324),
		"Exponential(1)":     decay.Exponential(1),
		"Exponential(1e308)": decay.Exponential(1e308),
		"Linear(min)":        decay.Linear(5e-324),
		"Linear(1)":          decay.Linear(1),
		"Linear(1e308)":      decay.Linear(1e308),
		"Linear(MaxFloat64)": decay.Linear(math.MaxFloat64),
	}
	scores := []float64{0, math.Copysign(0, -1), 5e-324, -5e-324, 1, -1, 1e308, -1e308, math.MaxFloat64, -math.MaxFloat64}
	dts := []int64{math.MinInt64, -1, 0, 1, 1000, 1 << 40, math.MaxInt64}
	for name, law := range laws {
		for _, s := range scores {
			for _, dt := range dts {
				got := law.Apply(s, dt)
				switch {
				case dt <= 0 && math.Float64bits(got) != math.Float64bits(s) && !(got == 0 && s == 0):
					t.Errorf("%s.Apply(%v, %d) = %v, want %v unchanged", name, s, dt, got, s)
				case math.IsNaN(got) || math.IsInf(got, 0):
					t.Errorf("%s.Apply(%v, %d) = %v, want finite", name, s, dt, got)
				case math.Abs(got) > math.Abs(s):
					t.Errorf("%s.Apply(%v, %d) = %v grows", name, s, dt, got)
				case s > 0 && got < 0 || s < 0 && got > 0:
					t.Errorf("%s.Apply(%v, %d) = %v crosses 0", name, s, dt, got)
				}
			}
			if got := law.Apply(math.NaN(), 5); !math.IsNaN(got) {
				t.Errorf("%s.Apply(NaN, 5) = %v, want NaN", name, got)
			}
		}
	}
}
