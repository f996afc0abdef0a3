package atomiccell_test

import (
	"math"
	"testing"

	"github.com/lfgrudge/grudge/atomiccell"
	"github.com/lfgrudge/grudge/decay"
)

// docs/precision.md, "The rounding rule": the quoted examples.
func TestAudit43PrecisionExamples(t *testing.T) {
	cases := []struct {
		x    float64
		want float32
	}{
		{0.1, 0.10000000149011612},
		{-0.1, -0.09999999403953552},
		{1e6 + 1e-5, 1000000.0625},
		{1<<24 + 1, 16777218},
	}
	for _, c := range cases {
		if got := atomiccell.RoundUp(c.x); got != c.want {
			t.Errorf("RoundUp(%v) = %.11g, precision.md says %.11g", c.x, got, c.want)
		}
	}
	if got := atomiccell.RoundUp(0.1); math.Abs(float64(got)-0.10000000149) > 5e-12 {
		t.Errorf("0.1 stored as %.11f, doc 0.10000000149", got)
	}
	if got := atomiccell.RoundUp(-0.1); math.Abs(float64(got)+0.09999999404) > 5e-12 {
		t.Errorf("-0.1 stored as %.11f, doc -0.09999999404", got)
	}
	// "Hi = 1e12 is stored as 1000000061440; Lo = -100, Hi = 1000 are exact"
	r := atomiccell.NewRules(decay.None(), 0, 1e12)
	if w := r.Next(atomiccell.Pack(0, 0), 0, 5e12); float64(w.Score()) != 1000000061440 {
		t.Errorf("clamped at Hi 1e12: stored %.0f, doc 1000000061440", w.Score())
	}
	r2 := atomiccell.NewRules(decay.None(), -100, 1000)
	if w := r2.Next(atomiccell.Pack(0, 0), 0, 5000); w.Score() != 1000 {
		t.Errorf("Hi 1000 stored %v", w.Score())
	}
	if w := r2.Next(atomiccell.Pack(0, 0), 0, -5000); w.Score() != -100 {
		t.Errorf("Lo -100 stored %v", w.Score())
	}
	// "integers are exact up to 2^24"
	r3 := atomiccell.NewRules(decay.None(), 0, 1e30)
	w := atomiccell.Pack(0, 0)
	for i := 0; i < 1000; i++ {
		w = r3.Next(w, 0, 16777)
	}
	if w.Score() != 16777000 {
		t.Errorf("1000 adds of 16777: %v, want exact 16777000", w.Score())
	}
}

// docs/precision.md: "Exponential(1e-10), 100,000 zero adds 1 ms apart:
// 1006.1 for 1000; audit 37) ... now skips the tables, and the math.Exp
// path caps the nudged value at the score."
func TestAudit43SlowExponentialNoGrowth(t *testing.T) {
	r := atomiccell.NewRules(decay.Exponential(1e-10), 0, 1e9)
	w := atomiccell.Pack(1000, 0)
	for i := uint32(1); i <= 100_000; i++ {
		w = r.Next(w, i, 0)
	}
	if w.Score() > 1000 {
		t.Errorf("Exponential(1e-10) after 100,000 zero adds: %v > 1000; precision.md says no growth now", w.Score())
	}
	if w.Score() < 999.99 {
		t.Errorf("decayed too much: %v", w.Score())
	}
}
