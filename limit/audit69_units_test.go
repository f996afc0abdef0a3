package limit

import (
	"errors"
	"testing"

	"github.com/lfgrudge/grudge/sketch"
)

// TestAudit69FixedNewPanicsOnTinyLimit (fixed in stop 47: units guard an infinite token): limit.go, New: "An invalid
// argument or option is a *sketch.ConfigError naming it ... a limit that
// is NaN, zero, negative or too large to represent (above 1e22)". A
// positive limit below 1000/MaxFloat64 (5.56e-306 per second) panics
// instead (internal/units: 1000/rate is +Inf, big.Rat.SetFloat64(+Inf)
// is nil, RoundUpBits's Cmp dereferences it: units.go:107). Shared with
// the redis module's NewLimiter (redis/audit69_badinput_test.go).
func TestAudit69FixedNewPanicsOnTinyLimit(t *testing.T) {
	for _, r := range []Limit{5e-324, 1e-307} {
		func() {
			defer func() {
				if x := recover(); x != nil {
					t.Errorf("New(%v, 1) panicked: %v; want a limiter or a *sketch.ConfigError (errors.Is ErrInvalidConfig)", float64(r), x)
				}
			}()
			if _, err := New(r, 1); err != nil && !errors.Is(err, sketch.ErrInvalidConfig) {
				t.Errorf("New(%v, 1): %v, want ErrInvalidConfig", float64(r), err)
			}
		}()
	}
}
