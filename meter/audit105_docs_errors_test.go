package meter_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch"
)

// Audit 105; fixed at stop 61 (core.Prefixed restates the engine's
// *sketch.ConfigError as the package's own), the text below says what
// was wrong.
//
// Audit 105 (docs against the code). meter/doc.go: "Errors from the
// constructors are *sketch.ConfigError values (errors.Is(err,
// sketch.ErrInvalidConfig)) naming the field, a nil Option included ...;
// they and the panics on bad input start with "meter: ""; NewRate's doc:
// "a nil or invalid option ... is a *sketch.ConfigError prefixed
// "meter: "" (NewInflight's and NewNovelty's say the same). An invalid
// size (WithSize(9, 64): Levels above 8) or a HasherFactory returning a
// nil Hasher is refused by the engine, and the constructors return
// fmt.Errorf("meter: %w", err): a *fmt.wrapError, not a
// *sketch.ConfigError, and the *sketch.ConfigError inside reads "sketch:
// Levels must be <= 8; got 9", not "meter: ...". Fails today.
func TestAudit105FixedConstructorErrorIsConfigError(t *testing.T) {
	nilHasher := meter.WithHasher(func(uint64) sketch.Hasher { return nil })
	ctors := map[string]func(...meter.Option) error{
		"NewRate":     func(o ...meter.Option) error { _, err := meter.NewRate(time.Second, o...); return err },
		"NewNovelty":  func(o ...meter.Option) error { _, err := meter.NewNovelty(time.Second, o...); return err },
		"NewInflight": func(o ...meter.Option) error { _, err := meter.NewInflight(0, o...); return err },
	}
	for name, ctor := range ctors {
		for _, c := range []struct {
			opt   string
			o     meter.Option
			field string
		}{{"WithSize(9, 64)", meter.WithSize(9, 64), "Levels"}, {"WithHasher(nil Hasher)", nilHasher, "Hasher"}} {
			err := ctor(c.o)
			if err == nil || !errors.Is(err, sketch.ErrInvalidConfig) {
				t.Errorf("%s(%s): %v; want an error matching ErrInvalidConfig", name, c.opt, err)
				continue
			}
			ce, ok := err.(*sketch.ConfigError)
			if !ok {
				var in *sketch.ConfigError
				errors.As(err, &in)
				t.Errorf("%s(%s) returned a %T (%q), not the documented *sketch.ConfigError; the one it wraps reads %q",
					name, c.opt, err, err, in)
				continue
			}
			if !strings.HasPrefix(ce.Error(), "meter: ") || ce.Field != c.field {
				t.Errorf("%s(%s): %q field %q; doc: prefixed \"meter: \", naming %s", name, c.opt, ce, ce.Field, c.field)
			}
		}
	}
}
