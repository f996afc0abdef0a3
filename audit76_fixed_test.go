package grudge_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	grudge "github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
)

// TestAudit76FixedTickerPeriodSubMsRefused: with a Ticker the Period is
// documented as optional and is never used (rotation follows the ticks
// only; rotator.go substitutes an hour for an unset one), yet a set
// Period below 1 ms is refused with "Period must be at least 1ms (the
// clock counts milliseconds)".
//
// Contradicts rotator.go (RotatorConfig.Period): "Required (at least 1ms)
// without a Ticker; with one it is optional." and docs/migrating.md's
// table ("RotatorConfig ... same; Period optional with a Ticker"): the
// 1 ms bound is stated for the case without a Ticker only.
func TestAudit76FixedTickerPeriodSubMsRefused(t *testing.T) {
	for _, p := range []time.Duration{time.Nanosecond, 500 * time.Microsecond} {
		tk := grudgetest.NewFakeTicker()
		r, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: grudge.Config{Hi: 10}, Period: p, Ticker: tk})
		if err != nil {
			t.Errorf("NewRotator(Period: %v, Ticker: FakeTicker) = %v; want a rotator: with a Ticker the Period is optional and unused (the 1ms bound is documented for the case without a Ticker)", p, err)
			continue
		}
		r.Update([]byte("k"), 1)
		tk.Tick()
		if got := r.Rotations(); got != 1 {
			t.Errorf("Period %v: Rotations() after one Tick = %d, want 1", p, got)
		}
		r.Close()
	}
}

func a76NilHasher(uint64) grudge.Hasher { return nil }

// TestAudit76FixedNilHasherNewRotatorPanics: a HasherFactory returning
// nil makes grudge.New return a *ConfigError, but grudge.NewRotator (lazy
// or with a Ticker) panics with "rotator: building a generation failed:
// the factory returned a nil Hasher" instead of returning an error.
//
// Contradicts hash.go (HasherFactory): "It must return a non-nil Hasher:
// New reports a nil one as a *ConfigError naming Hasher", rotator.go
// (NewRotator): "An invalid cfg yields the core's error unchanged", and
// docs/migrating.md, "What is identical": "invalid configs are errors
// naming the field".
func TestAudit76FixedNilHasherNewRotatorPanics(t *testing.T) {
	for _, ticker := range []bool{false, true} {
		rc := grudge.RotatorConfig{Sketch: grudge.Config{Hi: 10, Hasher: a76NilHasher}, Period: time.Second}
		if ticker {
			rc.Ticker = grudgetest.NewFakeTicker()
		}
		var r *grudge.Rotator
		var err error
		panicked := func() (p any) {
			defer func() { p = recover() }()
			r, err = grudge.NewRotator(rc)
			return nil
		}()
		if panicked != nil {
			t.Errorf("ticker=%v: NewRotator with a HasherFactory returning nil panicked: %v; want a *ConfigError naming Hasher (as New returns)", ticker, panicked)
			continue
		}
		var ce *grudge.ConfigError
		if err == nil || !errors.As(err, &ce) || ce.Field != "Hasher" {
			t.Errorf("ticker=%v: NewRotator = %v, %v; want a *ConfigError naming Hasher", ticker, r, err)
		}
		if r != nil {
			r.Close()
		}
	}
}

// TestAudit76FixedNilHasherErrorUnprefixed: New's error for a
// HasherFactory returning nil reads "the factory returned a nil Hasher":
// no "sketch: " prefix, unlike every other configuration error.
//
// Contradicts docs/migrating.md, "Limits and errors": "Errors are the
// core's *ConfigError (re-exported as grudge.ConfigError), prefixed
// `sketch: ` or `rotator: `, naming the field and the value", and
// sketch.go (New): "An invalid cfg yields the core's error unchanged
// (prefix "sketch: ", naming the field and the value)".
func TestAudit76FixedNilHasherErrorUnprefixed(t *testing.T) {
	_, err := grudge.New(grudge.Config{Hi: 10, Hasher: a76NilHasher})
	var ce *grudge.ConfigError
	if err == nil || !errors.As(err, &ce) || !errors.Is(err, grudge.ErrInvalidConfig) {
		t.Fatalf("New with a nil-returning HasherFactory = %v; want a *ConfigError", err)
	}
	if !strings.HasPrefix(err.Error(), "sketch: ") || !strings.Contains(err.Error(), "Hasher") {
		t.Errorf("New's error = %q (Field %q); want the documented prefix \"sketch: \" and the field Hasher", err, ce.Field)
	}
}
