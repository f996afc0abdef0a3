package redis

import (
	"errors"
	"testing"

	"github.com/lfgrudge/grudge/sketch"
)

// TestAudit77FixedNilHasherAccepted: config.go: "The shared fields mean
// what they mean in sketch.Config, and are validated as sketch.New
// validates them"; sketch/hash.go: a HasherFactory "must return a
// non-nil Hasher: New reports a nil one as a *ConfigError naming
// Hasher". sketch.New does (stop 48's "sketch: the HasherFactory returned
// a nil Hasher (for seed N)"); redis.New does not: it stores the nil
// Hasher, and the first Update panics with a nil dereference before any
// round trip. (The conn is never used by New: no server needed.)
func TestAudit77FixedNilHasherAccepted(t *testing.T) {
	nilF := func(uint64) sketch.Hasher { return nil }
	if _, err := sketch.New(sketch.Config{Hi: 1, Hasher: nilF}); err == nil {
		t.Fatal("control: sketch.New accepted a nil-returning HasherFactory")
	}
	check := func(what string, err error) {
		t.Helper()
		var ce *sketch.ConfigError
		if !errors.Is(err, ErrInvalidConfig) || !errors.As(err, &ce) || ce.Field != "Hasher" {
			t.Errorf("%s with a HasherFactory returning nil: err = %v; want ErrInvalidConfig wrapping a *sketch.ConfigError naming Hasher, as sketch.New returns", what, err)
		}
	}
	s, err := newSketch(rueidisConn{}, Config{Name: "a77nil", Hi: 1, Hasher: nilF})
	check("New", err)
	if err == nil {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Logf("and its first Update panics before any round trip: %v", p)
				}
			}()
			_ = s.Update(t.Context(), "k", 1)
		}()
	}
	// NewLimiter (CheckSkip: no server contacted) accepts it too.
	_, err = newLimiter(rueidisConn{}, LimiterConfig{Name: "a77nil", Limit: Limit{Rate: 1, Burst: 5}, Hasher: nilF, ServerCheck: CheckSkip})
	check("NewLimiter", err)
}
