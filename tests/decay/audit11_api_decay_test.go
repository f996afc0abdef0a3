package decay_test

// Contract conformance (audit11): package decay as shared/API.md states
// it.

import (
	"math"
	"testing"

	"github.com/lfgrudge/grudge/decay"
)

// a11Half is a user's own law: the Decay interface is
// Apply(score float64, dtMillis int64) float64.
type a11Half struct{}

func (a11Half) Apply(score float64, dtMillis int64) float64 {
	if dtMillis <= 0 {
		return score
	}
	return score * math.Exp2(-float64(dtMillis)/1000)
}

var (
	_ decay.Decay               = a11Half{}
	_ func(float64) decay.Decay = decay.Exponential
	_ func(float64) decay.Decay = decay.Linear
	_ func() decay.Decay        = decay.None
)

// TestAudit11APIDecayLaws: dtMillis <= 0 returns score unchanged; monotone
// toward 0, never crosses 0; composes; Exponential is score*exp(-lambda*s),
// Linear moves toward 0 by rate per second and stops at 0, None is the
// identity.
func TestAudit11APIDecayLaws(t *testing.T) {
	exp, lin, none := decay.Exponential(0.5), decay.Linear(3), decay.None()
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }
	if got := exp.Apply(10, 2000); !near(got, 10*math.Exp(-1)) {
		t.Errorf("Exponential(0.5).Apply(10, 2s) = %v, want %v", got, 10*math.Exp(-1))
	}
	if got := lin.Apply(10, 2000); !near(got, 4) {
		t.Errorf("Linear(3).Apply(10, 2s) = %v, want 4", got)
	}
	if got := lin.Apply(-10, 2000); !near(got, -4) {
		t.Errorf("Linear(3).Apply(-10, 2s) = %v, want -4", got)
	}
	if got := lin.Apply(10, 5000); got != 0 {
		t.Errorf("Linear(3).Apply(10, 5s) = %v, want 0 (stops at 0)", got)
	}
	if got := none.Apply(10, 1<<40); got != 10 {
		t.Errorf("None().Apply = %v, want 10", got)
	}
	for _, d := range []decay.Decay{exp, lin, none} {
		for _, s := range []float64{-7.5, 0, 3, 1e6} {
			for _, dt := range []int64{0, -1, -1000} {
				if got := d.Apply(s, dt); got != s {
					t.Errorf("%T.Apply(%v, %d) = %v, want unchanged", d, s, dt, got)
				}
			}
			prev := s
			for dt := int64(1); dt < 1e7; dt *= 3 {
				got := d.Apply(s, dt)
				if math.Abs(got) > math.Abs(prev) || got*s < 0 {
					t.Errorf("%T.Apply(%v, %d) = %v: not monotone toward 0 / crossed 0", d, s, dt, got)
				}
				prev = got
				for _, a := range []int64{1, dt / 2, dt - 1} {
					if a <= 0 || a >= dt {
						continue
					}
					if c := d.Apply(d.Apply(s, a), dt-a); !near(c, got) {
						t.Errorf("%T: Apply(Apply(%v,%d),%d) = %v, Apply(%v,%d) = %v", d, s, a, dt-a, c, s, dt, got)
					}
				}
			}
		}
	}
}
