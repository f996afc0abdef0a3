package sketch_test

// Audit 93: regression sweep of Merge's rule for a cell of other stamped
// after the merge instant (commit 502bb1f: a read-back past Hi merged as
// Hi stamped hiLead ms late, at most 2^24 ms), with s's own cell empty
// or holding a score (checked against either input's truth, not the
// union: see audit93_merge_hilead_test.go), every law, Hi finite and
// +Inf, leads from 1 ms past the 2^31 ms horizon.
//
// Contract: internal/core/merge.go:14-26 (Merge's doc: "at or above its
// value then for non-negative deltas, however far ahead, except that a
// read-back above Hi ... is merged as Hi stamped the least whole ms
// after s's instant from which Hi decays to the cell's value by its
// stamp ... A merged cell is stamped at most 2^24 ms (4.66 hours) after
// s's instant: a write made during the merge on a clock that jumped
// further than that decays by the excess"); docs/snapshots.md "Merge"
// (the cost: "an over-estimate of up to e^(lambda x skew) for a replica
// whose clock is ahead but whose writes were not later").

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

const a93T = int64(1_800_000_000_000)

// a93MaxAhead is the documented cap on a merged cell's lead (2^24 ms).
const a93MaxAhead = int64(1) << 24

func a93Sketch(t *testing.T, d decay.Decay, lo, hi float64, agg sketch.Aggregator, at int64) (*sketch.Sketch, *sketchtest.FakeClock) {
	t.Helper()
	c := sketchtest.NewFakeClock()
	c.Set(at)
	return mustNewSketch(t, sketch.Config{Levels: 2, CellsPerLevel: 64, Decay: d, Lo: lo, Hi: hi, Aggregator: agg, Seed: 7, Clock: c}), c
}

// a93ExpCustom is a custom law (no inverse): exponential at 0.5/s.
type a93ExpCustom struct{}

func (a93ExpCustom) Apply(score float64, dt int64) float64 {
	if dt <= 0 {
		return score
	}
	return score * math.Exp(-0.5*float64(dt)/1000)
}

// a93Law is a law with its arithmetic in float64, for the bounds.
type a93Law struct {
	name    string
	d       decay.Decay
	kind    string // none, exp, lin, custom
	p       float64
	drains  bool
	inverse bool
}

func (l a93Law) decay(v float64, ms int64) float64 {
	if ms <= 0 {
		return v
	}
	switch l.kind {
	case "exp":
		return v * math.Exp(-l.p*float64(ms)/1000)
	case "custom":
		return v * math.Exp(-0.5*float64(ms)/1000)
	case "lin":
		if v > 0 {
			return max(v-l.p*float64(ms)/1000, 0)
		}
		return min(v+l.p*float64(ms)/1000, 0)
	}
	return v
}

func (l a93Law) undecay(v float64, ms int64) float64 {
	switch l.kind {
	case "exp":
		return v * math.Exp(l.p*float64(ms)/1000)
	case "lin":
		return v + l.p*float64(ms)/1000
	}
	return v
}

func a93Laws() []a93Law {
	return []a93Law{
		{"none", decay.None(), "none", 0, false, true},
		{"exp0.3", decay.Exponential(0.3), "exp", 0.3, true, true},
		{"exp1", decay.Exponential(1), "exp", 1, true, true},
		{"exp1e-5", decay.Exponential(1e-5), "exp", 1e-5, true, true},
		{"lin1", decay.Linear(1), "lin", 1, true, true},
		{"lin1000", decay.Linear(1000), "lin", 1000, true, true},
		{"lin0.01", decay.Linear(0.01), "lin", 0.01, true, true},
		{"custom", a93ExpCustom{}, "custom", 0.5, false, false},
	}
}

// TestAudit93MergeAheadSweep: other's clock is lead ms ahead of s's (so
// its write is stamped lead ms after the merge instant), s empty or
// holding a non-negative score written at T. At instants from T to well
// past the write's stamp the merged key must read:
//   - at least other's own reading at that instant (other's value held
//     before its stamp), except past the 2^24 ms cap, where it may be
//     that reading decayed by the excess (lead - 2^24 ms), never less;
//   - at least s's own reading;
//   - from the stamp on, for an empty s, a None or Exponential law and a
//     lead within the cap: at most other's reading raised by one ms of
//     the law (hiLead is a whole ms) and a float32 ulp: the merge is
//     exact there, Hi cells included;
//   - before the stamp, for an empty s and a finite bound: at most other's
//     value read back over the whole lead ("an over-estimate of up to
//     e^(lambda x skew)"; Linear: rate x skew), plus that ms (and
//     MergeWithin's rate x overlap, every other case merging with a 10 ms
//     overlap);
//   - past the cap, for an empty s and a Hi cell: below Hi 2^24 + 1 ms
//     after the instant (stamped at most 2^24 ms after it).
//
// Leads past 2^29 and 2^31 ms go through the raised path (other ahead by
// more than its cells' history).
func TestAudit93MergeAheadSweep(t *testing.T) {
	leads := []int64{1, 3, 500, 2 * 3600_000, a93MaxAhead + 5000, 1<<29 + 777, 1<<31 + 4321}
	aggs := []sketch.Aggregator{sketch.Min, sketch.Max, sketch.Mean}
	n := 0
	for _, lw := range a93Laws() {
		for _, hi := range []float64{10, math.Inf(1)} {
			if math.IsInf(hi, 1) && !lw.drains {
				continue
			}
			for _, lo := range []float64{0, -50} {
				for _, own := range []float64{0, 0.5} {
					for _, lead := range leads {
						for _, frac := range []float64{0.8, 1, 2} {
							n++
							agg := aggs[n%len(aggs)]
							name := fmt.Sprintf("%s/hi=%v/lo=%v/own=%v/lead=%d/b=%vHi/agg=%d", lw.name, hi, lo, own, lead, frac, agg)
							a93AheadCase(t, name, lw, lo, hi, agg, own, lead, frac, n%2 == 0)
						}
					}
				}
			}
		}
	}
}

// With within, the merge is MergeWithin with a 10 ms overlap (a slack
// under Linear, ignored by the other laws).
func a93AheadCase(t *testing.T, name string, lw a93Law, lo, hi float64, agg sketch.Aggregator, own float64, lead int64, frac float64, within bool) {
	t.Helper()
	effHi := hi
	if math.IsInf(hi, 1) {
		effHi = math.MaxFloat32
	}
	v := frac * effHi
	if frac > 1 {
		v = math.MaxFloat32 // clamped at Hi whatever Hi is
	}
	s, cs := a93Sketch(t, lw.d, lo, hi, agg, a93T)
	o, co := a93Sketch(t, lw.d, lo, hi, agg, a93T+lead)
	if own > 0 {
		s.UpdateString("k", own)
	}
	o.UpdateString("k", v)
	b := o.QueryString("k") // other's value at its stamp (clamped)
	var overlap time.Duration
	if within {
		overlap = 10 * time.Millisecond
	}
	if err := s.Merge(o, overlap); err != nil {
		t.Fatalf("%s: Merge: %v", name, err)
	}
	back := lw.undecay(b, lead)
	hiCell := lw.inverse && lw.kind != "none" && back > effHi*(1+1e-9)
	capped := lead > a93MaxAhead && (hiCell || !lw.inverse)
	excess := int64(0)
	if capped {
		excess = lead - a93MaxAhead
	}
	xs := []int64{0, 1, lead / 2, lead - 1, lead, lead + 1, lead + 7, lead + 250, lead + 3000, lead + 60_000}
	if capped {
		xs = []int64{0, 1, a93MaxAhead, a93MaxAhead + 1, lead - 1, lead, lead + 1, lead + 250, lead + 60_000}
	}
	last := int64(-1)
	for _, x := range xs {
		if x <= last {
			continue
		}
		last = x
		cs.Set(a93T + x)
		co.Set(a93T + max(x, lead))
		got := s.QueryString("k")
		theirs := o.QueryString("k")
		ownTruth := lw.decay(own, x)
		if got < ownTruth*(1-1e-9) {
			t.Errorf("%s: T+%dms: merged %v below s's own truth %v", name, x, got, ownTruth)
		}
		want := theirs
		if capped {
			// Before the stamp other holds b; the merged cell held Hi
			// until T+2^24 ms at most, then decays: never below other's
			// reading decayed by the excess past the cap.
			want = lw.decay(theirs, excess)
			if x < lead {
				want = lw.decay(b, max(x-a93MaxAhead, 0))
			}
		}
		if x == a93MaxAhead+1 && hiCell && own == 0 && !within && lw.decay(effHi, 1) < effHi && got >= effHi {
			t.Errorf("%s: T+%dms: merged %v still at Hi: stamped more than 2^24 ms after the merge instant", name, x, got)
		}
		if got < want*(1-1e-9) {
			t.Errorf("%s: T+%dms: merged %v below other's reading %v (bound %v, excess %dms, Hi cell %v)", name, x, got, theirs, want, excess, hiCell)
		}
		if own != 0 || capped || !lw.inverse {
			continue
		}
		// The cost side (empty s): one ms of the law and a float32 ulp.
		oneMs := lw.undecay(1, 1)
		if lw.kind == "lin" {
			oneMs = 1
		}
		slack := 0.0 // MergeWithin's rate x overlap under Linear
		if within && lw.kind == "lin" {
			slack = lw.p * 10 / 1000
		}
		slackAbove := func(ref float64) float64 {
			if lw.kind == "lin" {
				return ref + lw.p/1000 + slack + 1e-6*ref + 1e-30
			}
			return ref*oneMs*(1+1e-6) + 1e-30
		}
		if x >= lead && lw.kind != "lin" {
			if lim := slackAbove(theirs); got > lim {
				t.Errorf("%s: T+%dms (from the stamp on): merged %v above other's reading %v by more than one ms of the law (%v)", name, x, got, theirs, lim)
			}
		}
		if x < lead && !math.IsInf(back, 1) && back < math.MaxFloat64/4 {
			// The write made at T on a clock lead ms ahead: its truth
			// at T+x is b decayed x ms; the doc's over-estimate bound is
			// that raised over the lead.
			lim := slackAbove(lw.undecay(lw.decay(b, x), lead))
			if lw.kind == "lin" {
				lim = slackAbove(b - lw.p*float64(x)/1000 + lw.p*float64(lead)/1000)
			}
			if got > lim {
				t.Errorf("%s: T+%dms (before the stamp): merged %v above the skew bound %v", name, x, got, lim)
			}
		}
	}
}

// TestAudit93MergeOwnCellAhead: a write lands on s during the merge
// (after s's instant is read: s's clock is moved and s written while
// other's clock is read), so s's cell is stamped ahead of s's instant
// too; other's cell at Hi is stamped ahead (a replica whose clock is
// ahead). The merged cell keeps the later of the two stamps and never
// reads below either input's reading from the merge on.
func TestAudit93MergeOwnCellAhead(t *testing.T) {
	for _, lw := range []a93Law{a93Laws()[2], a93Laws()[4]} {
		for _, sLead := range []int64{100, 500, 2000} {
			name := fmt.Sprintf("%s/s+%dms", lw.name, sLead)
			const oLead = 500
			sc := &a88negHookClock{FakeClock: sketchtest.NewFakeClock()}
			sc.Set(a93T)
			oc := &a88negHookClock{FakeClock: sketchtest.NewFakeClock()}
			oc.Set(a93T + oLead)
			cfg := sketch.Config{Levels: 2, CellsPerLevel: 64, Decay: lw.d, Lo: 0, Hi: 10, Seed: 7}
			cfg.Clock = sc
			s := mustNewSketch(t, cfg)
			cfg.Clock = oc
			o := mustNewSketch(t, cfg)
			s.UpdateString("k", 3)
			o.UpdateString("k", 100) // at Hi
			oc.arm(func() {
				sc.Advance(time.Duration(sLead) * time.Millisecond)
				s.UpdateString("k", 4)
			})
			if err := s.Merge(o); err != nil {
				t.Fatal(err)
			}
			// s's truth: 3 at T, +4 at T+sLead (its cell read then).
			for _, x := range []int64{sLead, oLead, 600, 1000, 2000, 2500, 5000} {
				if x < sLead {
					continue
				}
				sc.Set(a93T + x)
				oc.Set(a93T + max(x, oLead))
				got := s.QueryString("k")
				sTruth := min(lw.decay(lw.decay(3, sLead)+4, x-sLead), 10)
				theirs := o.QueryString("k")
				if got < sTruth*(1-1e-9) || got < theirs*(1-1e-9) {
					t.Errorf("%s: T+%dms: merged %v below s's truth %v or other's reading %v", name, x, got, sTruth, theirs)
				}
			}
		}
	}
}
