package limit_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch"
)

// Audit 105; fixed at stop 61 (core.Prefixed restates the engine's
// *sketch.ConfigError as the package's own), the text below says what
// was wrong.
//
// Audit 105 (docs against the code). limit.New's doc: "An invalid
// argument or option is a *sketch.ConfigError naming it (errors.Is(err,
// sketch.ErrInvalidConfig)), prefixed "limit: ""; limit/doc.go: "New
// returns a *sketch.ConfigError ... for ... an invalid option". For a
// size the engine refuses (WithSize(9, 64): Levels above 8;
// WithSize(4, 2^31): CellsPerLevel above 2^30) New returns
// fmt.Errorf("limit: %w", err) (limit.go): a *fmt.wrapError, not a
// *sketch.ConfigError, whose *sketch.ConfigError (found by errors.As)
// reads "sketch: Levels must be <= 8; got 9", not prefixed "limit: ".
// Every other invalid argument (a nil option, a burst of 0, ...) is the
// documented *sketch.ConfigError itself. Fails today.
func TestAudit105FixedNewErrorIsConfigError(t *testing.T) {
	for _, c := range []struct {
		name  string
		opt   limit.Option
		field string
	}{
		{"WithSize(9, 64)", limit.WithSize(9, 64), "Levels"},
		{"WithSize(4, 1<<31)", limit.WithSize(4, 1<<31), "CellsPerLevel"},
	} {
		_, err := limit.New(10, 20, c.opt)
		if err == nil {
			t.Errorf("limit.New(10, 20, %s) accepted", c.name)
			continue
		}
		if !errors.Is(err, sketch.ErrInvalidConfig) {
			t.Errorf("%s: %v does not match ErrInvalidConfig", c.name, err)
		}
		ce, ok := err.(*sketch.ConfigError)
		if !ok {
			var in *sketch.ConfigError
			errors.As(err, &in)
			t.Errorf("limit.New(10, 20, %s) returned a %T (%q), not the documented *sketch.ConfigError; "+
				"the one it wraps reads %q", c.name, err, err, in)
			continue
		}
		if !strings.HasPrefix(ce.Error(), "limit: ") || ce.Field != c.field {
			t.Errorf("%s: ConfigError %q field %q; doc: prefixed \"limit: \", naming %s", c.name, ce, ce.Field, c.field)
		}
	}
	// The documented form, for comparison: a nil Option.
	if _, err := limit.New(10, 20, nil); func() bool { _, ok := err.(*sketch.ConfigError); return !ok }() {
		t.Errorf("limit.New(10, 20, nil): %T %v; want a *sketch.ConfigError", err, err)
	}
}
