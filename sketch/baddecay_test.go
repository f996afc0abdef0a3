package sketch_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// A user decay law that breaks its contract must not
// corrupt the sketch: no cell may ever hold NaN or Inf (API.md), whatever
// the law returns.
//
// The safe side asserted here: a law's result is taken for what it may
// claim, a decay, i.e. a value in [0, score] for a positive score. NaN
// and +Inf mean "no decay" (the undecayed score is kept: for a rate
// limiter, forgetting nothing is safe, forgetting everything is not);
// a result outside [0, score] (growth, -Inf, a crossing below zero) is
// clamped into it. So after the key's writes, at any later time, every
// level is finite, within [Lo, Hi], and within [0, undecayed score], and
// for the NaN and +Inf laws equal to the undecayed score (within float32
// rounding).

// badLaw returns f(score, dt) for dt > 0 and the score unchanged
// otherwise, as the Decay contract asks.
type badLaw struct {
	name string
	f    func(score float64, dt int64) float64
}

func (b badLaw) Apply(score float64, dt int64) float64 {
	if dt <= 0 {
		return score
	}
	return b.f(score, dt)
}

var badLaws = []struct {
	law     badLaw
	noDecay bool // the sanitized result is the undecayed score
}{
	{badLaw{"NaN", func(float64, int64) float64 { return math.NaN() }}, true},
	{badLaw{"+Inf", func(float64, int64) float64 { return math.Inf(1) }}, true},
	{badLaw{"-Inf", func(float64, int64) float64 { return math.Inf(-1) }}, false},
	{badLaw{"grows", func(s float64, dt int64) float64 { return s * (1 + float64(dt)/1000) }}, false},
	{badLaw{"huge", func(s float64, _ int64) float64 { return s * 1e300 }}, false},
	{badLaw{"crosses", func(s float64, _ int64) float64 { return -s }}, false},
	// A sound law (halving) that fails on long gaps only.
	{badLaw{"NaNlate", func(s float64, dt int64) float64 {
		if dt > 2000 {
			return math.NaN()
		}
		return s / 2
	}}, false},
}

// TestBadDecayLawSanitized writes a key (100), lets time pass, then
// writes it with Update, TryUpdate or UpdateAndQuery (+1) and reads it
// after more time: every level of QueryDetailed, Query and the returned
// aggregate stay finite and on the safe side described above.
func TestBadDecayLawSanitized(t *testing.T) {
	const lo, hi = -1000, 1000
	key := []byte("bad")
	ops := []struct {
		name string
		do   func(s *sketch.Sketch) float64 // returns a reported value or 0
	}{
		{"Update", func(s *sketch.Sketch) float64 { s.Update(key, 1); return 0 }},
		{"TryUpdate", func(s *sketch.Sketch) float64 { s.TryUpdate(key, 1, hi); return 0 }},
		{"UpdateAndQuery", func(s *sketch.Sketch) float64 { return s.UpdateAndQuery(key, 1) }},
	}
	for _, bl := range badLaws {
		for _, op := range ops {
			t.Run(fmt.Sprintf("law=%s/op=%s", bl.law.name, op.name), func(t *testing.T) {
				clk := sketchtest.NewFakeClock()
				s := mustNewSketch(t, sketch.Config{Levels: 4, CellsPerLevel: 16, Decay: bl.law, Lo: lo, Hi: hi, Clock: clk})
				check := func(when string, undecayed float64) {
					t.Helper()
					d := s.QueryDetailed(key)
					for _, lv := range d.Levels {
						v := lv.Score
						switch {
						case math.IsNaN(v) || math.IsInf(v, 0):
							t.Fatalf("%s: level %d holds %v", when, lv.Level, v)
						case v < lo || v > hi:
							t.Fatalf("%s: level %d holds %v outside [Lo, Hi] = [%v, %v]", when, lv.Level, v, lo, hi)
						case v < 0 || v > undecayed*(1+1e-6):
							t.Fatalf("%s: level %d holds %v outside [0, undecayed %v]: the law's result was not clamped into a decay", when, lv.Level, v, undecayed)
						case bl.noDecay && v < undecayed*(1-1e-6):
							t.Fatalf("%s: level %d holds %v; want the undecayed %v (a NaN or +Inf result means no decay)", when, lv.Level, v, undecayed)
						}
					}
					if q := s.Query(key); math.IsNaN(q) || math.IsInf(q, 0) || q < 0 || q > undecayed*(1+1e-6) {
						t.Fatalf("%s: Query = %v; want finite, in [0, %v]", when, q, undecayed)
					}
				}
				// Checks at the clock of the last write see the stored
				// words (no time has passed, so the law is not called);
				// later checks see what reads make of them.
				s.Update(key, 100)
				check("right after the first write", 100)
				clk.Advance(1500 * time.Millisecond)
				got := op.do(s) // the law runs on the write path
				if math.IsNaN(got) || math.IsInf(got, 0) {
					t.Errorf("%s returned %v", op.name, got)
				}
				// The op added at most 1 (TryUpdate may deny).
				check("just after "+op.name+", at its time (stored words, or a read if it denied)", 101)
				clk.Advance(2500 * time.Millisecond)
				check("read 2.5 s after "+op.name, 101)
				s.Update(key, 1)
				check("just after a further Update", 102)
			})
		}
	}
}
