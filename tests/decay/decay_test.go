package decay_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/law"
)

// maxGap is the largest gap the property tests draw: 3 hours in ms.
const maxGap = 3 * 3600 * 1000

// lawCase describes one provided law for the property tests: how to draw it
// and how far the composition law may be off.
type lawCase struct {
	name string
	gen  *rapid.Generator[decay.Decay]
	// composeTol bounds |Apply(Apply(s,a),b) - Apply(s,a+b)| given s and the
	// one-step result.
	composeTol func(s, want float64) float64
}

var lawCases = []lawCase{
	{
		name: "law=exponential",
		gen: rapid.Custom(func(t *rapid.T) decay.Decay {
			return decay.Exponential(rapid.Float64Range(1e-4, 50).Draw(t, "lambda"))
		}),
		composeTol: func(_, want float64) float64 { return 1e-9*math.Abs(want) + 1e-9 },
	},
	{
		name: "law=linear",
		gen: rapid.Custom(func(t *rapid.T) decay.Decay {
			return decay.Linear(rapid.Float64Range(1e-3, 1e4).Draw(t, "rate"))
		}),
		composeTol: func(s, _ float64) float64 { return 1e-9 * math.Abs(s) },
	},
	{
		name:       "law=none",
		gen:        rapid.Just(decay.None()),
		composeTol: func(float64, float64) float64 { return 0 },
	},
}

// scores draws scores in ±1e6, with the edges and zeros drawn often.
func scores() *rapid.Generator[float64] {
	return rapid.OneOf(
		rapid.Float64Range(-1e6, 1e6),
		rapid.SampledFrom([]float64{0, math.Copysign(0, -1), 1e6, -1e6, 1, -1, 5e-324, -5e-324}),
	)
}

// gaps draws gaps in [0, 3h] ms, with short gaps drawn often.
func gaps() *rapid.Generator[int64] {
	return rapid.OneOf(
		rapid.Int64Range(0, maxGap),
		rapid.Int64Range(0, 2000),
	)
}

func sign(x float64) int {
	switch {
	case x > 0:
		return 1
	case x < 0:
		return -1
	}
	return 0
}

func TestCompose(t *testing.T) {
	for _, lc := range lawCases {
		t.Run(lc.name, func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				d := lc.gen.Draw(t, "law")
				s := scores().Draw(t, "s")
				a := gaps().Draw(t, "a")
				b := gaps().Draw(t, "b")
				got := d.Apply(d.Apply(s, a), b)
				want := d.Apply(s, a+b)
				if diff := math.Abs(got - want); !(diff <= lc.composeTol(s, want)) {
					t.Fatalf("Apply(Apply(%v, %d), %d) = %v, Apply(%v, %d) = %v: off by %g",
						s, a, b, got, s, a+b, want, diff)
				}
			})
		})
	}
}

func TestMonotoneTowardZero(t *testing.T) {
	for _, lc := range lawCases {
		t.Run(lc.name, func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				d := lc.gen.Draw(t, "law")
				s := scores().Draw(t, "s")
				dt1 := gaps().Draw(t, "dt1")
				dt2 := dt1 + gaps().Draw(t, "extra")
				v1, v2 := d.Apply(s, dt1), d.Apply(s, dt2)
				if !(math.Abs(v1) <= math.Abs(s)) {
					t.Fatalf("|Apply(%v, %d)| = |%v| > |s|", s, dt1, v1)
				}
				if !(math.Abs(v2) <= math.Abs(v1)) {
					t.Fatalf("not non-increasing in dt: |Apply(%v, %d)| = %v > |Apply(%v, %d)| = %v",
						s, dt2, math.Abs(v2), s, dt1, math.Abs(v1))
				}
			})
		})
	}
}

func TestNeverCrossesZero(t *testing.T) {
	for _, lc := range lawCases {
		t.Run(lc.name, func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				d := lc.gen.Draw(t, "law")
				s := scores().Draw(t, "s")
				dt := rapid.OneOf(gaps(), rapid.Int64Min(0)).Draw(t, "dt")
				v := d.Apply(s, dt)
				if g := sign(v); g != 0 && g != sign(s) {
					t.Fatalf("Apply(%v, %d) = %v crosses zero", s, dt, v)
				}
			})
		})
	}
}

func TestNonPositiveGapIsIdentity(t *testing.T) {
	for _, lc := range lawCases {
		t.Run(lc.name, func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				d := lc.gen.Draw(t, "law")
				s := rapid.OneOf(scores(), rapid.Float64()).Draw(t, "s")
				dt := rapid.OneOf(
					rapid.Int64Max(0),
					rapid.Int64Range(-maxGap, 0),
					rapid.Just(int64(math.MinInt64)),
				).Draw(t, "dt")
				if v := d.Apply(s, dt); math.Float64bits(v) != math.Float64bits(s) {
					t.Fatalf("Apply(%v, %d) = %v, want %v unchanged", s, dt, v, s)
				}
			})
		})
	}
}

// TestNaN checks the documented "NaN in gives NaN out".
func TestNaN(t *testing.T) {
	laws := []decay.Decay{decay.None(), decay.Exponential(1), decay.Linear(1)}
	for _, d := range laws {
		for _, dt := range []int64{math.MinInt64, -1, 0, 1, 1000, math.MaxInt64} {
			if v := d.Apply(math.NaN(), dt); !math.IsNaN(v) {
				t.Errorf("%T.Apply(NaN, %d) = %v, want NaN", d, dt, v)
			}
		}
	}
}

// TestKnownValues pins a few exact results so that a law that is
// self-consistent but wrong (wrong units, wrong base) is caught.
func TestKnownValues(t *testing.T) {
	tests := []struct {
		name  string
		d     decay.Decay
		s     float64
		dt    int64
		want  float64
		relTo float64
	}{
		{"exponential/one-second", decay.Exponential(1), 100, 1000, 100 * math.Exp(-1), 1e-15},
		{"exponential/half-life", decay.Exponential(math.Ln2 / 10), 80, 10_000, 40, 1e-14},
		{"exponential/negative", decay.Exponential(2), -8, 500, -8 * math.Exp(-1), 1e-15},
		{"linear/partial", decay.Linear(2), 10, 1500, 7, 0},
		{"linear/negative", decay.Linear(2), -10, 1500, -7, 0},
		{"linear/stops-at-zero", decay.Linear(2), 10, 60_000, 0, 0},
		{"linear/negative-stops-at-zero", decay.Linear(2), -10, 60_000, 0, 0},
		{"none", decay.None(), -3.5, 1 << 40, -3.5, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.d.Apply(tt.s, tt.dt)
			if math.Abs(got-tt.want) > tt.relTo*math.Abs(tt.want) {
				t.Fatalf("Apply(%v, %d) = %v, want %v", tt.s, tt.dt, got, tt.want)
			}
		})
	}
}

// custom is a law outside the package, without Validator or Drainer.
type custom struct{ factor float64 }

func (c custom) Apply(s float64, dt int64) float64 {
	if dt <= 0 {
		return s
	}
	return s * c.factor
}

// customFull implements Validator and Drainer as well.
type customFull struct {
	custom
	err    error
	drains bool
}

func (c customFull) Validate() error { return c.err }
func (c customFull) Drains() bool    { return c.drains }

func TestValidate(t *testing.T) {
	errCustom := errors.New("custom: broken")
	tests := []struct {
		name    string
		d       decay.Decay
		wantErr bool
		bad     string // must appear in the message
	}{
		{"nil", nil, false, ""},
		{"none", decay.None(), false, ""},
		{"exponential/valid", decay.Exponential(0.5), false, ""},
		{"exponential/tiny", decay.Exponential(5e-324), false, ""},
		{"exponential/zero", decay.Exponential(0), true, "0"},
		{"exponential/negative", decay.Exponential(-1), true, "-1"},
		{"exponential/nan", decay.Exponential(math.NaN()), true, "NaN"},
		{"exponential/+inf", decay.Exponential(math.Inf(1)), true, "+Inf"},
		{"exponential/-inf", decay.Exponential(math.Inf(-1)), true, "-Inf"},
		{"linear/valid", decay.Linear(3), false, ""},
		{"linear/zero", decay.Linear(0), true, "0"},
		{"linear/negative", decay.Linear(-1), true, "-1"},
		{"linear/nan", decay.Linear(math.NaN()), true, "NaN"},
		{"linear/+inf", decay.Linear(math.Inf(1)), true, "+Inf"},
		{"custom/no-validator", custom{0.5}, false, ""},
		{"custom/validator-ok", customFull{custom: custom{0.5}}, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := law.Validate(tt.d)
			if !tt.wantErr {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate = nil, want an error")
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "decay: ") {
				t.Errorf("message %q lacks the \"decay: \" prefix", msg)
			}
			if !strings.HasSuffix(msg, "got "+tt.bad) {
				t.Errorf("message %q does not name the bad value %s", msg, tt.bad)
			}
		})
	}
	t.Run("custom/validator-error", func(t *testing.T) {
		if err := law.Validate(customFull{err: errCustom}); err != errCustom {
			t.Fatalf("Validate = %v, want the law's own error %v", err, errCustom)
		}
	})
}

func TestParams(t *testing.T) {
	tests := []struct {
		name      string
		d         decay.Decay
		wantKind  law.Kind
		wantParam float64
	}{
		{"nil", nil, law.KindNone, 0},
		{"none", decay.None(), law.KindNone, 0},
		{"exponential", decay.Exponential(0.25), law.KindExponential, 0.25},
		{"linear", decay.Linear(7), law.KindLinear, 7},
		{"custom", custom{0.5}, law.KindCustom, 0},
		{"custom-full", customFull{custom: custom{0.5}, drains: true}, law.KindCustom, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, p := law.Params(tt.d)
			if k != tt.wantKind || p != tt.wantParam {
				t.Fatalf("Params = (%v, %v), want (%v, %v)", k, p, tt.wantKind, tt.wantParam)
			}
		})
	}
}

func TestDrains(t *testing.T) {
	tests := []struct {
		name string
		d    decay.Decay
		want bool
	}{
		{"nil", nil, false},
		{"none", decay.None(), false},
		{"exponential", decay.Exponential(1e-4), true},
		{"linear", decay.Linear(1e-3), true},
		{"custom/probe-shrinks", custom{0.5}, true},
		{"custom/probe-keeps", custom{1}, false},
		{"custom/drainer-true", customFull{custom: custom{1}, drains: true}, true},
		{"custom/drainer-false", customFull{custom: custom{0.5}, drains: false}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := law.Drains(tt.d); got != tt.want {
				t.Fatalf("Drains = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestKindString(t *testing.T) {
	tests := []struct {
		k    law.Kind
		want string
	}{
		{law.KindCustom, "custom"},
		{law.KindNone, "none"},
		{law.KindExponential, "exponential"},
		{law.KindLinear, "linear"},
		{law.Kind(200), "custom"},
	}
	for _, tt := range tests {
		if got := tt.k.String(); got != tt.want {
			t.Errorf("Kind(%d).String() = %q, want %q", uint8(tt.k), got, tt.want)
		}
	}
}
