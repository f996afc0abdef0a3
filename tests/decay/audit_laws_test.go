package decay_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/lfgrudge/grudge/decay"
)

var auditScores = []float64{
	0, math.Copysign(0, -1),
	5e-324, -5e-324, 1e-310, -1e-310, 1e-300, -1e-300, 1, -1, 0.1, -0.1,
	math.MaxFloat32, -math.MaxFloat32, 1e300, -1e300, math.MaxFloat64, -math.MaxFloat64,
}

var auditGaps = []int64{
	math.MinInt64, -1 << 40, -1, 0, 1, 999, 1000, 3_600_000, 24 * 3_600_000,
	1 << 31, 1 << 32, 365 * 24 * 3_600_000, 100 * 365 * 24 * 3_600_000, math.MaxInt64 / 2, math.MaxInt64,
}

func auditLaws() []struct {
	name string
	d    decay.Decay
} {
	return []struct {
		name string
		d    decay.Decay
	}{
		{"none", decay.None()},
		{"exp(5e-324)", decay.Exponential(5e-324)},
		{"exp(1e-9)", decay.Exponential(1e-9)},
		{"exp(1)", decay.Exponential(1)},
		{"exp(1e6)", decay.Exponential(1e6)},
		{"exp(MaxFloat64)", decay.Exponential(math.MaxFloat64)},
		{"lin(5e-324)", decay.Linear(5e-324)},
		{"lin(1e-300)", decay.Linear(1e-300)},
		{"lin(1)", decay.Linear(1)},
		{"lin(1e300)", decay.Linear(1e300)},
		{"lin(MaxFloat64)", decay.Linear(math.MaxFloat64)},
	}
}

// TestAuditLawGuaranteesAtExtremes checks the documented guarantees of the
// provided laws (identity for dt <= 0, |Apply| <= |s|, no sign flip, never
// NaN for a finite score) at extreme scores, parameters and gaps, up to
// MaxInt64 ms.
func TestAuditLawGuaranteesAtExtremes(t *testing.T) {
	for _, l := range auditLaws() {
		for _, s := range auditScores {
			for _, dt := range auditGaps {
				r := l.d.Apply(s, dt)
				where := fmt.Sprintf("%s.Apply(%v, %d) = %v", l.name, s, dt, r)
				if dt <= 0 {
					if math.Float64bits(r) != math.Float64bits(s) {
						t.Errorf("%s: want the score unchanged (dt <= 0)", where)
					}
					continue
				}
				if math.IsNaN(r) || math.IsInf(r, 0) {
					t.Errorf("%s: not finite", where)
					continue
				}
				if math.Abs(r) > math.Abs(s) {
					t.Errorf("%s: grew away from 0", where)
				}
				if r != 0 && (r > 0) != (s > 0) {
					t.Errorf("%s: crossed 0", where)
				}
			}
		}
	}
}

// TestAuditLawMonotoneInTime checks that a longer gap never leaves more
// than a shorter one (monotone toward 0 over time), at extreme gaps.
func TestAuditLawMonotoneInTime(t *testing.T) {
	for _, l := range auditLaws() {
		for _, s := range auditScores {
			prev := s
			for _, dt := range auditGaps {
				if dt <= 0 {
					continue
				}
				r := l.d.Apply(s, dt)
				if math.Abs(r) > math.Abs(prev) {
					t.Errorf("%s.Apply(%v, %d) = %v is further from 0 than a shorter gap's %v", l.name, s, dt, r, prev)
				}
				prev = r
			}
		}
	}
}

// TestAuditLawComposeExtremes checks Apply(Apply(s,a),b) ~= Apply(s,a+b) at
// extreme scores and long gaps (relative tolerance, plus the absolute
// spacing of subnormals that any float law loses there).
func TestAuditLawComposeExtremes(t *testing.T) {
	gaps := []int64{1, 7, 1000, 86_400_000, 365 * 86_400_000, 1 << 40}
	for _, l := range auditLaws() {
		if l.name == "lin(MaxFloat64)" {
			continue // TestAuditLinearHugeRateNoOverflow
		}
		for _, s := range auditScores {
			for _, a := range gaps {
				for _, b := range gaps {
					two := l.d.Apply(l.d.Apply(s, a), b)
					one := l.d.Apply(s, a+b)
					tol := 1e-9*math.Max(math.Abs(one), math.Abs(two)) + 1e-300
					if l.name[:3] == "lin" {
						// the drop is computed in float64 from a float
						// score: within a few ulps of |s|
						tol += 4e-16 * math.Abs(s)
					}
					if math.IsNaN(one) || math.IsNaN(two) || math.Abs(one-two) > tol {
						t.Errorf("%s: Apply(Apply(%v,%d),%d) = %v, Apply(s,%d) = %v", l.name, s, a, b, two, a+b, one)
					}
				}
			}
		}
	}
}

// TestAuditLinearHugeRateNoOverflow: Linear(rate) with a valid (finite,
// > 0) but huge rate drops rate*dt/1000 per the law; the intermediate
// rate*dt must not overflow to +Inf and wipe a score the true drop leaves
// far from 0 (that breaks composition and loses mass).
func TestAuditLinearHugeRateNoOverflow(t *testing.T) {
	cases := []struct {
		rate float64
		s    float64
		dt   int64
		want float64
	}{
		{math.MaxFloat64, math.MaxFloat64, 2, math.MaxFloat64 - math.MaxFloat64/1000*2},
		{1e300, math.MaxFloat64, 1_000_000_000, math.MaxFloat64 - 1e306},
		{1e300, -math.MaxFloat64, 1_000_000_000, -math.MaxFloat64 + 1e306},
	}
	for _, c := range cases {
		got := decay.Linear(c.rate).Apply(c.s, c.dt)
		if math.Abs(got-c.want) > 1e-12*math.Abs(c.want) {
			t.Errorf("Linear(%g).Apply(%g, %d) = %g; want %g (the drop is only %g)", c.rate, c.s, c.dt, got, c.want, c.rate*(float64(c.dt)/1000))
		}
	}
	l := decay.Linear(math.MaxFloat64)
	if one, two := l.Apply(math.MaxFloat64, 2), l.Apply(l.Apply(math.MaxFloat64, 1), 1); one != two && math.Abs(one-two) > 1e-12*math.MaxFloat64 {
		t.Errorf("Linear(MaxFloat64): Apply(s, 2) = %g but Apply(Apply(s, 1), 1) = %g: does not compose", one, two)
	}
}
