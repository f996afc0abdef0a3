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

// a87Identity is a custom law that never decays (it does not drain).
type a87Identity struct{}

func (a87Identity) Apply(s float64, _ int64) float64 { return s }

// a87Halving is a conforming custom law that halves a score each second
// and does not say whether it drains (New probes it).
type a87Halving struct{}

func (a87Halving) Apply(s float64, dt int64) float64 {
	if dt <= 0 {
		return s
	}
	return s * math.Exp2(-float64(dt)/1000)
}

// TestAudit87SkConfigErrors: API.md, "Invalid Config: a *ConfigError
// naming the field and value, matched by errors.Is(err,
// ErrInvalidConfig)", "Hi = +Inf only with a decay that drains", and
// decay's "Invalid parameters (NaN, Inf, <= 0) are reported by sketch.New
// as an error naming the field"; the reference (API.md: "Same Config,
// same methods, same semantics") refuses the same configurations naming
// the same field. The accepted edges are accepted by both.
func TestAudit87SkConfigErrors(t *testing.T) {
	base := func(f func(*sketch.Config)) sketch.Config {
		c := sketch.Config{Levels: 2, CellsPerLevel: 16, Hi: 10}
		f(&c)
		return c
	}
	bad := []struct {
		name  string
		cfg   sketch.Config
		field string
		value any
	}{
		{"Levels 9", base(func(c *sketch.Config) { c.Levels = 9 }), "Levels", uint32(9)},
		{"CellsPerLevel 2^30+1", base(func(c *sketch.Config) { c.CellsPerLevel = 1<<30 + 1 }), "CellsPerLevel", uint32(1<<30 + 1)},
		{"Hi 0", base(func(c *sketch.Config) { c.Hi = 0 }), "Hi", 0.0},
		{"Hi NaN", base(func(c *sketch.Config) { c.Hi = math.NaN() }), "Hi", math.NaN()},
		{"Lo NaN", base(func(c *sketch.Config) { c.Lo = math.NaN() }), "Lo", math.NaN()},
		{"Lo 1", base(func(c *sketch.Config) { c.Lo = 1 }), "Lo", 1.0},
		{"Hi -1", base(func(c *sketch.Config) { c.Lo, c.Hi = -5, -1 }), "Hi", -1.0},
		{"Hi past float32", base(func(c *sketch.Config) { c.Hi = 4e38 }), "Hi", 4e38},
		{"Lo past float32", base(func(c *sketch.Config) { c.Lo = -4e38 }), "Lo", -4e38},
		{"Hi +Inf none", base(func(c *sketch.Config) { c.Hi = math.Inf(1) }), "Hi", math.Inf(1)},
		{"Hi +Inf identity law", base(func(c *sketch.Config) { c.Hi, c.Decay = math.Inf(1), a87Identity{} }), "Hi", math.Inf(1)},
		{"Lo -Inf none", base(func(c *sketch.Config) { c.Lo = math.Inf(-1) }), "Lo", math.Inf(-1)},
		{"Exponential NaN", base(func(c *sketch.Config) { c.Decay = decay.Exponential(math.NaN()) }), "Decay", nil},
		{"Exponential 0", base(func(c *sketch.Config) { c.Decay = decay.Exponential(0) }), "Decay", nil},
		{"Linear -1", base(func(c *sketch.Config) { c.Decay = decay.Linear(-1) }), "Decay", nil},
		{"Linear +Inf", base(func(c *sketch.Config) { c.Decay = decay.Linear(math.Inf(1)) }), "Decay", nil},
		{"Aggregator 3", base(func(c *sketch.Config) { c.Aggregator = 3 }), "Aggregator", sketch.Aggregator(3)},
		{"MaxBytes -1", base(func(c *sketch.Config) { c.MaxBytes = -1 }), "MaxBytes", int64(-1)},
	}
	for _, c := range bad {
		for _, impl := range []string{"sketch", "reference"} {
			var err error
			if impl == "sketch" {
				_, err = sketch.New(c.cfg)
			} else {
				_, err = reference.New(c.cfg)
			}
			var ce *sketch.ConfigError
			switch {
			case err == nil:
				t.Errorf("%s %s: accepted", impl, c.name)
				continue
			case !errors.As(err, &ce):
				t.Errorf("%s %s: %T %v, want *sketch.ConfigError", impl, c.name, err, err)
				continue
			case !errors.Is(err, sketch.ErrInvalidConfig):
				t.Errorf("%s %s: not errors.Is ErrInvalidConfig", impl, c.name)
			}
			if ce.Field != c.field {
				t.Errorf("%s %s: Field %q, want %q (%v)", impl, c.name, ce.Field, c.field, err)
			}
			if c.value != nil && fmt.Sprint(ce.Value) != fmt.Sprint(c.value) {
				t.Errorf("%s %s: Value %#v, want %#v", impl, c.name, ce.Value, c.value)
			}
			if c.value == nil && fmt.Sprintf("%#v", ce.Value) != fmt.Sprintf("%#v", c.cfg.Decay) {
				t.Errorf("%s %s: Value %#v, want the law %#v", impl, c.name, ce.Value, c.cfg.Decay)
			}
			if !strings.HasPrefix(err.Error(), "sketch: ") {
				t.Errorf("%s %s: message %q lacks the sketch: prefix", impl, c.name, err)
			}
		}
	}
	good := []struct {
		name string
		cfg  sketch.Config
	}{
		{"Hi MaxFloat32", base(func(c *sketch.Config) { c.Hi = math.MaxFloat32 })},
		{"Lo -MaxFloat32", base(func(c *sketch.Config) { c.Lo = -math.MaxFloat32 })},
		{"Hi +Inf linear", base(func(c *sketch.Config) { c.Hi, c.Decay = math.Inf(1), decay.Linear(1) })},
		{"Hi +Inf exponential", base(func(c *sketch.Config) { c.Hi, c.Decay = math.Inf(1), decay.Exponential(1e-9) })},
		{"Hi +Inf halving law", base(func(c *sketch.Config) { c.Hi, c.Decay = math.Inf(1), a87Halving{} })},
		{"Lo -Inf, Hi +Inf linear", base(func(c *sketch.Config) { c.Lo, c.Hi, c.Decay = math.Inf(-1), math.Inf(1), decay.Linear(1) })},
		{"Lo -1, Hi 0", base(func(c *sketch.Config) { c.Lo, c.Hi = -1, 0 })},
		{"Levels 8, M 2^10", base(func(c *sketch.Config) { c.Levels, c.CellsPerLevel = 8, 1<<10 })},
	}
	for _, c := range good {
		if _, err := sketch.New(c.cfg); err != nil {
			t.Errorf("sketch %s: %v", c.name, err)
		}
		if _, err := reference.New(c.cfg); err != nil {
			t.Errorf("reference %s: %v", c.name, err)
		}
	}
}

// TestAudit87SkExtremeFiniteInputs: "no cell is ever left holding NaN or
// Inf" under finite inputs at the float64 range's ends (±MaxFloat64
// deltas and limits, subnormal deltas), with infinite bounds ("with Hi =
// +Inf a score saturates at MaxFloat32 (3.4e38), as if Hi were
// MaxFloat32") and finite ones, under each law; TryUpdate decides as
// aggregate + delta <= limit on the aggregate a Query reads at the same
// time, whatever overflow that sum has; no call panics.
func TestAudit87SkExtremeFiniteInputs(t *testing.T) {
	laws := []decay.Decay{decay.Linear(1), decay.Exponential(1e-3), a87Halving{}}
	huge := []float64{math.MaxFloat64, -math.MaxFloat64, math.MaxFloat32, -math.MaxFloat32, 5e-324, -5e-324, 1e300, -1e300, 0}
	for _, law := range laws {
		for _, b := range [][2]float64{{math.Inf(-1), math.Inf(1)}, {-math.MaxFloat32, math.MaxFloat32}, {0, math.Inf(1)}, {-1, 1}} {
			name := fmt.Sprintf("%T/[%g,%g]", law, b[0], b[1])
			clk := sketchtest.NewFakeClock()
			clk.Set(1_000_000)
			s, err := sketch.New(sketch.Config{Levels: 3, CellsPerLevel: 8, Lo: b[0], Hi: b[1], Decay: law, Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			hi := math.Min(b[1], math.MaxFloat32)
			lo := math.Max(b[0], -math.MaxFloat32)
			check := func(what string) {
				t.Helper()
				for k := range 4 {
					det := s.QueryDetailed([]byte{'k', byte(k)})
					for _, l := range det.Levels {
						if math.IsNaN(l.Score) || math.IsInf(l.Score, 0) || l.Score > hi || l.Score < lo {
							t.Fatalf("%s after %s: key %d level %d holds %v", name, what, k, l.Level, l.Score)
						}
					}
				}
			}
			for i, d := range huge {
				k := []byte{'k', byte(i % 4)}
				s.Update(k, d)
				check(fmt.Sprintf("Update(%g)", d))
				if got := s.UpdateAndQuery(k, d); math.IsNaN(got) || math.IsInf(got, 0) {
					t.Fatalf("%s: UpdateAndQuery(%g) = %v", name, d, got)
				}
				for _, limit := range huge {
					q := s.Query(k)
					ok := s.TryUpdate(k, d, limit)
					if want := q+d <= limit; ok != want {
						t.Errorf("%s: TryUpdate(%g, %g) = %v on an aggregate of %v", name, d, limit, ok, q)
					}
					check(fmt.Sprintf("TryUpdate(%g, %g)", d, limit))
				}
				clk.Advance(time.Duration(1+i*997) * time.Millisecond)
			}
			if b[1] > math.MaxFloat32 {
				s.UpdateString("sat", math.MaxFloat64)
				if q := s.QueryString("sat"); q != math.MaxFloat32 {
					t.Errorf("%s: a key past 3.4e38 reads %v, want MaxFloat32", name, q)
				}
			}
		}
	}
}
