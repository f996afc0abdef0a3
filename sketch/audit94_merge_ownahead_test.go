package sketch_test

// Audit 94 (second review of Merge after commit 4c32c42).
//
// Finding: where the merged sum read back past Hi, Merge stamps Hi
// hiLead(rest, v0, back) ms after s's instant, rest being s's own cell
// read at s's instant (core/merge.go: a := s.rules.Value(w, nowS); rest
// := a). A cell of s stamped after s's instant (a write that landed on
// s during the merge, or a Hi record of a restored snapshot, which
// keeps its stamp after the restoring clock) reads its score unchanged
// at the instant, so hiLead decays it from the instant, not from its
// stamp: Hi is stamped earlier than the sum of both parts' decay needs,
// and where that stamp is still after s's own cell's (atom.Newer keeps
// the later), the merged key reads below the union from other's stamp
// on, for good under Exponential (the ratio stays), although neither
// input nor the union reaches Hi there:
//
//   - Exponential(1), Hi 10: other's clock 500 ms ahead holds 7 (read
//     back: 11.54); a write of 3 lands on s 100 ms after s's instant
//     during the merge. Merged: Hi stamped T+375 ms; 8.825 at T+500 ms
//     for a union of 9.011 (2% low, at every later instant too).
//   - Linear(1000), Hi 100, MergeWithin 10 ms (both positive together
//     for 5 ms): other 50 ms ahead holds 90; a write of 25 lands on s
//     30 ms in. Merged 91 at T+50 ms for a union of 95.
//   - no concurrency: s is a restore, on a clock at T, of a snapshot an
//     update at Hi landed on 100 ms into its encode (Hi stamped
//     T+100 ms, as WriteTo states it); other 500 ms ahead holds 1.
//     Merged: Hi stamped T+153 ms; 7.068 at T+500 ms for a union of
//     7.703 (8% low), 4.287 for 4.672 at T+1 s.
//
// Contract: internal/core/merge.go:38-41 ("None and Exponential: ... the
// merged cell is exactly the cell a single sketch fed the union would
// hold, up to the float32 rounding (upward, ...) and the clamp at Hi");
// merge.go:19-22 ("where the merged sum read back so exceeds Hi, the
// merged cell is Hi stamped the least whole ms after s's instant from
// which Hi stays at or above both parts' decay"); merge.go:53-56
// ("Writes during the merge: ... the other side decays late: the safe
// side for positive scores"); sketch/sketch.go:128-129 ("Writes that
// land on either sketch during the merge are on the safe side for
// positive scores"); merge.go:74-77 (MergeWithin: "every merged cell is
// at or above the cell a single sketch fed the union of both streams
// would hold"); docs/snapshots.md:298 ("Hi is stamped as late as keeps
// it at or above both parts' decay"). In the first two cases neither
// input nor the union ever reaches Hi; in the third only s's own write,
// at Hi 400 ms before the instants checked.

import (
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a94OwnAheadMerge builds s on a clock at T and other on a hooked clock
// lead ms ahead holding b; when Merge reads other's clock (after s's
// instant is taken), s's clock moves by sLead and s is written a. It
// returns s after s.Merge(other, overlap), and both clocks.
func a94OwnAheadMerge(t *testing.T, d decay.Decay, hi, a, b float64, sLead, lead int64, overlap time.Duration) (*sketch.Sketch, *sketchtest.FakeClock, *sketchtest.FakeClock) {
	t.Helper()
	sc := sketchtest.NewFakeClock()
	sc.Set(a93T)
	oc := &a88negHookClock{FakeClock: sketchtest.NewFakeClock()}
	oc.Set(a93T + lead)
	cfg := sketch.Config{Levels: 2, CellsPerLevel: 64, Decay: d, Lo: 0, Hi: hi, Seed: 7}
	cfg.Clock = sc
	s := mustNewSketch(t, cfg)
	cfg.Clock = oc
	o := mustNewSketch(t, cfg)
	o.UpdateString("k", b)
	oc.arm(func() {
		sc.Advance(time.Duration(sLead) * time.Millisecond)
		s.UpdateString("k", a)
	})
	if err := s.Merge(o, overlap); err != nil {
		t.Fatal(err)
	}
	return s, sc, oc.FakeClock
}

// TestAudit94MergeFixedHiLeadOwnCellAhead (audit 94; fixed at stop 58, the text below says what was wrong): see the file comment.
func TestAudit94MergeFixedHiLeadOwnCellAhead(t *testing.T) {
	check := func(name string, s *sketch.Sketch, cs *sketchtest.FakeClock, hi float64, xs []int64, union func(x int64) float64) {
		t.Helper()
		for _, x := range xs {
			cs.Set(a93T + x)
			u := union(x)
			if u >= hi {
				t.Fatalf("%s: bad case: the union %v reaches Hi %v at T+%dms", name, u, hi, x)
			}
			if got := s.QueryString("k"); got < u*(1-1e-6) {
				t.Errorf("%s: T+%dms: merged reads %v, below the union %v (below Hi %v)", name, x, got, u, hi)
			}
		}
	}
	t.Run("exp/write on s during the merge", func(t *testing.T) {
		s, cs, _ := a94OwnAheadMerge(t, decay.Exponential(1), 10, 3, 7, 100, 500, 0)
		check("exp", s, cs, 10, []int64{500, 501, 1000, 3000}, func(x int64) float64 {
			return 3*math.Exp(-float64(x-100)/1000) + 7*math.Exp(-float64(x-500)/1000)
		})
	})
	t.Run("linear/MergeWithin/write on s during the merge", func(t *testing.T) {
		// s's 25 at T+30ms is positive until T+55ms, other's 90 from
		// T+50ms: 5 ms together, 10 ms of overlap given.
		s, cs, _ := a94OwnAheadMerge(t, decay.Linear(1000), 100, 25, 90, 30, 50, 10*time.Millisecond)
		check("linear", s, cs, 100, []int64{50, 51, 60, 100}, func(x int64) float64 {
			return max(95-float64(x-50), 0)
		})
	})
	t.Run("exp/restored Hi record ahead", func(t *testing.T) {
		cfg := sketch.Config{Levels: 2, CellsPerLevel: 64, Decay: decay.Exponential(1), Lo: 0, Hi: 10, Seed: 7}
		co := sketchtest.NewFakeClock()
		co.Set(a93T)
		cfg.Clock = co
		orig := mustNewSketch(t, cfg)
		w := &a92Hook{f: func() {
			co.Advance(100 * time.Millisecond)
			orig.UpdateString("k", 20) // clamped at Hi 10, stamped T+100ms
		}}
		if _, err := orig.WriteTo(w); err != nil {
			t.Fatal(err)
		}
		cs := sketchtest.NewFakeClock()
		cs.Set(a93T)
		cfg.Clock = cs
		s := mustNewSketch(t, cfg)
		if err := s.UnmarshalBinary(w.Bytes()); err != nil {
			t.Fatal(err)
		}
		o, _ := a93Sketch(t, decay.Exponential(1), 0, 10, sketch.Min, a93T+500)
		o.UpdateString("k", 1)
		if err := s.Merge(o); err != nil {
			t.Fatal(err)
		}
		// The union of the original's stream (10 at T+100ms, at Hi) and
		// other's (1 at T+500ms): below Hi from T+101ms on.
		check("restored", s, cs, 10, []int64{500, 501, 1000, 3000}, func(x int64) float64 {
			return 10*math.Exp(-float64(x-100)/1000) + math.Exp(-float64(x-500)/1000)
		})
	})
}
