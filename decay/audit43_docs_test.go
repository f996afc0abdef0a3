package decay_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
)

// decay/doc.go, "Guarantees of the provided laws".
func TestAudit43ProvidedLawGuarantees(t *testing.T) {
	laws := map[string]decay.Decay{
		"exp":    decay.Exponential(0.7),
		"lin":    decay.Linear(3),
		"none":   decay.None(),
		"expBig": decay.Exponential(1e6),
		"linBig": decay.Linear(1e300),
	}
	scores := []float64{0, 1, -1, 5e-324, -5e-324, 1e30, -1e30, math.MaxFloat64, -math.MaxFloat64, 0.5}
	dts := []int64{math.MinInt64, -1, 0, 1, 7, 1000, 1 << 24, 1<<24 + 1, 1 << 40, math.MaxInt64}
	for name, d := range laws {
		for _, s := range scores {
			for _, dt := range dts {
				got := d.Apply(s, dt)
				if dt <= 0 && got != s {
					t.Errorf("%s.Apply(%v, %d) = %v; doc: dt <= 0 returns the score unchanged", name, s, dt, got)
				}
				if math.Abs(got) > math.Abs(s) {
					t.Errorf("%s.Apply(%v, %d) = %v grows; doc: |Apply| <= |s|", name, s, dt, got)
				}
				if (s > 0 && got < 0) || (s < 0 && got > 0) || math.IsNaN(got) {
					t.Errorf("%s.Apply(%v, %d) = %v flips sign", name, s, dt, got)
				}
			}
			if !math.IsNaN(d.Apply(math.NaN(), 5)) {
				t.Errorf("%s: NaN in did not give NaN out", name)
			}
		}
	}
	// Half-life ln(2)/lambda seconds.
	lambda := 0.5
	hl := int64(math.Round(math.Ln2 / lambda * 1000))
	if got := decay.Exponential(lambda).Apply(8, hl); math.Abs(got-4) > 1e-3 {
		t.Errorf("Exponential(%v) after ln2/lambda s: %v, want 4", lambda, got)
	}
	// Linear(rate) moves toward 0 by rate per second and stops at 0.
	if got := decay.Linear(3).Apply(10, 2000); got != 4 {
		t.Errorf("Linear(3).Apply(10, 2s) = %v, want 4", got)
	}
	if got := decay.Linear(3).Apply(-10, 2000); got != -4 {
		t.Errorf("Linear(3).Apply(-10, 2s) = %v, want -4", got)
	}
	if got := decay.Linear(3).Apply(10, 5000); got != 0 {
		t.Errorf("Linear past zero = %v, want 0", got)
	}
	// Composition.
	for name, d := range laws {
		for _, ab := range [][2]int64{{1, 1}, {300, 700}, {1 << 20, 1 << 21}} {
			one := d.Apply(d.Apply(123.5, ab[0]), ab[1])
			two := d.Apply(123.5, ab[0]+ab[1])
			if math.Abs(one-two) > 1e-9*math.Max(1, math.Abs(two)) {
				t.Errorf("%s: Apply(Apply(s,%d),%d) = %v, Apply(s,%d) = %v", name, ab[0], ab[1], one, ab[0]+ab[1], two)
			}
		}
	}
}

// "Constructors never fail: invalid parameters (NaN, Inf, <= 0) are
// reported by sketch.New as a *sketch.ConfigError naming the value."
func TestAudit43InvalidParamsReportedByNew(t *testing.T) {
	bad := map[string]decay.Decay{
		"Exponential(NaN)":  decay.Exponential(math.NaN()),
		"Exponential(+Inf)": decay.Exponential(math.Inf(1)),
		"Exponential(0)":    decay.Exponential(0),
		"Exponential(-1)":   decay.Exponential(-1),
		"Linear(NaN)":       decay.Linear(math.NaN()),
		"Linear(+Inf)":      decay.Linear(math.Inf(1)),
		"Linear(0)":         decay.Linear(0),
		"Linear(-2)":        decay.Linear(-2),
	}
	for name, d := range bad {
		_, err := sketch.New(sketch.Config{Hi: 10, Decay: d})
		var ce *sketch.ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, sketch.ErrInvalidConfig) {
			t.Errorf("%s: New err %v, doc: *sketch.ConfigError", name, err)
			continue
		}
		if !strings.HasPrefix(err.Error(), "sketch: ") {
			t.Errorf("%s: err %q not prefixed sketch: ", name, err)
		}
	}
	// ±Inf bound only with a law that drains.
	if _, err := sketch.New(sketch.Config{Hi: math.Inf(1), Decay: decay.None()}); !errors.Is(err, sketch.ErrInvalidConfig) {
		t.Errorf("Hi=+Inf with None accepted: %v", err)
	}
	for _, d := range []decay.Decay{decay.Linear(1), decay.Exponential(1)} {
		if _, err := sketch.New(sketch.Config{Hi: math.Inf(1), Decay: d}); err != nil {
			t.Errorf("Hi=+Inf with a draining law refused: %v", err)
		}
	}
}
