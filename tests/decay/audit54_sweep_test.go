package decay_test

// Audit 54: API.md, "decay": "Apply returns score after dtMillis ms of
// decay. dtMillis <= 0 returns score unchanged. Monotone toward 0, never
// crosses 0, and composes", at the extremes of both arguments.

import (
	"math"
	"testing"

	"github.com/lfgrudge/grudge/decay"
)

func TestAudit54DecayExtremes(t *testing.T) {
	laws := map[string]decay.Decay{
		"Exponential(1e-12)": decay.Exponential(1e-12),
		"Exponential(1e6)":   decay.Exponential(1e6),
		"Linear(1e-12)":      decay.Linear(1e-12),
		"Linear(1e300)":      decay.Linear(1e300),
		"None":               decay.None(),
	}
	scores := []float64{0, math.Copysign(0, -1), 5e-324, -5e-324, 1, -1, 3.4e38, -3.4e38, math.MaxFloat64, -math.MaxFloat64}
	dts := []int64{math.MinInt64, -1, 0, 1, 1000, 1 << 31, 1 << 40, math.MaxInt64 - 1, math.MaxInt64}
	for name, law := range laws {
		for _, s := range scores {
			prev := s
			for _, dt := range dts {
				got := law.Apply(s, dt)
				if math.IsNaN(got) || math.IsInf(got, 0) {
					t.Errorf("%s.Apply(%v, %d) = %v", name, s, dt, got)
					continue
				}
				if dt <= 0 {
					if got != s {
						t.Errorf("%s.Apply(%v, %d) = %v, want unchanged", name, s, dt, got)
					}
					continue
				}
				// toward 0, never across, and no further from 0 than a
				// shorter dt left it (dts ascend).
				if (s > 0 && (got < 0 || got > s)) || (s < 0 && (got > 0 || got < s)) || (s == 0 && got != 0) {
					t.Errorf("%s.Apply(%v, %d) = %v: not toward 0 / crossed 0", name, s, dt, got)
				}
				if math.Abs(got) > math.Abs(prev) {
					t.Errorf("%s.Apply(%v, %d) = %v, further from 0 than at a shorter dt (%v)", name, s, dt, got, prev)
				}
				prev = got
			}
		}
	}
	// Composition across huge spans: Apply(Apply(s, a), b) == Apply(s, a+b).
	for name, law := range laws {
		for _, s := range []float64{1e30, -7.5, 1} {
			a, b := int64(1)<<40, int64(1)<<41
			x, y := law.Apply(law.Apply(s, a), b), law.Apply(s, a+b)
			if math.Abs(x-y) > 1e-9*math.Max(math.Abs(y), 1e-300) && !(x == 0 && y == 0) {
				t.Errorf("%s: Apply(Apply(%v, 2^40), 2^41) = %v, Apply(%v, 3*2^40) = %v", name, s, x, s, y)
			}
		}
	}
}
