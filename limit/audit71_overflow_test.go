package limit

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/lfgrudge/grudge/sketch"
)

// audit71NearTop is the least rate whose token, 1000/r ms, is finite: a
// token just below MaxFloat64 ms, which rounded up to m < 53 significant
// bits is 2^1024 = +Inf.
func audit71NearTop() float64 {
	r := 1000 / math.MaxFloat64
	for math.IsInf(1000/r, 1) {
		r = math.Nextafter(r, 1)
	}
	return r
}

// audit71Try calls f, returning the panic it raised as an error.
func audit71Try(f func() error) (panicked any, err error) {
	defer func() {
		if x := recover(); x != nil {
			panicked = x
		}
	}()
	return nil, f()
}

// TestAudit71FixedNewPanicsNearInfToken (fixed in stop 47: units.RoundUpBits returns +Inf past MaxFloat64): limit.go, New: "An invalid
// argument or option is a *sketch.ConfigError naming it ... a limit
// that is NaN, zero, negative or too large to represent". Stop 47 (audit
// 69) guards a token of +Inf ms, but a token just below MaxFloat64 ms
// (rate 5.5627e-306 .. 5.58e-306 per second) is finite and rounds up to
// m significant bits as +Inf: units.RoundUpBits's big.Rat of +Inf is
// nil and Cmp panics (internal/units/units.go:113), before New's
// MaxDebt-drain bound can refuse it.
func TestAudit71FixedNewPanicsNearInfToken(t *testing.T) {
	r0 := audit71NearTop()
	for _, c := range []struct {
		r     float64
		burst int
	}{{r0, 1}, {r0, 1000}, {r0, 1 << 24}, {5.57e-306, 1 << 24}, {5.565e-306, 1 << 24}} {
		p, err := audit71Try(func() error {
			_, err := New(Limit(c.r), c.burst, WithEngine(CountMin), WithMaxDebt(float64(c.burst)))
			return err
		})
		if p != nil {
			t.Errorf("New(%v, %d, CountMin, MaxDebt %d) panicked: %v; want a *sketch.ConfigError (its token, 1000/r = %v ms, rounds up to +Inf)", c.r, c.burst, c.burst, p, 1000/c.r)
			continue
		}
		if !errors.Is(err, sketch.ErrInvalidConfig) {
			t.Errorf("New(%v, %d): %v, want ErrInvalidConfig", c.r, c.burst, err)
		}
	}
}

// TestAudit71FixedTierPanicsNearInfCost (fixed in stop 47: units.RoundUpBits returns +Inf past MaxFloat64): tier.go, Limiter.Tier: "A
// limit that is NaN, not positive, Inf or above 1e22 ... [is] a
// *sketch.ConfigError" and a burst whose cost exceeds MaxDebt is a
// *MaxDebtError; never a panic. On a count-min limiter whose rate is not
// a short fraction (l.bits > 0: pi/s, MaxDebt 2^24) a tier whose cost
// unit x R / r is finite but within one m-bit step of MaxFloat64 panics
// in units.RoundUpBits (tier.go:98 -> units.go:113), and SetLimit with
// the same rate takes the same path.
func TestAudit71FixedTierPanicsNearInfCost(t *testing.T) {
	for _, R := range []float64{math.Pi, 1 / math.Pi} {
		l, err := New(Limit(R), 1, WithEngine(CountMin), WithMaxDebt(1<<24))
		if err != nil {
			t.Fatal(err)
		}
		bad := 0
		var first string
		for k := 0; k < 400; k++ {
			r := l.unit * R / math.MaxFloat64 * (1 + float64(k)*2e-5)
			for _, what := range []string{"Tier", "SetLimit"} {
				p, err := audit71Try(func() error {
					if what == "Tier" {
						_, err := l.Tier("t", Limit(r), 1)
						return err
					}
					return l.SetLimit(Limit(r))
				})
				if p != nil {
					bad++
					if first == "" {
						first = fmt.Sprintf("%s(%v) on New(%v, 1, CountMin, MaxDebt 2^24) panicked: %v", what, r, R, p)
					}
					continue
				}
				var me *MaxDebtError
				if err != nil && !errors.Is(err, sketch.ErrInvalidConfig) && !errors.As(err, &me) {
					t.Errorf("%s(%v): untyped error %v", what, r, err)
				}
			}
		}
		if bad > 0 {
			t.Errorf("%d of 800 tier/SetLimit rates near the top panicked, want a typed error; first: %s", bad, first)
		}
	}
}
