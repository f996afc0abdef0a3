package bucket

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit34FixedMergeAfterMoveUnderCounts: an Update's merge sums
// the loads of the key's candidates at the merge's own read, whose time
// is max(the operation's clock, the lines' lw). When a line's lw has
// moved past the time of the split writes by then, each candidate has
// drained separately at the full rate, so the sum has drained twice as
// fast as the key's one bucket: the merge writes less than the key owes,
// and the key reads below its true load (and is admitted past its limit).
//
// The race (TestReplayMergeAfterFailedUndo's, Linear(1000, 30), frozen
// clock at t0): A = Update(x, 3) reads, is held before its CAS; B =
// Update(x, 1) inserts into line 1; A's CAS lands in line 0 slot 0 and A
// is held before its validation; C = Update(x, 2) builds on A's entry (5
// tokens). All three are at t0: the key owes 6 at t0, so 2 at t0 + 4 ms.
// Then the clock moves 4 ms and Update(y), y a key of line 0, moves line
// 0's lw there. A validates: B's slot changed, its undo fails (C built
// on it), so it merges, at t0 + 4 ms (line 0's lw): slot 0 holds 1 token
// there, B's entry has expired: the sum is 1 token.
//
// Variant "sealed-merge-cas": the line moves instead while A's merge is
// held after its last header check; the seal changes A's word (its
// neighbour slot is empty), the merge's CAS fails and it merges again at
// the line's new time, with the same result.
//
// Variant "lone-key-later-write": no other key. A = Update(x, 10) and B =
// Update(x, 5) at t0 as above; C = Update(x, 2) runs with a clock 4 ms
// later and builds on A's entry (moving line 0's lw itself). The truth
// at t0 + 4 ms is 15 - 4 + 2 = 13; A's merge at t0 + 4 ms sums 8 (slot
// 0) + 1 (B, drained separately) = 9.
//
// Promises: internal/bucket/doc.go, Guarantees: "One-sided: Query(k) >=
// k's true load, whatever evictions, floors, fingerprint collisions,
// decay, refunds and races; a key at its limit is never admitted early";
// docs/design.md section 8, "Concurrency: the validated CAS": an Update
// "merges, writing the sum of the candidates' loads and the higher
// floor's, which covers the key however the racing writes were split".
func TestAudit34FixedMergeAfterMoveUnderCounts(t *testing.T) {
	cases := []struct {
		variant      string
		a, b, c      float64 // A's, B's and C's n
		truth, probe float64 // x's true load 4 ms after t0; a TryUpdate's n that truth + n passes 30
	}{
		{"moved-before-merge", 3, 1, 2, 2, 29},
		{"sealed-merge-cas", 3, 1, 2, 2, 29},
		{"lone-key-later-write", 10, 5, 2, 13, 18},
	}
	for _, tc := range cases {
		t.Run(tc.variant, func(t *testing.T) {
			e, ln := a34MergeRace(t, Linear(1000, 30), tc.variant, tc.a, tc.b, tc.c)
			q := e.Query("x")
			admitted := e.TryUpdate("x", tc.probe, 30)
			if q < tc.truth || admitted {
				t.Fatalf("x: Update %v, %v, %v (C built on A's entry), read 4 ms after t0: Query %v, want >= %v (the true load); TryUpdate(x, %v, limit 30) admitted=%v, want false (%v + %v > 30). doc.go: \"Query(k) >= k's true load, whatever ... races\"; design.md: the merge's sum \"covers the key however the racing writes were split\". line 0: %+v line 1: %+v",
					tc.a, tc.b, tc.c, q, tc.truth, tc.probe, admitted, tc.truth, tc.probe, StateOf(e, ln[0]), StateOf(e, ln[1]))
			}
		})
	}
}

// TestAudit34MergeAfterMoveExponentialHolds: the same races under
// Exponential(250, 30, 0.01). A sum of loads that each decay
// exponentially decays as the one load of the key does, so the merge at
// the later time is exact: x reads at least 6 units decayed by 4 ms (read
// on a second engine that took the 6 units in one Update at t0), less
// the engine's DropSlack.
func TestAudit34MergeAfterMoveExponentialHolds(t *testing.T) {
	law := Exponential(250, 30, 0.01)
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	ctl := newTest(t, 2, law, clk)
	ctl.Update("x", 6)
	clk.Advance(4 * time.Millisecond)
	truth := ctl.Query("x")
	for _, variant := range []string{"moved-before-merge", "sealed-merge-cas"} {
		t.Run(variant, func(t *testing.T) {
			e, ln := a34MergeRace(t, law, variant, 3, 1, 2)
			q := e.Query("x")
			t.Logf("x reads %v, truth %v", q, truth)
			if q < truth-DropSlack(e) {
				t.Fatalf("x reads %v 4 ms after 6 units at t0, want >= %v (less %v); line 0: %+v line 1: %+v", q, truth, DropSlack(e), StateOf(e, ln[0]), StateOf(e, ln[1]))
			}
		})
	}
}

// a34MergeRace replays the race of
// TestAudit34FixedMergeAfterMoveUnderCounts under law and returns the
// engine (its clock 4 ms after t0) and x's lines.
func a34MergeRace(t *testing.T, law Law, variant string, a, b, c float64) (*Engine, [2]int) {
	t.Helper()
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	e := newTest(t, 2, law, clk)
	i0, i1, fp := e.Locate("x")
	ln := [2]int{int(i0), int(i1)}
	y, yfp := otherKey(t, e, fp)
	fill(e, ln[0], 4, 8, fp, 20)  // line 0: 8 live, slots 0..3 free: A takes slot 0
	fill(e, ln[1], 0, 10, fp, 20) // line 1: 10 live
	pausedA, resumeA := make(chan struct{}), make(chan struct{})
	pausedV, resumeV := make(chan struct{}), make(chan struct{})
	pausedG, resumeG := make(chan struct{}), make(chan struct{})
	var armV, armG atomic.Bool
	e.setHooks(&testHooks{
		beforeCAS:  pauseOnce(armedTrue(), pausedA, resumeA),
		afterCAS:   pauseOnce(&armV, pausedV, resumeV),
		afterCheck: pauseOnce(&armG, pausedG, resumeG),
	})
	var wg sync.WaitGroup
	wg.Go(func() { e.Update("x", a) }) // A
	<-pausedA
	fill(e, ln[0], 2, 2, fp, 20)
	fill(e, ln[0], 12, 1, fp, 20)
	e.poke(ln[0], 13, yfp, Tick(e)+ticksOf(e, 29)) // y's entry: line 0 is the line y writes
	e.Update("x", b)                               // B: line 1 (10 live) < line 0 (12): slot 10
	if st := StateOf(e, ln[1]); st.FP[10] != fp {
		t.Fatalf("B not in line 1 slot 10: %+v", st)
	}
	armV.Store(true)
	close(resumeA) // A's CAS lands in line 0, slot 0
	<-pausedV
	if variant == "lone-key-later-write" {
		// No other key: C, a write of x whose clock reads 4 ms later,
		// builds on A's entry and moves line 0's lw itself.
		clk.Advance(4 * time.Millisecond)
		e.Update("x", c)
		close(resumeV)
		wg.Wait()
		e.setHooks(nil)
		return e, ln
	}
	e.Update("x", c) // C: on top of A's entry
	if variant == "moved-before-merge" {
		clk.Advance(4 * time.Millisecond)
		e.Update(y, 0.001) // line 0's lw: t0 + 4 ms
		close(resumeV)
	} else {
		armG.Store(true)
		close(resumeV)
		<-pausedG // A's merge, after its last header check, computed at t0
		clk.Advance(4 * time.Millisecond)
		e.Update(y, 0.001) // seals line 0: A's word (slot 1 empty) changes
		close(resumeG)
	}
	wg.Wait()
	e.setHooks(nil)
	return e, ln
}
