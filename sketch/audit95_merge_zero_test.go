package sketch_test

// Audit 95 (third review of Merge, after commit 4a9ddb3): the cost side
// of reading a 0 back (a cell of other stamped after the merge instant
// that holds 0 is read back by the law's inverse unless the law is
// None; under Exponential from 2^-1022).
//
// Finding (Exponential; fixed at stop 58 by not reading a 0 back at
// all, the text below says what was wrong): an empty cell of a replica whose clock is ahead
// by lead, stamped after the merge instant (a replica created or Reset
// since that instant on its own clock, or one whose horizon sweep ran
// within the skew), is read back from 2^-1022 over the lead. Once
// lambda x lead passes about 709.8 (math.Exp overflows, Undecay gives
// +Inf) the read-back passes Hi and every cell of s becomes Hi, stamped
// hiLead ms ahead: lead - (ln(Hi) + 1022 ln 2)/lambda. Every key, the
// cold ones included (never written anywhere: both inputs and the union
// read 0), then reads Hi, and TryUpdate denies it:
//
//   - Exponential(1), Hi 100; s holds "hot" = 5 at T; other is an
//     empty sketch created on a clock 800 s ahead (its cells stamped
//     T+800 s). After s.Merge(other): "cold" reads 100 at T, T+1 s and
//     T+80 s (Hi stamped T+87 s), "hot" reads 100 (union 5), and
//     TryUpdate("cold2", 1, 10) is denied. At 710 s ahead: 100 at T,
//     64.7 at T+1 s; at 709 s: 1.83 at T; at 700 s: 2.3e-4.
//   - the same with other Reset (not created) 800 s ahead, and with
//     other's horizon sweep having re-stamped its cells 100 s before its
//     reading, its clock 900 s ahead of s's.
//
// Before 4a9ddb3 the 0 was skipped (cold keys read 0). The docs state
// the cost of an empty re-stamped cell for Linear only ("under Linear a
// cell merely re-stamped while empty (a horizon sweep on a replica
// ahead) so reads up to rate x lead high until that drains",
// docs/snapshots.md:307-309) and, for a replica ahead, "an over-estimate
// of up to e^(lambda x skew) for a replica whose clock is ahead but whose
// writes were not later" (docs/snapshots.md:316-318): a factor on the
// union, 0 for a key nobody wrote. merge.go:17-21 says a 0 "is read back
// to it by the law's inverse (None, Exponential, Linear)", whose inverse
// of 0 under Exponential is 0; only an internal comment and WriteTo's
// section (docs/snapshots.md:208-209) say "from 2^-1022".
//
// Regressions (hold): Linear's cost is at most rate x lead (and Hi),
// drained by the stamp; MergeWithin adds rate x overlap on top; under
// None an empty cell ahead merges as 0; Exponential with lambda x lead
// below 700 adds at most 2.3e-4.

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
)

// a95Empty returns an empty sketch whose clock reads at, prepared by
// how: "new" (created at at), "reset" (created 10 s earlier, Reset at
// at) or "sweep" (created 2^30 ms + 100 s before at; its horizon sweep
// ran 100 s before at, re-stamping every cell then).
func a95Empty(t *testing.T, d decay.Decay, hi float64, how string, at int64) *sketch.Sketch {
	t.Helper()
	switch how {
	case "new":
		o, _ := a93Sketch(t, d, 0, hi, sketch.Min, at)
		return o
	case "reset":
		o, c := a93Sketch(t, d, 0, hi, sketch.Min, at-10_000)
		c.Set(at)
		o.Reset()
		return o
	case "sweep":
		o, c := a93Sketch(t, d, 0, hi, sketch.Min, at-(1<<30)-100_000)
		c.Set(at - 100_000)
		o.QueryString("x") // finds the sweep due: 128 cells, one chunk
		c.Set(at)
		return o
	}
	t.Fatalf("bad how %q", how)
	return nil
}

func TestAudit95MergeFixedExpZeroReadBackReadsHi(t *testing.T) {
	cases := []struct {
		how  string
		lead int64 // other's clock ahead of s's at the merge, ms
	}{
		{"new", 800_000},
		{"reset", 800_000},
		{"sweep", 900_000},
	}
	for _, c := range cases {
		t.Run(c.how, func(t *testing.T) {
			s, cs := a93Sketch(t, decay.Exponential(1), 0, 100, sketch.Min, a93T)
			s.UpdateString("hot", 5)
			o := a95Empty(t, decay.Exponential(1), 100, c.how, a93T+c.lead)
			if got := o.QueryString("cold"); got != 0 {
				t.Fatalf("bad case: other reads %v for cold", got)
			}
			if err := s.Merge(o); err != nil {
				t.Fatal(err)
			}
			for _, x := range []int64{0, 1000, 80_000} {
				cs.Set(a93T + x)
				// The union of two streams neither of which wrote "cold"
				// is 0; the documented cost of a replica ahead is a factor
				// of up to e^(lambda x skew) on it. Allow a float32
				// subnormal step.
				if got := s.QueryString("cold"); got > 1e-30 {
					t.Errorf("T+%dms: a key nobody wrote reads %v after the merge (both inputs and the union read 0; other %d ms ahead, empty)", x, got, c.lead)
				}
				if got, want := s.QueryString("hot"), 5*math.Exp(-float64(x)/1000); got > want*(1+1e-5) {
					t.Errorf("T+%dms: hot reads %v, union %v (other never wrote it)", x, got, want)
				}
			}
			cs.Set(a93T + 1000)
			if !s.TryUpdateString("cold2", 1, 10) {
				t.Errorf("T+1s: TryUpdate(cold2, 1, 10) denied on a key nobody wrote (reads %v)", s.QueryString("cold2"))
			}
		})
	}
}

// TestAudit95MergeZeroReadBackCostHolds: an empty replica ahead costs
// nothing. Audit 95 measured what reading its 0s back cost (Exponential
// below the overflow: 2^-1022 x e^(lambda x lead), 2.3e-4 at 700 s;
// Linear: min(Hi, rate x lead) in every cell) and found Hi everywhere
// past the overflow; since stop 58 a 0 is not read back, so a cold key
// reads 0 after merging an empty replica created, Reset or swept ahead
// (MergeWithin's rate x overlap aside, drained by its end).
func TestAudit95MergeZeroReadBackCostHolds(t *testing.T) {
	type lc struct {
		name    string
		d       decay.Decay
		hi      float64
		lead    int64
		overlap time.Duration
		max     float64 // the cold key's bound right after the merge
		drained int64   // ms after T from which the cold key reads ~0
	}
	cases := []lc{
		{"none", decay.None(), 100, 800_000, 0, 0, 0},
		{"exp1/800s", decay.Exponential(1), 100, 800_000, 0, 0, 0},
		{"exp1/60s", decay.Exponential(1), 100, 60_000, 0, 0, 0},
		{"lin1/30s", decay.Linear(1), 100, 30_000, 0, 0, 0},
		{"lin1000/30ms", decay.Linear(1000), 100, 30, 0, 0, 0},
		{"lin1000/1s/Hi", decay.Linear(1000), 100, 1000, 0, 0, 0},
		{"lin1000/30ms/within5ms", decay.Linear(1000), 100, 30, 5 * time.Millisecond, 5, 36}, // the 0 keeps its stamp 30 ms ahead: the slack drains after it
	}
	for _, c := range cases {
		for _, how := range []string{"new", "reset", "sweep"} {
			name := fmt.Sprintf("%s/%s", c.name, how)
			lead := c.lead
			if how == "sweep" {
				lead += 100_000
			}
			s, cs := a93Sketch(t, c.d, 0, c.hi, sketch.Min, a93T)
			o := a95Empty(t, c.d, c.hi, how, a93T+lead)
			if err := s.Merge(o, c.overlap); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			for _, x := range []int64{0, 1, c.drained / 2, c.drained, c.drained + 1000} {
				cs.Set(a93T + x)
				got := s.QueryString("cold")
				if got > c.hi {
					t.Errorf("%s: T+%dms: %v above Hi", name, x, got)
				}
				// "sweep": the cells were stamped 100 s before other's
				// reading, c.lead after s's instant (Linear's Rebase may
				// stamp a little earlier, which only lowers it).
				bound := c.max
				if x >= c.drained {
					bound = 1e-30
				}
				// one float32 step above: the read-back is rounded up
				// (Undecay's nudge, then to float32).
				if got > float64(math.Nextafter32(a94RoundUp32(bound), float32(math.Inf(1)))) {
					t.Errorf("%s: T+%dms: cold key reads %v, above the documented cost %v", name, x, got, bound)
				}
			}
		}
	}
}
