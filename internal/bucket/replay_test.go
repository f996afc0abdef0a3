package bucket

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// Deterministic replays of the races the validation exists for. Each
// holds one operation inside do() through the test hooks while others
// run, then lets it finish; each fails if the validation (or the merge)
// is taken out of do().

// replayEngine returns an engine of two lines on a fake clock at 1 token
// per ms (2047 ticks per ms), the line indexes of key x in view order,
// and x's fingerprint.
func replayEngine(t *testing.T) (*Engine, *sketchtest.FakeClock, [2]int, uint16) {
	t.Helper()
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	e := newTest(t, 2, Linear(1000, 30), clk)
	i0, i1, fp := e.Locate("x")
	return e, clk, [2]int{int(i0), int(i1)}, fp
}

// fill writes n filler entries (fingerprints other than avoid) into line
// i from slot from, each with a load of ms milliseconds from now.
func fill(e *Engine, i, from, n int, avoid uint16, ms uint64) {
	now := Tick(e)
	for s := from; s < from+n; s++ {
		fp := uint16(0x100 + 17*s + 1000*i)
		if fp == avoid {
			fp++
		}
		e.poke(i, s, fp, now+ms*e.q.gn/e.q.gd)
	}
}

// pauseOnce returns a hook that, the first time it is called while armed
// is set, signals paused and waits for resume; other calls pass.
func pauseOnce(armed *atomic.Bool, paused, resume chan struct{}) func() {
	var done atomic.Bool // not a sync.Once: Once.Do would block the other callers
	return func() {
		if armed.Load() && done.CompareAndSwap(false, true) {
			close(paused)
			<-resume
		}
	}
}

func armedTrue() *atomic.Bool {
	var a atomic.Bool
	a.Store(true)
	return &a
}

// TestReplayRacingInserts: A and B both TryUpdate(x, 1, limit 1) on a
// key not yet in the table. A reads first and picks line 1 (fewer live
// entries), then is held before its CAS; time moves on, two short-lived
// entries of line 0 expire, so B picks line 0 and is admitted. A's CAS
// then succeeds (its word did not change) but its validation sees B's
// entry: A undoes, decides again on B's debt, and is denied. Without the
// validation both are admitted: 2 past a limit of 1.
func TestReplayRacingInserts(t *testing.T) {
	e, clk, ln, fp := replayEngine(t)
	fill(e, ln[0], 0, 11, fp, 20) // line 0: 11 long-lived
	fill(e, ln[0], 11, 2, fp, 2)  //         + 2 expiring in 2 ms = 13 live
	fill(e, ln[1], 0, 12, fp, 20) // line 1: 12 live: A picks it
	paused, resume := make(chan struct{}), make(chan struct{})
	e.setHooks(&testHooks{beforeCAS: pauseOnce(armedTrue(), paused, resume)})
	var aOK bool
	var wg sync.WaitGroup
	wg.Go(func() { aOK = e.TryUpdate("x", 1, 1) })
	<-paused
	clk.Advance(3 * time.Millisecond) // line 0 now has 11 live: B picks it
	bOK := e.TryUpdate("x", 1, 1)
	close(resume)
	wg.Wait()
	if !bOK || aOK {
		t.Fatalf("A admitted %v, B admitted %v: want only B", aOK, bOK)
	}
	if q := e.Query("x"); q != 1 {
		t.Fatalf("x reads %v, want 1 (B's token)", q)
	}
	cands := 0
	for _, i := range ln {
		st := StateOf(e, i)
		for s := range SlotsPerLine {
			if st.FP[s] == fp {
				cands++
			}
		}
	}
	if cands != 1 {
		t.Fatalf("%d entries of x, want 1 (A's undone)", cands)
	}
}

// TestReplayMergeAfterFailedUndo: A = Update(x, 3) picks line 0 and is
// held before its CAS; other keys fill line 0, so B = Update(x, 1) puts x
// in line 1. A's CAS lands, and A is held again before validating; C =
// Update(x, 2) writes on top of A's entry (x's first entry), from a view
// holding both. A's validation sees B's entry, cannot undo (C wrote on
// top), and merges: x must read at least 3+1+2 = 6. Without the merge it
// reads max(3+2, 1) = 5.
func TestReplayMergeAfterFailedUndo(t *testing.T) {
	e, _, ln, fp := replayEngine(t)
	fill(e, ln[0], 4, 8, fp, 20)  // line 0: 8 live, slots 0..3 free: A takes slot 0
	fill(e, ln[1], 0, 10, fp, 20) // line 1: 10 live
	pausedA, resumeA := make(chan struct{}), make(chan struct{})
	pausedV, resumeV := make(chan struct{}), make(chan struct{})
	var armV atomic.Bool // A's validation is held, not B's or C's
	e.setHooks(&testHooks{beforeCAS: pauseOnce(armedTrue(), pausedA, resumeA), afterCAS: pauseOnce(&armV, pausedV, resumeV)})
	var wg sync.WaitGroup
	wg.Go(func() { e.Update("x", 3) })
	<-pausedA
	fill(e, ln[0], 2, 2, fp, 20)  // other keys take slots 2, 3 of line 0 (not A's word): 10 live
	fill(e, ln[0], 12, 2, fp, 20) //                                          + 2 = 12 live
	e.Update("x", 1)              // B: line 1 (10 live) < line 0 (12): slot 10
	armV.Store(true)
	close(resumeA) // A's CAS lands in line 0, slot 0
	<-pausedV
	e.Update("x", 2) // C: x's first entry is A's: on top of it
	close(resumeV)
	wg.Wait()
	if q := e.Query("x"); q < 6 {
		t.Fatalf("x reads %v, below its true load 6", q)
	}
}

// TestReplayStaleTime: A = TryUpdate(a, 5) reads its lines at t and is
// held before its CAS; time moves 50 ms and B, another key of the same
// lines, writes at t+50 ms (the lw of a line moves). A's CAS lands; its
// validation sees the moved lw, and its entry, live at the line's time,
// stands: A takes effect at its own time t, as it may, since it started
// before B (docs/design.md, section 3, "An operation's time is its
// clock read"), and a's debt reads 4.5 at t+50 ms (10/s). Until
// 2026-12-03 A undid and decided again at t+50 ms (5), and between its
// CAS and its undo a reader of a saw a write that might never take
// effect: a spurious denial of a key alone (an audit's
// TestAudit9TentativeWriteSpuriousDenial).
func TestReplayStaleTime(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	e := newTest(t, 2, Linear(10, 40), clk)
	paused, resume := make(chan struct{}), make(chan struct{})
	e.setHooks(&testHooks{beforeCAS: pauseOnce(armedTrue(), paused, resume)})
	var wg sync.WaitGroup
	wg.Go(func() { e.TryUpdate("a", 5, 20) })
	<-paused
	clk.Advance(50 * time.Millisecond)
	e.TryUpdate("b", 1, 20) // both lines are a's: lw moves to t+50 ms
	close(resume)
	wg.Wait()
	if q := e.Query("a"); q != 4.5 {
		t.Fatalf("a reads %v at t+50ms, want 4.5 (its debt taken at t)", q)
	}
}

// sameLine returns a key other than avoid whose first line is line i.
func sameLine(t *testing.T, e *Engine, i uint64, prefix string, avoid ...string) string {
	t.Helper()
next:
	for k := range 1000 {
		key := fmt.Sprintf("%s%d", prefix, k)
		for _, a := range avoid {
			if key == a {
				continue next
			}
		}
		if i0, _, _ := e.Locate(key); i0 == i {
			return key
		}
	}
	t.Fatalf("no key with first line %d", i)
	return ""
}

// TestReplayReadDuringMove: x takes 20 tokens (2 s of debt) at t0 in
// limit.New(10, 20)'s law (MaxDebt 40: 60,000 of the window's 65,536
// ticks, slack 5,535). At t0 + 3 s a Query of x reads x's line's entries
// and is held before reading its header again; meanwhile a write of y
// moves the line's lw to t0 + 3 s, where x's stamp (1 s expired, more
// than the slack) would read one wrap (4.37 s) ahead, and clears it. The
// Query must read 0: reading x's old entry in the new window is a phantom
// debt of 33.7 tokens (what the engine read when a move published the
// header before clearing, and readers read the header once).
func TestReplayReadDuringMove(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	e := newTest(t, 2, Linear(10, 40), clk)
	a, _, _ := e.Locate("x")
	y := sameLine(t, e, a, "y")
	if !e.TryUpdate("x", 20, 20) {
		t.Fatal("x denied its burst")
	}
	clk.Advance(3 * time.Second)
	paused, resume := make(chan struct{}), make(chan struct{})
	e.setHooks(&testHooks{afterLoad: pauseOnce(armedTrue(), paused, resume)})
	var q float64
	var wg sync.WaitGroup
	wg.Go(func() { q = e.Query("x") })
	<-paused
	e.Update(y, 1) // moves line a to t0 + 3 s
	close(resume)
	wg.Wait()
	if q != 0 {
		t.Fatalf("x reads %v tokens 1 s after its debt drained, want 0", q)
	}
	if st := StateOf(e, int(a)); st.LW != NowMs(e) {
		t.Fatalf("line's lw %d, want %d: y's write did not move it", st.LW, NowMs(e))
	}
}

// TestReplayCommitDuringLongMove: line a was written at t0 and holds no
// live entry (a reservation refunded). w, a fresh key of line a, reads
// its clock at t0 and its line, and is held (a goroutine preempted).
// At t0 + 3 s, y's write moves lw by more than the slack and is held
// before its header CAS: at the CAS that marks the line moving (first
// case), or at the one that moves lw (second). Then w writes: 1 token
// at t0, 100 ms of debt, which must read 0 at t0 + 3 s. A move taken
// from a read without w's entry, straight to t0 + 3 s, leaves w's stamp
// below the new window, where it reads one wrap ahead: 14.7 tokens. The
// moving bit makes w's write either land before the mover reads the line
// again (first case) or wait for the move: w, finding the line moving,
// finishes the move to t0 + 1 ms itself and takes its token then, and
// y's CAS fails and y moves on from a read that holds w's entry.
func TestReplayCommitDuringLongMove(t *testing.T) {
	for _, hold := range []struct {
		name   string
		moving bool // hold y at its CAS from a moving header
	}{{"mark", false}, {"move", true}} {
		t.Run(hold.name, func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			clk.Set(1_000_000)
			e := newTest(t, 2, Linear(10, 40), clk)
			a, _, _ := e.Locate("r")
			y := sameLine(t, e, a, "y")
			w := sameLine(t, e, a, "w")
			rc, ok := e.TryReserve("r", 1, 20)
			if !ok || !e.Refund(&rc) {
				t.Fatal("reservation not taken and refunded")
			}
			pausedW, resumeW := make(chan struct{}), make(chan struct{})
			pausedY, resumeY := make(chan struct{}), make(chan struct{})
			var doneY atomic.Bool
			e.setHooks(&testHooks{
				afterLoad: pauseOnce(armedTrue(), pausedW, resumeW),
				beforeMove: func(h uint64) {
					if hdrMoving(h) == hold.moving && doneY.CompareAndSwap(false, true) {
						close(pausedY)
						<-resumeY
					}
				},
			})
			var wOK bool
			wDone := make(chan struct{})
			go func() { wOK = e.TryUpdate(w, 1, 20); close(wDone) }()
			<-pausedW // w has read its clock (t0) and its first line
			clk.Advance(3 * time.Second)
			var wg sync.WaitGroup
			wg.Go(func() { e.Update(y, 1) })
			<-pausedY
			close(resumeW)
			<-wDone // w finishes while y is held
			close(resumeY)
			wg.Wait()
			if !wOK {
				t.Fatal("w denied at t0")
			}
			if q := e.Query(w); q != 0 {
				t.Fatalf("w reads %v tokens at t0 + 3 s, want 0 (its 100 ms of debt drained)", q)
			}
			if q := e.Query(y); q != 1 {
				t.Fatalf("y reads %v, want 1", q)
			}
		})
	}
}

// TestReplayBuiltOnAfterTimeMoved: A = TryUpdate(x, 1) at t0 writes its
// entry and is held before its validation; the clock moves 1 ms and B =
// TryUpdate(x, 1) reads A's entry, moves the line to t0 + 1 ms and
// writes on top of A's entry. A's validation sees the moved lw (a time
// conflict, no candidate of x changed) and cannot undo (B wrote on top).
// A's write stands, inside B's decision: A is admitted, at t0, and x
// reads both tokens less the 1 ms drained. Before, A was denied and its
// token kept: a spurious denial of a key alone, with an over-count of
// its n (found by tests/limit's TestReserveDelaysExactMovingClock under
// -race).
func TestReplayBuiltOnAfterTimeMoved(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	e := newTest(t, 2, Linear(10, 40), clk)
	paused, resume := make(chan struct{}), make(chan struct{})
	e.setHooks(&testHooks{afterCAS: pauseOnce(armedTrue(), paused, resume)})
	var aOK bool
	var wg sync.WaitGroup
	wg.Go(func() { aOK = e.TryUpdate("x", 1, 20) })
	<-paused
	clk.Advance(time.Millisecond)
	if !e.TryUpdate("x", 1, 20) {
		t.Fatal("B denied")
	}
	close(resume)
	wg.Wait()
	if !aOK {
		t.Fatal("A denied: its write stands under B's, and x was far below its limit")
	}
	// Two tokens, 200 ms, taken at t0 and t0 + 1 ms: 199 ms left at
	// t0 + 1 ms, 1.99 tokens.
	if q := e.Query("x"); q != 1.99 {
		t.Fatalf("x reads %v, want 1.99", q)
	}
}
