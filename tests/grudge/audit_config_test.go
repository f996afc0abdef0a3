package grudge_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
)

// TestAuditConfigValidation: grudge's validation rules (NaN, Lo >= Hi,
// Lo <= 0 <= Hi violated, Hi = +Inf without a draining decay, invalid law
// parameters, Levels/CellsPerLevel out of range) are refused by New and
// NewRotator (lazy and ticker-driven) with a "sketch: " *ConfigError that
// names the field and matches ErrInvalidConfig; the edge cases that are
// valid are accepted.
func TestAuditConfigValidation(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	bad := []struct {
		cfg   grudge.Config
		field string
	}{
		{grudge.Config{Lo: nan, Hi: 1}, "Lo"},
		{grudge.Config{Lo: 0, Hi: nan}, "Hi"},
		{grudge.Config{Lo: 1, Hi: 1}, "Hi"},
		{grudge.Config{Lo: 2, Hi: 1}, "Hi"},
		{grudge.Config{Lo: -1, Hi: -1}, "Hi"},
		{grudge.Config{Lo: 0.5, Hi: 1}, "Lo"},
		{grudge.Config{Lo: -2, Hi: -1}, "Hi"},
		{grudge.Config{Lo: 0, Hi: 0}, "Hi"},
		{grudge.Config{Lo: 0, Hi: inf}, "Hi"},
		{grudge.Config{Lo: 0, Hi: inf, Decay: grudge.None}, "Hi"},
		{grudge.Config{Lo: -inf, Hi: 1, Decay: grudge.None}, "Lo"},
		{grudge.Config{Lo: inf, Hi: inf, Decay: grudge.Linear(1)}, "Hi"},
		{grudge.Config{Lo: -inf, Hi: -inf, Decay: grudge.Linear(1)}, "Hi"},
		{grudge.Config{Hi: 1, Levels: 9}, "Levels"},
		{grudge.Config{Hi: 1, Levels: math.MaxUint32}, "Levels"},
		{grudge.Config{Hi: 1, CellsPerLevel: 1<<30 + 1}, "CellsPerLevel"},
		{grudge.Config{Hi: 1, CellsPerLevel: math.MaxUint32}, "CellsPerLevel"},
		{grudge.Config{Hi: 1, Decay: grudge.Exponential(0)}, "Decay"},
		{grudge.Config{Hi: 1, Decay: grudge.Exponential(-1)}, "Decay"},
		{grudge.Config{Hi: 1, Decay: grudge.Exponential(nan)}, "Decay"},
		{grudge.Config{Hi: 1, Decay: grudge.Exponential(inf)}, "Decay"},
		{grudge.Config{Hi: 1, Decay: grudge.Linear(0)}, "Decay"},
		{grudge.Config{Hi: 1, Decay: grudge.Linear(-3)}, "Decay"},
		{grudge.Config{Hi: 1, Decay: grudge.Linear(nan)}, "Decay"},
		{grudge.Config{Hi: 1, Decay: grudge.Linear(inf)}, "Decay"},
	}
	check := func(what string, err error, field string) {
		t.Helper()
		var ce *grudge.ConfigError
		switch {
		case err == nil:
			t.Errorf("%s: no error", what)
		case !errors.Is(err, grudge.ErrInvalidConfig) || !errors.As(err, &ce):
			t.Errorf("%s: %v is not a *ConfigError matching ErrInvalidConfig", what, err)
		case !strings.HasPrefix(err.Error(), "sketch: "):
			t.Errorf("%s: %q does not start with \"sketch: \"", what, err)
		case !strings.HasSuffix(ce.Field, field) || !strings.Contains(err.Error(), field):
			t.Errorf("%s: Field %q, message %q; want field %s named", what, ce.Field, err, field)
		}
	}
	for _, c := range bad {
		what := fmt.Sprintf("New(%+v)", c.cfg)
		s, err := grudge.New(c.cfg)
		if s != nil {
			t.Errorf("%s returned a sketch with error %v", what, err)
		}
		check(what, err, c.field)
		_, err = grudge.NewRotator(grudge.RotatorConfig{Sketch: c.cfg, Period: time.Second})
		check("NewRotator/"+what, err, c.field)
		ft := grudgetest.NewFakeTicker()
		_, err = grudge.NewRotator(grudge.RotatorConfig{Sketch: c.cfg, Ticker: ft})
		check("NewRotator(ticker)/"+what, err, c.field)
	}
	good := []grudge.Config{
		{Lo: 0, Hi: 1},
		{Lo: -1, Hi: 0},
		{Lo: -math.SmallestNonzeroFloat64, Hi: math.SmallestNonzeroFloat64},
		{Lo: 0, Hi: inf, Decay: grudge.Exponential(1)},
		{Lo: -inf, Hi: inf, Decay: grudge.Linear(1)},
		{Lo: 0, Hi: 1, Levels: 8, CellsPerLevel: 1},
		{Lo: 0, Hi: 1, Levels: 1, CellsPerLevel: 3},
		{Lo: 0, Hi: math.MaxFloat32},
	}
	for _, c := range good {
		if _, err := grudge.New(c); err != nil {
			t.Errorf("New(%+v): %v", c, err)
		}
	}
	// Rotator-only fields.
	for _, rc := range []grudge.RotatorConfig{
		{Sketch: grudge.Config{Hi: 1}, Generations: 1, Period: time.Second},
		{Sketch: grudge.Config{Hi: 1}},
		{Sketch: grudge.Config{Hi: 1}, Period: -time.Second},
		{Sketch: grudge.Config{Hi: 1}, Period: 500 * time.Microsecond},
	} {
		_, err := grudge.NewRotator(rc)
		var ce *grudge.ConfigError
		if !errors.Is(err, grudge.ErrInvalidConfig) || !errors.As(err, &ce) || !strings.HasPrefix(err.Error(), "rotator: ") {
			t.Errorf("NewRotator(%+v) = %v; want a \"rotator: \" *ConfigError", rc, err)
		}
	}
	ft := grudgetest.NewFakeTicker()
	r, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: grudge.Config{Hi: 1}, Ticker: ft})
	if err != nil {
		t.Fatalf("a Ticker without a Period: %v", err)
	}
	r.Close()
}
