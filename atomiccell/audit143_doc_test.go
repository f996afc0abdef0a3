package atomiccell_test

// Audit 143: a sentence-by-sentence read of atomiccell's godoc (go doc
// -all ./atomiccell), each behaviour it states checked here where earlier
// audits had not.

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/lfgrudge/grudge/atomiccell"
	"github.com/lfgrudge/grudge/decay"
)

type a143Law struct {
	err   error
	apply func(float64, int64) float64
}

func (l a143Law) Apply(s float64, dt int64) float64 {
	if l.apply == nil || dt <= 0 {
		return s
	}
	return l.apply(s, dt)
}

func (l a143Law) Validate() error { return l.err }

// a143Halve is a custom law without Validate: s / 2^(dt/1000).
type a143Halve struct{}

func (a143Halve) Apply(s float64, dt int64) float64 {
	if dt <= 0 {
		return s
	}
	return s * math.Exp2(-float64(dt)/1000)
}

func a143Panic(f func()) (v any) {
	defer func() { v = recover() }()
	f()
	return nil
}

// TestAudit143NewRulesInvalidLaws: NewRules: "Preconditions ...: ... and d
// valid. NewRules panics, naming what is wrong, when they do not hold";
// decay: "lambda must be finite and > 0", "rate must be finite and > 0";
// "Custom laws ... may implement Validator". Audit 102 checked NaN
// parameters; here 0, negative and ±Inf parameters, and a custom law whose
// Validate fails, panic naming the law and the value; a valid custom law
// without Validate, and nil (decay.None()), are taken.
func TestAudit143NewRulesInvalidLaws(t *testing.T) {
	inf := math.Inf(1)
	for _, c := range []struct {
		d    decay.Decay
		want string
	}{
		{decay.Exponential(0), "0"}, {decay.Exponential(-1.5), "-1.5"}, {decay.Exponential(inf), "+Inf"}, {decay.Exponential(-inf), "-Inf"},
		{decay.Linear(0), "0"}, {decay.Linear(-2.5), "-2.5"}, {decay.Linear(inf), "+Inf"},
		{a143Law{err: errors.New("custom: half-life 7 is odd")}, "half-life 7 is odd"},
	} {
		p := a143Panic(func() { atomiccell.NewRules(c.d, -10, 10) })
		m := fmt.Sprint(p)
		if p == nil || !strings.HasPrefix(m, "atomiccell: NewRules: decay law:") || !strings.Contains(m, c.want) {
			t.Errorf("NewRules(%#v): panic %v; want one naming the law and %q", c.d, p, c.want)
		}
	}
	for _, d := range []decay.Decay{nil, decay.None(), a143Halve{}, a143Law{}, decay.Exponential(1e-12), decay.Linear(1e300)} {
		if p := a143Panic(func() { atomiccell.NewRules(d, -10, 10) }); p != nil {
			t.Errorf("NewRules(%#v) panicked: %v", d, p)
		}
	}
	// nil means decay.None(): nothing decays.
	r := atomiccell.NewRules(nil, -10, 10)
	if v := r.Value(atomiccell.Pack(-7.5, 3), 3+1<<30); v != -7.5 {
		t.Errorf("nil law: -7.5 after 2^30 ms reads %v", v)
	}
	// A custom law without Validate is used as written.
	h := atomiccell.NewRules(a143Halve{}, -10, 10)
	if v := h.Value(atomiccell.Pack(8, 100), 2100); v < 2 || v > 2*(1+1e-9) {
		t.Errorf("custom halving law: 8 after 2 s reads %v, want 2 (or a hair above)", v)
	}
}

// TestAudit143BackwardsClock: doc.go: "A difference <= 0 is zero elapsed
// time: a clock that steps backwards never grows a score"; Next: "at the
// newer of w's stamp and now"; Elapsed at exactly 2^31 ms ("an idle time
// past the 2^31 ms horizon") is 0.
func TestAudit143BackwardsClock(t *testing.T) {
	for _, d := range []decay.Decay{decay.Exponential(2), decay.Linear(3), nil} {
		r := atomiccell.NewRules(d, -100, 100)
		for _, s := range []float32{5, -5} {
			w := atomiccell.Pack(s, 1000)
			for _, now := range []uint32{999, 0, 1<<32 - 1<<31 + 1001, 1000 + 1<<31} {
				if v := r.Value(w, now); v != float64(s) {
					t.Errorf("%v: %v stamped 1000 read at %d: %v, want unchanged", d, s, now, v)
				}
				nw := r.Next(w, now, 1)
				if nw.Stamp() != 1000 || nw.Score() != s+1 {
					t.Errorf("%v: Next(%v @1000, now %d, +1) = %v @%d, want %v @1000", d, s, now, nw.Score(), nw.Stamp(), s+1)
				}
			}
		}
	}
	if e := atomiccell.Elapsed(7, 7+1<<31); e != 0 {
		t.Errorf("Elapsed across exactly 2^31 ms = %d, want 0", e)
	}
	if e := atomiccell.Elapsed(7, 7+1<<31-1); e != 1<<31-1 {
		t.Errorf("Elapsed across 2^31-1 ms = %d", e)
	}
}

// TestAudit143ValueSafeSideLinear: Value: "w's score decayed to now, in
// float64, on the safe side (never below the law's own result)". Audit
// 101 checked Exponential against the real value; here Linear (whose law
// rounds its own result up), both signs, against the law's Apply.
func TestAudit143ValueSafeSideLinear(t *testing.T) {
	rng := rand.New(rand.NewPCG(143, 1))
	for i := range 3000 {
		rate := math.Pow(10, -6+rng.Float64()*14)
		if i%5 == 0 {
			rate = float64(1+rng.IntN(50)) * 1000 // whole units a millisecond
		}
		law := decay.Linear(rate)
		r := atomiccell.NewRules(law, -math.MaxFloat32, math.MaxFloat32)
		s := float32(math.Pow(10, -8+rng.Float64()*46))
		if rng.IntN(2) == 0 {
			s = -s
		}
		st := rng.Uint32()
		dt := int64(rng.IntN(1 << uint(1+rng.IntN(30))))
		v := r.Value(atomiccell.Pack(s, st), st+uint32(dt))
		if want := law.Apply(float64(s), dt); v < want {
			t.Fatalf("Linear(%v): Value(%v, aged %d ms) = %v, below the law's %v", rate, s, dt, v, want)
		}
		if math.Abs(v) > math.Abs(float64(s)) || v*float64(s) < 0 {
			t.Fatalf("Linear(%v): Value(%v, aged %d ms) = %v: grew or crossed 0", rate, s, dt, v)
		}
	}
}

// TestAudit143NextAbsorbedDeltaStepsUp: Next: "the least float32 at or
// above the exact sum, clamped: a delta the float64 add would absorb still
// steps it up"; Invariants: "a stored score is >= the exact result it
// stands for".
func TestAudit143NextAbsorbedDeltaStepsUp(t *testing.T) {
	r := atomiccell.NewRules(nil, -1e30, 1e30)
	for _, s := range []float32{1, -1, 1e20, -1e20, 3} {
		for _, d := range []float64{1e-300, 5e-324, 1e-20} {
			got := r.Next(atomiccell.Pack(s, 0), 0, d).Score()
			if want := math.Nextafter32(s, float32(math.Inf(1))); got != want {
				t.Errorf("Next(%v + %v) = %v, want %v (the least float32 above the exact sum)", s, d, got, want)
			}
			got = r.Next(atomiccell.Pack(s, 0), 0, -d).Score()
			if got != s {
				t.Errorf("Next(%v - %v) = %v, want %v (the least float32 at or above)", s, d, got, s)
			}
		}
	}
}
