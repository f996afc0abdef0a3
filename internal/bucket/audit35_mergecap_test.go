package bucket

import (
	"math/big"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a35MergeRace replays TestReplayMergeAfterFailedUndo's race (the shape
// of audit 34's a34MergeRace, time frozen): A = Update(x, a) reads x
// absent and is held before its CAS; B = Update(x, b) inserts into line
// 1; A's CAS lands in line 0 slot 0 and A is held before its validation;
// C = Update(x, c) builds on A's entry; A validates, sees B's slot
// changed, cannot undo (C built on it) and merges. fillMs is the filler
// entries' life in ms (long enough to stay live whatever the tick). It
// returns the engine and x's lines.
func a35MergeRace(t *testing.T, law Law, clk *sketchtest.FakeClock, skew time.Duration, fillMs uint64, a, b, c float64) (*Engine, [2]int) {
	t.Helper()
	e := newTest(t, 2, law, clk)
	clk.Advance(skew) // from the engine's epoch
	i0, i1, fp := e.Locate("x")
	ln := [2]int{int(i0), int(i1)}
	fill(e, ln[0], 4, 8, fp, fillMs)  // line 0: 8 live, slots 0..3 free: A takes slot 0
	fill(e, ln[1], 0, 10, fp, fillMs) // line 1: 10 live
	pausedA, resumeA := make(chan struct{}), make(chan struct{})
	pausedV, resumeV := make(chan struct{}), make(chan struct{})
	var armV atomic.Bool
	e.setHooks(&testHooks{
		beforeCAS: pauseOnce(armedTrue(), pausedA, resumeA),
		afterCAS:  pauseOnce(&armV, pausedV, resumeV),
	})
	var wg sync.WaitGroup
	wg.Go(func() { e.Update("x", a) }) // A
	<-pausedA
	fill(e, ln[0], 2, 2, fp, fillMs)
	fill(e, ln[0], 12, 2, fp, fillMs) // line 0: 12 live
	e.Update("x", b)                  // B: line 1 (10 live) < line 0 (12): slot 10
	if st := StateOf(e, ln[1]); st.FP[10] != fp {
		t.Fatalf("B not in line 1 slot 10: %+v", st)
	}
	armV.Store(true)
	close(resumeA) // A's CAS lands in line 0, slot 0
	<-pausedV
	e.Update("x", c) // C: on top of A's entry
	close(resumeV)   // A validates: B's slot changed, undo fails: merge
	wg.Wait()
	e.setHooks(nil)
	if st := StateOf(e, ln[0]); st.FP[0] != fp {
		t.Fatalf("A's entry not in line 0 slot 0: %+v", st)
	}
	return e, ln
}

// a35Rat is x as an exact rational.
func a35Rat(x float64) *big.Rat { return new(big.Rat).SetFloat64(x) }

// TestAudit35FixedMergeCapRoundsDown: an Update's merge caps its sum at
// tlo + span (docs/design.md section 8, the merge: "capped at tlo+span"
// in op.go's est = min(base+sum, tlo+q.span)), where every other write
// stamps from thi, the end of its tick ("a write counts from the end of
// its tick, so a debt can read up to one tick high", doc.go). When the
// merge's time is inside a tick (a law whose tick is longer than 1 ms)
// and the racing Updates reach Max, the merged entry says "Max at the
// start of the tick": the key reads below its true load (Max at the
// operation's millisecond, drained from there) at the next tick, and a
// TryUpdate there is admitted past its limit.
//
// Law Linear(0.01, 30): 2000 ticks a token, 50 ms a tick (rate exact,
// 0.01 token/s). Time frozen at a millisecond 25 ms into a tick: A =
// Update(x, 20), B = Update(x, 20), C = Update(x, 5) race as in
// TestReplayMergeAfterFailedUndo; every write is at t0 and the true load
// is 30 (Max, clamped) at t0. At t1, the next tick's first millisecond
// (25 ms later), the true load is 30 - 0.01*0.025 = 29.99975. The engine
// reads 29.9995 (one tick, 0.0005, below Max) and admits TryUpdate(x,
// 0.0005, 30), whose truth is 30.00025 > 30.
//
// Control: the same 45 tokens in sequential Updates at t0 read 30 at t1
// (stamp thi + span) and deny the probe.
//
// Promise: internal/bucket/doc.go, Guarantees: "One-sided: Query(k) >=
// k's true load, whatever ... races; a key at its limit is never
// admitted early"; "a write counts from the end of its tick, so a debt
// can read up to one tick high" (high, never low).
func TestAudit35FixedMergeCapRoundsDown(t *testing.T) {
	law := Linear(0.01, 30)
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	probe := newTest(t, 2, law, clk)
	if probe.q.gn != 1 || probe.q.gd != 50 || probe.q.u != 2000 {
		t.Fatalf("quantum: gn %d gd %d u %v, want 1, 50, 2000", probe.q.gn, probe.q.gd, probe.q.u)
	}
	// t0: 25 ms into a tick (the engine's epoch starts one).
	ctlClk := sketchtest.NewFakeClock()
	ctlClk.Set(1_000_000)
	ctl := newTest(t, 2, law, ctlClk)
	ctlClk.Advance(25 * time.Millisecond)
	if m := NowMs(ctl) % 50; m != 25 {
		t.Fatalf("clock at %d ms into a tick, want 25", m)
	}
	for _, n := range []float64{20, 20, 5} {
		ctl.Update("x", n)
	}
	fillMs := uint64(3_000_000) // 60 ticks: fillers stay live
	e, ln := a35MergeRace(t, law, clk, 25*time.Millisecond, fillMs, 20, 20, 5)
	clk.Advance(25 * time.Millisecond) // t1: the next tick
	ctlClk.Advance(25 * time.Millisecond)
	if m := NowMs(e) % 50; m != 0 {
		t.Fatalf("t1 at %d ms into a tick, want 0", m)
	}
	// The exact truth: Max at t0, drained 25 ms at 0.01 token/s.
	truth := new(big.Rat).Sub(a35Rat(30), new(big.Rat).SetFrac64(25, 100_000))
	q, qc := e.Query("x"), ctl.Query("x")
	n := 1 / probe.q.u // one tick
	admitted := e.TryUpdate("x", n, 30)
	admittedCtl := ctl.TryUpdate("x", n, 30)
	tf, _ := truth.Float64()
	if a35Rat(q).Cmp(truth) < 0 || admitted {
		t.Fatalf("x after racing Updates 20, 20, 5 at t0 (A merged), read 25 ms later at the next tick: Query %v, want >= %v (the exact truth: Max 30 at t0 less 25 ms at 0.01/s); TryUpdate(x, %v, limit 30) admitted=%v, want false (truth + n = %v > 30). Control (the same Updates in sequence): Query %v, admitted=%v. doc.go: \"Query(k) >= k's true load, whatever ... races; a key at its limit is never admitted early\" and \"a write counts from the end of its tick, so a debt can read up to one tick high\". The merge's cap min(base+sum, tlo+q.span) (op.go) stamps Max from the tick's start. line 0: %+v line 1: %+v",
			q, tf, n, admitted, tf+n, qc, admittedCtl, StateOf(e, ln[0]), StateOf(e, ln[1]))
	}
}

// TestAudit35MergeCapWholeTicksHolds: the control of
// TestAudit35FixedMergeCapRoundsDown where every millisecond is whole
// ticks (Linear(1000, 30): 2047 ticks a ms, tlo == thi): the merged key
// reads Max and a one-tick TryUpdate at limit Max is denied, at the
// merge's instant and 3 ms later (reading 27). Also under the
// exponential law (Exponential(250, 30, 0.01)), whose merge stamps from
// thi: the key reads at least Max decayed, less DropSlack.
func TestAudit35MergeCapWholeTicksHolds(t *testing.T) {
	t.Run("linear", func(t *testing.T) {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_000_000)
		e, ln := a35MergeRace(t, Linear(1000, 30), clk, 0, 20, 20, 20, 5)
		if q := e.Query("x"); q != 30 {
			t.Fatalf("x after racing Updates 20, 20, 5 (merged): Query %v, want 30 (Max); line 0: %+v line 1: %+v", q, StateOf(e, ln[0]), StateOf(e, ln[1]))
		}
		if e.TryUpdate("x", 1/e.q.u, 30) {
			t.Fatalf("one-tick TryUpdate at limit 30 admitted on a key at Max")
		}
		clk.Advance(3 * time.Millisecond)
		if q := e.Query("x"); q < 27-1e-9 {
			t.Fatalf("x 3 ms after reaching Max: Query %v, want >= 27", q)
		}
	})
	t.Run("exponential", func(t *testing.T) {
		law := Exponential(250, 30, 0.01)
		clk := sketchtest.NewFakeClock()
		clk.Set(1_000_000)
		ctlClk := sketchtest.NewFakeClock()
		ctlClk.Set(1_000_000)
		ctl := newTest(t, 2, law, ctlClk)
		ctlClk.Advance(7 * time.Millisecond)
		ctl.Update("x", 45) // clamped at Max
		ctlClk.Advance(9 * time.Millisecond)
		truth := ctl.Query("x")
		e, ln := a35MergeRace(t, law, clk, 7*time.Millisecond, 20, 20, 20, 5)
		clk.Advance(9 * time.Millisecond)
		if q := e.Query("x"); q < truth-DropSlack(e) {
			t.Fatalf("x 9 ms after racing Updates 20, 20, 5 (merged): Query %v, want >= %v (Max decayed 9 ms) less %v; line 0: %+v line 1: %+v", q, truth, DropSlack(e), StateOf(e, ln[0]), StateOf(e, ln[1]))
		}
	})
}
