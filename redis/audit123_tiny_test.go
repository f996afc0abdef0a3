package redis

// Audit 123: a Burst below float32's normal range.

import (
	"errors"
	"testing"
)

// TestAudit123FixedSubnormalBurst (audit 123; fixed at stop 63, the text
// below says what was wrong): Limiter's doc, for a limit counting tokens,
// says "each stored debt a float32 rounded up: decisions are late by that
// rounding (about Burst x 2^-23 tokens per write)", and Limit asked only
// "finite and > 0". NewLimiter accepted 1e-45/s x 1e-44, whose Burst
// lies below float32's normal range (2^-126, 1.18e-38), where a cell's
// step is 2^-149 (14% of that Burst): on a frozen clock three AllowN of
// 3e-45 (9e-45 in all, within Burst) saw the third denied with RetryAfter
// 1.408 s. Now a Burst, and a LocalFallback's Burst/N, below 2^-126 is
// refused with ErrInvalidConfig; 2^-126 itself is taken.
func TestAudit123FixedSubnormalBurst(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	for _, c := range []struct {
		name string
		cfg  LimiterConfig
		ok   bool
	}{
		{"Burst 1e-44", LimiterConfig{Name: "a123tiny1", Limit: PerSecond(1e-45, 1e-44)}, false},
		{"Burst just below 2^-126", LimiterConfig{Name: "a123tiny2", Limit: PerSecond(1e-40, 0x1p-126*(1-0x1p-52))}, false},
		{"Burst 2^-126", LimiterConfig{Name: "a123tiny3", Limit: PerSecond(1e-40, 0x1p-126)}, true},
		{"LocalFallback Burst/N below 2^-126", LimiterConfig{Name: "a123tiny4", Limit: PerSecond(1e-40, 0x1p-125), Policy: LocalFallback, Instances: 3}, false},
		{"LocalFallback Burst/N 2^-126", LimiterConfig{Name: "a123tiny5", Limit: PerSecond(1e-40, 0x1p-125), Policy: LocalFallback, Instances: 2}, true},
	} {
		_, err := e.newLimiter(t, c.cfg)
		if c.ok && err != nil {
			t.Errorf("%s: refused: %v", c.name, err)
		}
		if !c.ok && !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: NewLimiter error %v; want one matching ErrInvalidConfig", c.name, err)
		}
	}
}
