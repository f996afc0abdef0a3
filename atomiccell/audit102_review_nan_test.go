package atomiccell_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/lfgrudge/grudge/atomiccell"
	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
)

// audit102Panic runs f and returns what it panicked with (nil: none).
func audit102Panic(f func()) (v any) {
	defer func() { v = recover() }()
	f()
	return nil
}

// TestAudit102ReviewFixedNaNLawStoresNaN (audit 102; fixed at stop 60,
// the text below says what was wrong; NewRules now validates the law):
// (fix B, commit e470a82,
// a gap it leaves). The fix makes NewRules panic on a NaN bound and Add
// and Next panic on a NaN delta, because a NaN "would store a NaN
// score, which every later add keeps". A NaN decay parameter does just
// that, and NewRules still takes it without a word: decay.Exponential(NaN)
// or decay.Linear(NaN), a finite delta, and the second Add, one second
// later, stores a NaN score that every later Add keeps.
//
// Doc (atomiccell/doc.go, Invariants): "A stored score is never NaN or
// ±Inf: every narrowing goes through RoundUp ... and callers never pass a
// NaN delta"; atomiccell.go, NewRules: "Preconditions (sketch.New checks
// them for a Config): lo <= 0 <= hi, lo < hi, neither NaN, and d valid.
// NewRules panics, naming the bounds, when the bounds break them". The
// precondition "d valid" is as much a precondition as "neither NaN" was,
// and breaking it yields the very NaN score the fix was made against,
// with no panic.
//
// Code: NewRules checks lo and hi only; law.Compile takes the NaN
// parameter; Rules.Decay returns NaN for any score != 0 and dt > 0;
// clampSum lets a NaN through (NaN < lo and NaN >= hi are both false).
//
// Repro: r := NewRules(decay.Exponential(math.NaN()), -10, 10); c.Add(r,
// 0, 5, 0); c.Add(r, 1000, 1, w) stores NaN; c.Add(r, 2000, 1, w) keeps it.
//
// Suggested fix: NewRules panics when law.Validate(d) != nil (the check
// sketch.New makes: it rejects NaN, Inf and non-positive parameters),
// naming the law, as it does for the bounds.
func TestAudit102ReviewFixedNaNLawStoresNaN(t *testing.T) {
	for _, d := range []decay.Decay{decay.Exponential(math.NaN()), decay.Linear(math.NaN())} {
		var r *atomiccell.Rules
		if p := audit102Panic(func() { r = atomiccell.NewRules(d, -10, 10) }); p != nil {
			if m := fmt.Sprint(p); !strings.HasPrefix(m, "atomiccell: NewRules: decay law:") {
				t.Errorf("NewRules(%#v): panic %q, want one naming the decay law", d, m)
			}
			continue // rejected up front: no NaN can be stored
		}
		var c atomiccell.Cell
		w := c.Add(r, 0, 5, c.Load())
		w = c.Add(r, 1000, 1, w)
		w = c.Add(r, 2000, 1, w)
		if s := w.Score(); s != s {
			t.Errorf("NewRules(%#v, -10, 10) accepted; three finite adds (5, 1, 1) store a NaN score (%v), and every later add keeps it: doc.go says a stored score is never NaN", d, s)
		}
	}
}

// TestAudit102ReviewBoundsAccepted (passing check): every bound pair the
// preconditions allow is accepted, ±Inf included (saturating at
// ±MaxFloat32), -0 for either, denormal and sub-float32 bounds; the ones
// they exclude (NaN, lo > 0, hi < 0, lo == hi with -0 == +0) panic with
// a message naming both bounds.
func TestAudit102ReviewBoundsAccepted(t *testing.T) {
	inf, nan, negz := math.Inf(1), math.NaN(), math.Copysign(0, -1)
	for _, b := range [][2]float64{
		{-inf, inf}, {0, inf}, {-inf, 0}, {-inf, negz}, {negz, 1}, {-1, negz},
		{-1e-40, 1e-40}, {-1e-50, 1e-50}, {-1e-50, 0}, {-5e-324, 5e-324},
		{-math.MaxFloat64, math.MaxFloat64}, {-math.SmallestNonzeroFloat32, math.SmallestNonzeroFloat32},
	} {
		if p := audit102Panic(func() { atomiccell.NewRules(nil, b[0], b[1]) }); p != nil {
			t.Errorf("NewRules(nil, %v, %v) panicked (%v); the preconditions allow it", b[0], b[1], p)
		}
	}
	for _, b := range [][2]float64{
		{nan, 1}, {-1, nan}, {nan, nan}, {0, 0}, {negz, 0}, {0, negz}, {negz, negz},
		{1, 2}, {-2, -1}, {inf, inf}, {-inf, -inf}, {1e-50, 1}, {-1, -1e-50},
	} {
		p := audit102Panic(func() { atomiccell.NewRules(nil, b[0], b[1]) })
		msg, _ := p.(string)
		if !strings.HasPrefix(msg, "atomiccell: NewRules: bounds [") || !strings.Contains(msg, fmt.Sprintf("[%v, %v]", b[0], b[1])) {
			t.Errorf("NewRules(nil, %v, %v): panic %#v; want one naming the bounds", b[0], b[1], p)
		}
	}
}

// TestAudit102ReviewInfDeltaClamps (passing check): Add's doc, "±Inf
// clamps to the bounds", under every law and for bounds finite, infinite
// (MaxFloat32), denormal and degenerate after rounding ([-1e-50, 0]
// stores ±0, never below the exact clamp).
func TestAudit102ReviewInfDeltaClamps(t *testing.T) {
	inf := math.Inf(1)
	for _, d := range []decay.Decay{nil, decay.Exponential(1), decay.Linear(3)} {
		for _, b := range [][2]float64{{-10, 10}, {-inf, inf}, {0, 1e-40}, {-1e-40, 0}, {-1e-50, 0}} {
			r := atomiccell.NewRules(d, b[0], b[1])
			lo, hi := atomiccell.RoundUp(b[0]), atomiccell.RoundUp(b[1])
			for _, start := range []float32{0, hi, lo} {
				w := atomiccell.Pack(start, 7)
				if got := r.Next(w, 1000, inf).Score(); got != hi {
					t.Errorf("%v [%v, %v] from %v: Next(+Inf) = %v; want %v", d, b[0], b[1], start, got, hi)
				}
				if got := r.Next(w, 1000, -inf).Score(); got != lo {
					t.Errorf("%v [%v, %v] from %v: Next(-Inf) = %v; want %v", d, b[0], b[1], start, got, lo)
				}
				var c atomiccell.Cell
				c.Store(w)
				if got := c.Add(r, 1000, inf, w); got.Score() != hi || c.Load() != got {
					t.Errorf("%v [%v, %v]: Add(+Inf) = %v (cell %v); want %v", d, b[0], b[1], got.Score(), c.Load().Score(), hi)
				}
			}
		}
	}
	// Degenerate bounds after rounding: the score stays ±0, at or above
	// the exact clamp of the sum (-1e-50 for a negative delta).
	r := atomiccell.NewRules(nil, -1e-50, 0)
	if s := r.Next(0, 0, -5).Score(); s != 0 || float64(s) < -1e-50 {
		t.Errorf("[-1e-50, 0]: Next(-5) = %v", s)
	}
}

// TestAudit102ReviewNaNPanicLeavesCell (passing check): a NaN delta
// panics with the documented value before the cell is touched, for Add
// (fresh and stale views, every sign of NaN payload) and for Next.
func TestAudit102ReviewNaNPanicLeavesCell(t *testing.T) {
	r := atomiccell.NewRules(decay.Exponential(1), -10, 10)
	var c atomiccell.Cell
	w0 := c.Add(r, 5, 3, c.Load())
	for _, nan := range []float64{math.NaN(), -math.NaN(), math.Float64frombits(0x7ff0000000000001), math.Float64frombits(0xfff8000000000000)} {
		for _, view := range []atomiccell.Word{w0, 0} {
			p := audit102Panic(func() { c.Add(r, 1000, nan, view) })
			if p != "atomiccell: delta is NaN" {
				t.Errorf("Add(NaN %#x): panic %#v", math.Float64bits(nan), p)
			}
			if c.Load() != w0 {
				t.Errorf("Add(NaN) changed the cell: %v -> %v", w0, c.Load())
			}
		}
		if p := audit102Panic(func() { r.Next(w0, 1000, nan) }); p != "atomiccell: delta is NaN" {
			t.Errorf("Next(NaN): panic %#v", p)
		}
	}
}

// TestAudit102ReviewSketchNaNUnchanged (passing check): the sketch does
// not go through atomiccell: its NaN and ±Inf deltas still panic with
// its own "sketch:" message (API.md), and the cell is untouched.
func TestAudit102ReviewSketchNaNUnchanged(t *testing.T) {
	s, err := sketch.New(sketch.Config{Levels: 2, CellsPerLevel: 64, Lo: -10, Hi: 10})
	if err != nil {
		t.Fatal(err)
	}
	s.Update([]byte("k"), 2)
	for _, d := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		p := audit102Panic(func() { s.Update([]byte("k"), d) })
		if msg := fmt.Sprint(p); !strings.HasPrefix(msg, "sketch:") {
			t.Errorf("sketch Update(%v): panic %#v; want a message starting sketch:", d, p)
		}
	}
	if q := s.Query([]byte("k")); q != 2 {
		t.Errorf("Query after the panics = %v; want 2", q)
	}
}
