package grudge_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	grudge "github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
)

// TestAudit76ConfigErrors: REFERENCE.md: "Config validation rejects NaN
// parameters, Lo >= Hi, Lo <= 0 <= Hi violated, Hi = +Inf without
// effective decay"; migrating.md, "Limits and errors": errors are the
// core's *ConfigError (grudge.ConfigError), "prefixed `sketch: ` or
// `rotator: `, naming the field and the value, and matched by
// errors.Is(err, grudge.ErrInvalidConfig)"; Levels at most 8. Every
// refusal goes through New and, for the same Sketch config, NewRotator
// (lazy and with a Ticker); valid corner configs are accepted. (A
// HasherFactory returning nil is left to the Finding tests.)
func TestAudit76ConfigErrors(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	bad := []struct {
		cfg   grudge.Config
		field string
	}{
		{grudge.Config{Lo: 1, Hi: 2}, "Lo"},
		{grudge.Config{Lo: -2, Hi: -1}, "Hi"},
		{grudge.Config{Lo: 0, Hi: 0}, "Hi"},
		{grudge.Config{Lo: nan, Hi: 1}, "Lo"},
		{grudge.Config{Lo: 0, Hi: nan}, "Hi"},
		{grudge.Config{Lo: 0, Hi: inf}, "Hi"},
		{grudge.Config{Lo: 0, Hi: inf, Decay: grudge.None}, "Hi"},
		{grudge.Config{Lo: math.Inf(-1), Hi: 1, Decay: grudge.None()}, "Lo"},
		{grudge.Config{Hi: 1, Levels: 9}, "Levels"},
		{grudge.Config{Hi: 1, Levels: math.MaxUint32}, "Levels"},
		{grudge.Config{Hi: 1, Decay: grudge.Exponential(nan)}, "Decay"},
		{grudge.Config{Hi: 1, Decay: grudge.Linear(nan)}, "Decay"},
		{grudge.Config{Hi: 1, Decay: grudge.Linear(inf)}, "Decay"},
		{grudge.Config{Hi: 1e39}, "Hi"},
		{grudge.Config{Lo: -1e39, Hi: 1}, "Lo"},
	}
	check := func(what string, err error, prefix, field string) {
		t.Helper()
		if err == nil {
			t.Errorf("%s: accepted, want an error naming %s", what, field)
			return
		}
		var ce *grudge.ConfigError
		if !errors.Is(err, grudge.ErrInvalidConfig) || !errors.As(err, &ce) {
			t.Errorf("%s: %v (%T) does not match ErrInvalidConfig / *ConfigError", what, err, err)
			return
		}
		if ce.Field != field || !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %q (Field %q), want prefix %q naming %q", what, err, ce.Field, prefix, field)
		}
	}
	for i, b := range bad {
		what := fmt.Sprintf("case %d %+v", i, b.cfg)
		_, err := grudge.New(b.cfg)
		check("New "+what, err, "sketch: ", b.field)
		_, err = grudge.NewRotator(grudge.RotatorConfig{Sketch: b.cfg, Period: time.Second})
		check("NewRotator "+what, err, "sketch: ", b.field)
		tk := grudgetest.NewFakeTicker()
		r, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: b.cfg, Ticker: tk})
		check("NewRotator(Ticker) "+what, err, "sketch: ", b.field)
		if r != nil {
			r.Close()
		}
	}
	ok := grudge.Config{Hi: 1}
	for _, b := range []struct {
		rc    grudge.RotatorConfig
		field string
	}{
		{grudge.RotatorConfig{Sketch: ok, Generations: 1, Period: time.Second}, "Generations"},
		{grudge.RotatorConfig{Sketch: ok, Generations: 1025, Period: time.Second}, "Generations"},
		{grudge.RotatorConfig{Sketch: ok}, "Period"},
		{grudge.RotatorConfig{Sketch: ok, Period: -time.Second}, "Period"},
		{grudge.RotatorConfig{Sketch: ok, Period: time.Microsecond}, "Period"},
	} {
		_, err := grudge.NewRotator(b.rc)
		check(fmt.Sprintf("NewRotator %+v", b.rc), err, "rotator: ", b.field)
	}
	for i, c := range []grudge.Config{
		{Hi: 1, Levels: 8}, {Hi: 1, Levels: 1, CellsPerLevel: 1}, {Lo: -1, Hi: 0}, {Lo: 0, Hi: math.MaxFloat32},
		{Lo: -math.MaxFloat32, Hi: 0}, {Lo: 0, Hi: inf, Decay: grudge.Exponential(1)},
		{Lo: math.Inf(-1), Hi: inf, Decay: grudge.Linear(1)}, {Lo: -5e-324, Hi: 5e-324},
	} {
		if _, err := grudge.New(c); err != nil {
			t.Errorf("valid config %d %+v refused: %v", i, c, err)
		}
	}
}
