package sketch_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/reference"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAuditEdgeInvalidDecayParams: invalid law parameters (NaN, ±Inf,
// <= 0) are a *ConfigError naming the field Decay and the value.
func TestAuditEdgeInvalidDecayParams(t *testing.T) {
	bad := []float64{math.NaN(), math.Inf(1), math.Inf(-1), 0, math.Copysign(0, -1), -1, -5e-324, -math.MaxFloat64}
	for _, v := range bad {
		for _, d := range []decay.Decay{decay.Exponential(v), decay.Linear(v)} {
			_, err := sketch.New(sketch.Config{Levels: 2, CellsPerLevel: 8, Decay: d, Hi: 10})
			var ce *sketch.ConfigError
			if err == nil || !errors.As(err, &ce) || !errors.Is(err, sketch.ErrInvalidConfig) {
				t.Errorf("New with %#v: err = %v; want a *ConfigError", d, err)
				continue
			}
			if ce.Field != "Decay" || !strings.HasPrefix(err.Error(), "sketch:") || !strings.Contains(err.Error(), fmt.Sprint(v)) {
				t.Errorf("New with %#v: Field %q, message %q; want Field Decay and the value %v", d, ce.Field, err, v)
			}
			if _, rerr := reference.New(sketch.Config{Levels: 2, CellsPerLevel: 8, Decay: d, Hi: 10}); rerr == nil || rerr.Error() != err.Error() {
				t.Errorf("reference.New with %#v: %v; want sketch.New's %v", d, rerr, err)
			}
		}
	}
	// Valid extremes are accepted and never produce NaN/Inf.
	for _, d := range []decay.Decay{decay.Exponential(5e-324), decay.Exponential(math.MaxFloat64), decay.Linear(5e-324), decay.Linear(math.MaxFloat64)} {
		clk := sketchtest.NewFakeClock()
		s, err := sketch.New(sketch.Config{Levels: 2, CellsPerLevel: 8, Decay: d, Lo: -100, Hi: 100, Clock: clk})
		if err != nil {
			t.Fatalf("New with valid %#v: %v", d, err)
		}
		s.UpdateString("k", 50)
		s.UpdateString("n", -50)
		for _, step := range []time.Duration{time.Millisecond, time.Second, 30 * 24 * time.Hour, 3 * 365 * 24 * time.Hour} {
			clk.Advance(step)
			for _, k := range []string{"k", "n"} {
				v := s.QueryString(k)
				if math.IsNaN(v) || math.IsInf(v, 0) || v < -100 || v > 100 {
					t.Errorf("%#v: Query(%s) after %v = %v", d, k, step, v)
				}
			}
		}
	}
}

// TestAuditEdgeBoundsOutsideFloat32: a finite bound beyond the float32
// range is refused naming it; ±Inf needs a draining law.
func TestAuditEdgeBoundsOutsideFloat32(t *testing.T) {
	cases := []struct {
		cfg   sketch.Config
		field string
	}{
		{sketch.Config{Hi: 1e39}, "Hi"},
		{sketch.Config{Lo: -1e39, Hi: 1}, "Lo"},
		{sketch.Config{Hi: math.Inf(1)}, "Hi"},
		{sketch.Config{Lo: math.Inf(-1), Hi: 1}, "Lo"},
		{sketch.Config{Hi: math.Inf(1), Decay: growLaw{}}, "Hi"},
		{sketch.Config{Lo: math.NaN(), Hi: 1}, "Lo"},
		{sketch.Config{Lo: 1, Hi: 2}, "Lo"},
		{sketch.Config{Lo: -2, Hi: -1}, "Hi"},
	}
	for _, c := range cases {
		c.cfg.Levels, c.cfg.CellsPerLevel = 2, 8
		_, err := sketch.New(c.cfg)
		var ce *sketch.ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field || !errors.Is(err, sketch.ErrInvalidConfig) {
			t.Errorf("New(Lo=%v, Hi=%v, Decay=%v) = %v; want a ConfigError on %s", c.cfg.Lo, c.cfg.Hi, c.cfg.Decay, err, c.field)
		}
	}
	// Hi = +Inf with a draining law saturates at MaxFloat32, finite.
	clk := sketchtest.NewFakeClock()
	s, err := sketch.New(sketch.Config{Levels: 2, CellsPerLevel: 8, Decay: decay.Exponential(1), Lo: math.Inf(-1), Hi: math.Inf(1), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	s.UpdateString("k", math.MaxFloat64)
	s.UpdateString("k", math.MaxFloat64)
	if v := s.QueryString("k"); v != math.MaxFloat32 {
		t.Errorf("Query after +MaxFloat64 twice = %v; want MaxFloat32", v)
	}
	s.UpdateString("n", -math.MaxFloat64)
	if v := s.QueryString("n"); v != -math.MaxFloat32 {
		t.Errorf("Query after -MaxFloat64 = %v; want -MaxFloat32", v)
	}
	clk.Advance(time.Second)
	if v := s.UpdateAndQueryString("k", -math.MaxFloat64); math.IsNaN(v) || math.IsInf(v, 0) {
		t.Errorf("UpdateAndQuery = %v", v)
	}
}

// growLaw is a custom law that never drains (identity): it must not be
// accepted with an infinite bound.
type growLaw struct{}

func (growLaw) Apply(s float64, dt int64) float64 { return s }
