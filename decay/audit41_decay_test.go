package decay_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

func a41Laws() []decay.Decay {
	return []decay.Decay{decay.None(), decay.Exponential(1e-9), decay.Exponential(0.5), decay.Exponential(math.Ln2 / 10),
		decay.Exponential(1e3), decay.Exponential(1e300), decay.Linear(1e-9), decay.Linear(3), decay.Linear(1e6), decay.Linear(1e300),
		decay.Linear(math.MaxFloat64), decay.Exponential(math.MaxFloat64), decay.Exponential(5e-324), decay.Linear(5e-324)}
}

func a41Score(rng *rand.Rand) float64 {
	switch rng.IntN(5) {
	case 0:
		return rng.NormFloat64() * 100
	case 1:
		return math.Float64frombits(rng.Uint64() &^ (1 << 63) & 0x7fefffffffffffff) // finite positive
	case 2:
		return -math.Float64frombits(rng.Uint64() & 0x7fefffffffffffff)
	case 3:
		return []float64{0, math.Copysign(0, -1), 5e-324, -5e-324, math.MaxFloat64, -math.MaxFloat64, math.MaxFloat32, 1, -1}[rng.IntN(9)]
	default:
		return float64(math.Float32frombits(rng.Uint32() & 0x7f7fffff))
	}
}

func a41Dt(rng *rand.Rand) int64 {
	switch rng.IntN(5) {
	case 0:
		return rng.Int64N(2000)
	case 1:
		return rng.Int64N(1 << 40)
	case 2:
		return rng.Int64()
	case 3:
		return []int64{0, 1, 1 << 24, 1 << 31, 1<<63 - 1, -1, math.MinInt64}[rng.IntN(7)]
	default:
		return -rng.Int64N(1 << 40)
	}
}

// TestAudit41ApplyContract: for every provided law, dtMillis <= 0 is the
// identity (bit for bit), |Apply(s, dt)| <= |s| and the sign never flips
// (a result is 0 or has s's sign), NaN gives NaN, and the result is never
// NaN for a non-NaN score.
func TestAudit41ApplyContract(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 10))
	for _, d := range a41Laws() {
		for range 40000 {
			s, dt := a41Score(rng), a41Dt(rng)
			v := d.Apply(s, dt)
			if dt <= 0 {
				if math.Float64bits(v) != math.Float64bits(s) {
					t.Fatalf("%#v: Apply(%v, %d) = %v, want the score unchanged", d, s, dt, v)
				}
				continue
			}
			if math.IsNaN(v) || math.Abs(v) > math.Abs(s) || (v > 0 && !(s > 0)) || (v < 0 && !(s < 0)) {
				t.Fatalf("%#v: Apply(%v, %d) = %v: not monotone toward 0 without crossing it", d, s, dt, v)
			}
		}
		if v := d.Apply(math.NaN(), 1000); !math.IsNaN(v) {
			t.Errorf("%#v: Apply(NaN, 1000) = %v, want NaN", d, v)
		}
	}
}

// TestAudit41FixedInfScoreGivesNaN: package decay: "Monotone toward 0:
// |Apply(s, dt)| <= |s| and the sign never flips" and "NaN in gives NaN
// out" (only NaN). An infinite score under a law whose parameter x dt
// overflows float64 (lambda or rate x dt/1000 > MaxFloat64) comes out
// NaN: Exponential computes exp(log(Inf) - Inf), Linear Inf - Inf. Low
// severity: a sketch cell never holds Inf, so only direct callers of
// Apply see it.
func TestAudit41FixedInfScoreGivesNaN(t *testing.T) {
	var bad []string
	for _, d := range []decay.Decay{decay.Exponential(math.MaxFloat64), decay.Exponential(1e300), decay.Linear(math.MaxFloat64), decay.Linear(1e300)} {
		for _, inf := range []float64{math.Inf(1), math.Inf(-1)} {
			for _, dt := range []int64{1000, 1 << 40} {
				if v := d.Apply(inf, dt); math.IsNaN(v) || math.Abs(v) > math.Abs(inf) || v*inf < 0 {
					bad = append(bad, fmt.Sprintf("%#v.Apply(%v, %d) = %v", d, inf, dt, v))
				}
			}
		}
	}
	if len(bad) > 0 {
		t.Fatalf("want |Apply(s, dt)| <= |s| with s's sign (finite parameters, dt > 0); got %d violations:\n%s", len(bad), strings.Join(bad, "\n"))
	}
}

// TestAudit41Composes: Apply(Apply(s, a), b) == Apply(s, a+b) within
// float tolerance (relative 1e-9, or absolute for results near 0 and for
// linear drains computed in two products).
func TestAudit41Composes(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 11))
	worst := map[string]float64{}
	for _, d := range a41Laws() {
		name := fmt.Sprintf("%#v", d)
		for range 30000 {
			s := a41Score(rng)
			if math.IsNaN(s) {
				continue
			}
			a, b := rng.Int64N(1<<40), rng.Int64N(1<<40)
			if rng.IntN(2) == 0 {
				a, b = rng.Int64N(100000), rng.Int64N(100000)
			}
			two := d.Apply(d.Apply(s, a), b)
			one := d.Apply(s, a+b)
			diff := math.Abs(two - one)
			scale := math.Max(math.Abs(one), math.Abs(two))
			// linear: the drops rate*a/1000 + rate*b/1000 vs rate*(a+b)/1000 differ by rounding of
			// the order of ulp(s) and ulp(drop).
			tol := 1e-9*scale + 1e-300
			if strings.Contains(name, "linear") {
				tol += 4 * (math.Nextafter(math.Abs(s), math.Inf(1)) - math.Abs(s))
			}
			if diff > tol {
				t.Fatalf("%s: Apply(Apply(%v, %d), %d) = %v, Apply(%v, %d) = %v: differ by %v", name, s, a, b, two, s, a+b, one, diff)
			}
			if scale > 1e-280 {
				worst[name] = math.Max(worst[name], diff/scale)
			}
		}
	}
	t.Logf("worst relative composition error: %v", worst)
}

// TestAudit41Documented: the package examples' numbers and the laws'
// exact shapes.
func TestAudit41Documented(t *testing.T) {
	e := decay.Exponential(math.Ln2 / 10)
	if v := e.Apply(80, 10_000); math.Abs(v-40) > 1e-12 {
		t.Errorf("half-life 10 s: Apply(80, 10 s) = %v", v)
	}
	l := decay.Linear(2)
	for _, c := range [][3]float64{{10, 1500, 7}, {10, 60000, 0}, {-10, 1500, -7}, {-10, 60000, 0}, {0.001, 1, 0}} {
		if v := l.Apply(c[0], int64(c[1])); v != c[2] {
			t.Errorf("Linear(2).Apply(%v, %v) = %v, want %v", c[0], c[1], v, c[2])
		}
	}
	if v := decay.None().Apply(42, 365*24*3600*1000); v != 42 {
		t.Errorf("None: %v", v)
	}
	if v := decay.Exponential(0.5).Apply(1e300, 1<<62); v != 0 {
		t.Errorf("Exponential(0.5) after 2^62 ms: %v, want 0", v)
	}
}

// TestAudit41InvalidParams: NaN, +-Inf, 0, -0 and negative parameters are
// reported by sketch.New as a *sketch.ConfigError naming the field
// (Decay) and the offending value, matched by ErrInvalidConfig; the law's
// own error is wrapped.
func TestAudit41InvalidParams(t *testing.T) {
	for _, p := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), 0, math.Copysign(0, -1), -1, -5e-324, -math.MaxFloat64} {
		for name, d := range map[string]decay.Decay{"Exponential lambda": decay.Exponential(p), "Linear rate": decay.Linear(p)} {
			_, err := sketch.New(sketch.Config{Hi: 1, Decay: d})
			if err == nil {
				t.Errorf("%s %v: sketch.New accepted it", name, p)
				continue
			}
			var ce *sketch.ConfigError
			if !errors.As(err, &ce) || !errors.Is(err, sketch.ErrInvalidConfig) {
				t.Errorf("%s %v: error %T %v is not a *ConfigError matching ErrInvalidConfig", name, p, err, err)
				continue
			}
			if ce.Field != "Decay" || !strings.HasPrefix(err.Error(), "sketch: ") || !strings.Contains(err.Error(), name) ||
				!strings.Contains(err.Error(), fmt.Sprint(p)) || errors.Unwrap(err) == nil {
				t.Errorf("%s %v: Field %q, message %q, cause %v", name, p, ce.Field, err, errors.Unwrap(err))
			}
		}
	}
	for _, p := range []float64{5e-324, 1e-300, 1, math.MaxFloat64} {
		for _, d := range []decay.Decay{decay.Exponential(p), decay.Linear(p)} {
			if _, err := sketch.New(sketch.Config{Hi: 1, Decay: d}); err != nil {
				t.Errorf("%#v: valid parameter refused: %v", d, err)
			}
		}
	}
}

// ---- custom laws through sketch.New ----

// a41HalfLife is a conforming custom law (s * 2^(-dt/h)).
type a41HalfLife struct{ h float64 }

func (l a41HalfLife) Apply(s float64, dt int64) float64 {
	if dt <= 0 {
		return s
	}
	return s * math.Exp2(-float64(dt)/l.h)
}

// a41Watch wraps a law and records what the sketch hands it.
type a41Watch struct {
	f        func(s float64, dt int64) float64
	badCalls *atomic.Int64 // dt <= 0, or a NaN/Inf score
	calls    *atomic.Int64
}

func (w a41Watch) Apply(s float64, dt int64) float64 {
	w.calls.Add(1)
	if dt <= 0 || math.IsNaN(s) || math.IsInf(s, 0) {
		w.badCalls.Add(1)
	}
	return w.f(s, dt)
}

// TestAudit41CustomLaws: a conforming custom law decays as itself (never
// below it); faulty ones (NaN, +-Inf, growth, crossing 0) are sanitized:
// no read is NaN/Inf or below 0 for positive updates, growth reads as
// no decay, crossing reads 0; the sketch never calls a law with dt <= 0
// or a non-finite score, backwards clock steps included.
func TestAudit41CustomLaws(t *testing.T) {
	laws := map[string]func(s float64, dt int64) float64{
		"halflife": a41HalfLife{2000}.Apply,
		"nan":      func(s float64, dt int64) float64 { return math.NaN() },
		"inf":      func(s float64, dt int64) float64 { return math.Inf(1) },
		"neginf":   func(s float64, dt int64) float64 { return math.Inf(-1) },
		"grows":    func(s float64, dt int64) float64 { return 2 * s },
		"crosses":  func(s float64, dt int64) float64 { return -s },
	}
	for name, f := range laws {
		var bad, calls atomic.Int64
		clk := sketchtest.NewFakeClock()
		clk.Set(1_000_000)
		s, err := sketch.New(sketch.Config{Levels: 3, CellsPerLevel: 64, Hi: 1e6, Decay: a41Watch{f, &bad, &calls}, Clock: clk})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		k := []byte("k")
		s.Update(k, 100)
		var prev float64 = 100
		for i, step := range []time.Duration{time.Second, -500 * time.Millisecond, 2 * time.Second, -time.Hour, time.Hour + 3*time.Second, 0} {
			clk.Advance(step)
			got := s.Query(k)
			if math.IsNaN(got) || math.IsInf(got, 0) || got < 0 || got > 100 {
				t.Fatalf("%s: step %d: Query = %v", name, i, got)
			}
			switch name {
			case "halflife":
				// the law's value for the time since the write (clock steps back count as 0)
				_ = prev
			case "nan", "inf", "neginf", "grows":
				if got != 100 {
					t.Fatalf("%s: step %d: Query = %v, want 100 (a faulty law reads as no decay)", name, i, got)
				}
			case "crosses":
				if i > 0 && got != 0 {
					t.Fatalf("%s: step %d: Query = %v, want 0 (a crossing law reads 0)", name, i, got)
				}
			}
			prev = got
			s.Update(k, 0)
		}
		if bad.Load() != 0 {
			t.Errorf("%s: the sketch called the law %d times (of %d) with dt <= 0 or a non-finite score", name, bad.Load(), calls.Load())
		}
	}
	// The conforming law: one idle gap of 3 s reads >= its value, within float32.
	clk := sketchtest.NewFakeClock()
	s, _ := sketch.New(sketch.Config{Levels: 3, CellsPerLevel: 64, Hi: 1e6, Decay: a41HalfLife{2000}, Clock: clk})
	s.Update([]byte("h"), 100)
	clk.Advance(3 * time.Second)
	want := a41HalfLife{2000}.Apply(100, 3000)
	if got := s.Query([]byte("h")); got < want || got > want*(1+1e-6) {
		t.Fatalf("custom half-life law: Query = %v after 3 s, want %v", got, want)
	}
}

// a41Valid is a custom law with Validate and Drains.
type a41Valid struct {
	err    error
	drains bool
}

func (a41Valid) Apply(s float64, dt int64) float64 { return s }
func (v a41Valid) Validate() error                 { return v.err }
func (v a41Valid) Drains() bool                    { return v.drains }

// TestAudit41CustomValidation: a custom Validator's error is reported by
// sketch.New as a ConfigError naming Decay and wrapping the law's error;
// Hi = +Inf needs a law that drains (Drainer, or the probe).
func TestAudit41CustomValidation(t *testing.T) {
	lawErr := errors.New("my law: tau must be > 0")
	_, err := sketch.New(sketch.Config{Hi: 1, Decay: a41Valid{err: lawErr}})
	var ce *sketch.ConfigError
	if !errors.As(err, &ce) || ce.Field != "Decay" || !errors.Is(err, lawErr) || !errors.Is(err, sketch.ErrInvalidConfig) {
		t.Fatalf("custom Validate error: got %v (%T)", err, err)
	}
	if _, err := sketch.New(sketch.Config{Hi: math.Inf(1), Decay: a41Valid{drains: false}}); !errors.As(err, &ce) || ce.Field != "Hi" {
		t.Fatalf("Hi = +Inf with a non-draining custom law: %v", err)
	}
	if _, err := sketch.New(sketch.Config{Hi: math.Inf(1), Decay: a41Valid{drains: true}}); err != nil {
		t.Fatalf("Hi = +Inf with a draining custom law: %v", err)
	}
	if _, err := sketch.New(sketch.Config{Hi: math.Inf(1), Decay: a41HalfLife{1000}}); err != nil {
		t.Fatalf("Hi = +Inf with a draining custom law (probed): %v", err)
	}
	if _, err := sketch.New(sketch.Config{Lo: math.Inf(-1), Hi: 1, Decay: decay.None()}); !errors.As(err, &ce) || ce.Field != "Lo" {
		t.Fatalf("Lo = -Inf with None: %v", err)
	}
}
