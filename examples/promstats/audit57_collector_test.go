package promstats_test

import (
	"testing"

	"github.com/lfgrudge/grudge/examples/promstats"
	"github.com/lfgrudge/grudge/limit"
)

// New's doc: "It panics on a nil Source". A nil *limit.Limiter (or
// *limit.Multi) in the map is a Source holding nil: New accepts it, and
// the first scrape's Stats call on it is where it fails.
func TestAudit57FixedTypedNilSourceAccepted(t *testing.T) {
	var nilLimiter *limit.Limiter
	panicked := func() (p bool) {
		defer func() { p = recover() != nil }()
		promstats.New("", map[string]promstats.Source{"api": nilLimiter})
		return false
	}()
	if !panicked {
		stats := func() (r any) {
			defer func() { r = recover() }()
			nilLimiter.Stats()
			return nil
		}()
		t.Errorf("New accepted a nil *limit.Limiter as a Source (promstats.New: \"It panics on a nil Source\"); its Stats, called at every scrape, panics with %v", stats)
	}
}
