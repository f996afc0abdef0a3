package sketch_test

// Audit 94: the ms rounding of hiLead (commit 4c32c42: the merged sum,
// s's own cell plus other's read back, decides). s holds a at its
// instant T; other, on a clock lead ms ahead, holds b written at its
// reading; a sketch U on one clock is fed a at T and b at T+lead (the
// union). lead runs in steps of 7 ms from 1 to 600 ms, so the read-back
// crosses Hi at many fractional points of a ms. From b's stamp on:
//   - Exponential: the merged key is at or above U (up to a float32
//     ulp: "exactly the cell a single sketch fed the union would hold,
//     up to the float32 rounding (upward ...)"), and at most U raised by
//     one ms of the law and an ulp (Hi is stamped on a whole ms);
//   - Linear, MergeWithin with an overlap covering the time both were
//     positive: at or above U, U never at Hi (merge.go, MergeWithin).
// Never above Hi.

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
)

func TestAudit94MergeHiLeadBoundary(t *testing.T) {
	const hi = 10.0
	laws := []struct {
		name  string
		d     decay.Decay
		perMs float64 // Linear's drain a ms; 0 for Exponential
		oneMs float64 // Exponential: e^(lambda x 1 ms)
	}{
		{"exp1", decay.Exponential(1), 0, math.Exp(1.0 / 1000)},
		{"exp3", decay.Exponential(3), 0, math.Exp(3.0 / 1000)},
		{"lin10", decay.Linear(10), 0.01, 0},
	}
	checked := 0
	for _, lw := range laws {
		for _, a := range []float64{0.5, 1, 3} {
			for _, b := range []float64{5, 7, 9.5} {
				for lead := int64(1); lead <= 600; lead += 7 {
					name := fmt.Sprintf("%s/a=%v/b=%v/lead=%d", lw.name, a, b, lead)
					s, cs := a93Sketch(t, lw.d, 0, hi, sketch.Min, a93T)
					o, co := a93Sketch(t, lw.d, 0, hi, sketch.Min, a93T+lead)
					u, cu := a93Sketch(t, lw.d, 0, hi, sketch.Min, a93T)
					s.UpdateString("k", a)
					u.UpdateString("k", a)
					o.UpdateString("k", b)
					cu.Set(a93T + lead)
					u.UpdateString("k", b)
					if u.QueryString("k") >= hi {
						continue // the union clamps: not this test's case
					}
					var overlap time.Duration
					if lw.perMs > 0 {
						overlap = time.Duration(math.Ceil(a/lw.perMs)+1) * time.Millisecond
					}
					if err := s.Merge(o, overlap); err != nil {
						t.Fatalf("%s: Merge: %v", name, err)
					}
					checked++
					for _, x := range []int64{lead, lead + 1, lead + 13, lead + 1000} {
						cs.Set(a93T + x)
						co.Set(a93T + x)
						cu.Set(a93T + x)
						got, union := s.QueryString("k"), u.QueryString("k")
						if got > hi {
							t.Errorf("%s: T+%dms: merged %v above Hi", name, x, got)
						}
						if got < union*(1-0x1p-23) {
							t.Errorf("%s: T+%dms: merged %v below the union %v", name, x, got, union)
						}
						if lw.perMs == 0 {
							if lim := union * lw.oneMs * (1 + 0x1p-22); got > lim {
								t.Errorf("%s: T+%dms: merged %v above the union %v by more than one ms of the law (%v)", name, x, got, union, lim)
							}
						}
					}
				}
			}
		}
	}
	if checked < 500 {
		t.Fatalf("only %d cases", checked)
	}
}
