package bucket

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// Audit 33: give-backs and evictions that store an empty slot under the
// epoch of a read taken before a move (the "stale version" ABA).
//
// A seal changes the word of every free slot, so that a CAS prepared on
// such a word before the seal fails (docs/design.md, section 8, "Why a
// CAS prepared before a move is safe"). But an empty slot's version is
// also written, outside the seal, as the epoch of the writer's read of
// the line: lower (an undo or a Refund that empties its slot) and an
// eviction emptying its victim both compute mkEmpty(epoch(lt)) from a
// read, then CAS. When a move into a later epoch lands between that read
// and that CAS, and the word is not changed by the seal (its two entries
// live at the move's base), the CAS stores the old epoch's version: the
// very word a CAS prepared before the move read, if that CAS read the
// slot empty in the same epoch (every slot emptied in an epoch carries
// that epoch's bits). The held CAS then lands a stamp under the old
// window: a phantom debt.

// a33Keys returns n keys whose fingerprints differ from each other and
// from every filler fingerprint fill writes, with line i0 == first when
// first >= 0 (checked for the first key only).
func a33Keys(t *testing.T, e *Engine, n int, first int) []string {
	t.Helper()
	used := fillerFPs(e)
	var keys []string
	for k := 0; len(keys) < n && k < 100000; k++ {
		key := fmt.Sprintf("a33k%d", k)
		i0, _, fp := e.Locate(key)
		if used[fp] {
			continue
		}
		if len(keys) == 0 && first >= 0 && int(i0) != first {
			continue
		}
		used[fp] = true
		keys = append(keys, key)
	}
	if len(keys) < n {
		t.Fatal("not enough keys")
	}
	return keys
}

// TestAudit33FixedRefundStaleEpochEmptyPhantom: law Linear(1000, 30)
// (2,047 ticks a ms, slack 4,125 ticks = 2 ms, seal 512 ticks). Line 0:
// 13 live fillers (29 ms) plus y's entry, slot 12 free; line 1 full.
// At t0 (epoch E):
//
//  1. x = TryReserve(x, 20) inserts into slot 12; Refund empties it
//     (version E, the epoch of its read).
//  2. W = TryUpdate(z, 1, 30), z a fresh key, picks slot 12 (empty, version
//     E), passes its last header check and is held before its CAS.
//  3. x = TryReserve(x, 20) inserts into slot 12 again (debt 20 ms).
//  4. Refund(x) reads the line (epoch E, not moving), computes the empty
//     slot of version E, and is held before its CAS (beforeLower).
//  5. The clock moves 15 ms; Update(y, 1) moves line 0 there: into a
//     later epoch, one step (x's entry, live 20 ms, bounds it to 20 ms),
//     sealing; slot 12's word holds x's entry and a live filler, so the
//     seal leaves it as it is.
//  6. The Refund's CAS lands: slot 12 = empty of version E, the word W
//     read in step 2.
//  7. W's CAS lands: z's stamp (t0 + 1 ms) under a window that now
//     starts at t0 + 13 ms: z reads one wrap (32 ms) ahead.
//
// z's true load at t0 + 15 ms is 0 (1 token at t0, drained after 1 ms),
// yet it reads 18 tokens and TryUpdate(z, 15, 30) is denied.
//
// Promises: doc.go, "a write prepared before the move either fails its
// CAS or stores a stamp that reads correctly in every window to come";
// design.md, "Residues and ABA": the word-back exposure is "1 in 65,536
// of such double writes" (here it is certain: both empties carry epoch
// E's bits); doc.go Guarantees, one-sided / a lone key far below its
// limit is never denied except by the two racing-insert cases.
func TestAudit33FixedRefundStaleEpochEmptyPhantom(t *testing.T) {
	e, clk, ln, _ := replayEngine(t)
	ks := a33Keys(t, e, 3, -1)
	x, y, z := ks[0], ks[1], ks[2]
	_, _, yfp := e.Locate(y)
	fill(e, ln[1], 0, 14, 0, 29) // the other line: full
	L := 0
	fill(e, L, 1, 11, 0, 29) // line 0: slots 1..11, 13 live
	fill(e, L, 13, 1, 0, 29)
	e.poke(L, 0, yfp, Tick(e)+ticksOf(e, 29)) // y's entry, slot 0
	rc, ok := e.TryReserve(x, 20, 30)
	if !ok || rc.line != uint32(L) || rc.slot != 12 {
		t.Fatalf("x's reservation: ok %v line %d slot %d, want line %d slot 12", ok, rc.line, rc.slot, L)
	}
	if !e.Refund(&rc) {
		t.Fatal("first refund false")
	}

	pausedW, resumeW := make(chan struct{}), make(chan struct{})
	pausedR, resumeR := make(chan struct{}), make(chan struct{})
	var armW, armR atomic.Bool
	e.setHooks(&testHooks{afterCheck: pauseOnce(&armW, pausedW, resumeW), beforeLower: pauseOnce(&armR, pausedR, resumeR)})
	var wOK, rOK bool
	var wg sync.WaitGroup
	armW.Store(true)
	wg.Go(func() { wOK = e.TryUpdate(z, 1, 30) })
	<-pausedW
	armW.Store(false)
	rc, ok = e.TryReserve(x, 20, 30)
	if !ok || rc.line != uint32(L) || rc.slot != 12 {
		t.Fatalf("x's second reservation: ok %v line %d slot %d", ok, rc.line, rc.slot)
	}
	armR.Store(true)
	var wgR sync.WaitGroup
	wgR.Go(func() { rOK = e.Refund(&rc) })
	<-pausedR
	clk.Advance(15 * time.Millisecond)
	e.Update(y, 1) // moves line 0 by 15 ms, sealing
	close(resumeR)
	wgR.Wait() // the refund's CAS lands first
	close(resumeW)
	wg.Wait()
	if !rOK {
		t.Fatal("refund reported false")
	}
	if !wOK {
		t.Fatal("W denied: z owes nothing")
	}
	// W's CAS must fail (the seal changed its word) and W write again at
	// the line's time: z then owes W's token on top of what a fresh key
	// inherits there, never a phantom.
	got, allow := e.Query(z), a33Inherit(e)+1
	denied := !e.TryUpdate(z, 15, 30)
	if got > allow || allow+15 <= 30 && denied {
		t.Fatalf("z (one token at t0, drained after 1 ms) reads %.3f tokens at t0 + 15 ms, want 0; "+
			"(at most %v: a fresh key's inheritance plus W's token written again at the line's time); "+
			"TryUpdate(z, 15, 30) denied: %v. W's CAS, prepared before the move, landed on the word a "+
			"Refund restored with its pre-move epoch's version (doc.go: a write prepared before the move "+
			"either fails its CAS or stores a stamp that reads correctly in every window to come)", got, allow, denied)
	}
}

// TestAudit33FixedEvictionStaleEpochEmptyPhantom: the same ABA through
// an eviction (op.go: an evictor whose floor already covers its victim
// CASes the victim's word to mkEmpty(epoch of its view's header) with no
// header check before that CAS). Law Linear(1000, 30); line 0: y's entry
// and 12 fillers (29 ms), slot 12 free; line 1 full (29 ms). At t0
// (epoch E):
//
//  1. x = TryReserve(x, 20) into slot 12; Refund: slot 12 empty, version E.
//  2. W = TryUpdate(z, 1, 30) picks slot 12 and is held before its CAS.
//  3. v = Update(v, 20) fills slot 12 (20 ms); TryReserve(v, 5) takes it
//     to 25 ms.
//  4. K = Update(k, 1) (a fresh key, line 0 first) reads both lines: both
//     full, the victim is v. Held after its read; Refund(v) brings v back
//     to 20 ms. K raises line 0's floor to 25 ms; its victim CAS fails (v
//     changed) and it reads again: victim v (20 ms), floor already 25 ms,
//     so no header CAS. Held after this read.
//  5. The clock moves 15 ms and Update(y, 1) moves line 0 there (v, live
//     20 ms, bounds the step; slot 12's word, v and a live filler, is not
//     sealed).
//  6. K's victim CAS lands: slot 12 = empty of version E (its view's
//     epoch), the word W read. K is held before its own entry CAS.
//  7. W's CAS lands: z's stamp (t0 + 1 ms) under a window starting at
//     t0 + 13 ms: z reads 18 tokens, truth 0.
//
// Promises: as TestAudit33FixedRefundStaleEpochEmptyPhantom; design.md
// also says "An eviction writes only into a slot it has emptied itself
// (after raising the floor), under a header checked after emptying it:
// the free case", which covers the evictor's own insert, not the empty
// slot it leaves for a CAS prepared by another operation.
func TestAudit33FixedEvictionStaleEpochEmptyPhantom(t *testing.T) {
	e, clk, ln, _ := replayEngine(t)
	L := 0
	ks := a33Keys(t, e, 5, L)
	k, x, y, z, v := ks[0], ks[1], ks[2], ks[3], ks[4]
	_, _, yfp := e.Locate(y)
	fill(e, ln[1], 0, 14, 0, 29)
	fill(e, L, 1, 11, 0, 29)
	fill(e, L, 13, 1, 0, 29)
	e.poke(L, 0, yfp, Tick(e)+ticksOf(e, 29))
	rc, ok := e.TryReserve(x, 20, 30)
	if !ok || rc.line != uint32(L) || rc.slot != 12 || !e.Refund(&rc) {
		t.Fatalf("x's reservation: ok %v line %d slot %d", ok, rc.line, rc.slot)
	}

	pausedW, resumeW := make(chan struct{}), make(chan struct{})
	pausedB, resumeB := make(chan struct{}), make(chan struct{})
	var armW, armK, armB, inPause atomic.Bool
	var loads atomic.Int32
	kPaused, kResume := make(chan int32), make(chan struct{})
	e.setHooks(&testHooks{
		afterCheck: pauseOnce(&armW, pausedW, resumeW),
		beforeCAS:  pauseOnce(&armB, pausedB, resumeB),
		afterLoad: func() {
			if !armK.Load() || inPause.Load() {
				return
			}
			if n := loads.Add(1); n == 2 || n == 4 {
				inPause.Store(true)
				kPaused <- n
				<-kResume
				inPause.Store(false)
			}
		},
	})
	var wOK bool
	var wg, wgW sync.WaitGroup
	armW.Store(true)
	wgW.Go(func() { wOK = e.TryUpdate(z, 1, 30) })
	<-pausedW
	armW.Store(false)
	e.Update(v, 20)
	rv, ok := e.TryReserve(v, 5, 30)
	if !ok || rv.line != uint32(L) || rv.slot != 12 {
		t.Fatalf("v's reservation: ok %v line %d slot %d", ok, rv.line, rv.slot)
	}
	armK.Store(true)
	wg.Go(func() { e.Update(k, 1) })
	if n := <-kPaused; n != 2 {
		t.Fatalf("pause %d", n)
	}
	if !e.Refund(&rv) {
		t.Fatal("v's refund false")
	}
	kResume <- struct{}{}
	if n := <-kPaused; n != 4 {
		t.Fatalf("pause %d", n)
	}
	if st := StateOf(e, L); st.Floor == 0 {
		t.Fatalf("K did not raise line 0's floor: %+v", st)
	}
	clk.Advance(15 * time.Millisecond)
	e.Update(y, 1) // moves line 0 by 15 ms, sealing
	armB.Store(true)
	kResume <- struct{}{}
	<-pausedB // K emptied slot 12 and is held before its entry CAS
	armK.Store(false)
	if st := StateOf(e, L); st.FP[12] != 0 {
		t.Fatalf("K did not empty slot 12: %+v", st)
	}
	close(resumeW)
	wgW.Wait() // W's CAS lands, K still held
	got := e.Query(z)
	close(resumeB)
	wg.Wait()
	if !wOK {
		t.Fatal("W denied: z owes nothing")
	}
	if allow := a33Inherit(e) + 1; got > allow {
		t.Fatalf("z (one token at t0, drained after 1 ms) reads %.3f tokens at t0 + 15 ms, want at most %v "+
			"(a fresh key's inheritance plus W's token written again at the line's time): W's CAS, "+
			"prepared before the move, landed on the word an eviction emptied with its pre-move epoch's version "+
			"(doc.go: a write prepared before the move either fails its CAS or stores a stamp that reads "+
			"correctly in every window to come)", got, allow)
	}
}

// TestAudit33FixedUndoStaleEpochEmptyPhantom: the same ABA through an
// undo (a TryUpdate whose validation saw its own racing insert, the
// first documented conflict case; lower empties the slot it inserted
// into). Law Linear(1000, 30). Line 0: y and 12 fillers (29 ms), slot 12
// holding an entry that expires after 1 ms; line 1: 12 fillers (29 ms)
// and 2 expiring after 4 ms. At 2 ms, Update(y, 1) moves line 0 into a
// later epoch E; its seal clears slot 12 (version E). W = TryUpdate(z, 1,
// 30) picks slot 12 and is held before its CAS; A = TryUpdate(x, 20, 30)
// picks it too and is held before its CAS; at 5 ms B = TryUpdate(x, 1,
// 30) puts x in line 1 (two free slots there now). A's CAS lands, its
// validation sees B's entry, and its undo reads line 0 (epoch E) and is
// held before its CAS; the clock moves to 17 ms and Update(y, 1) moves
// line 0 there (A's entry, live until 22 ms, bounds the step; the word is
// not sealed). The undo's CAS stores the empty of version E: W's word;
// W's CAS lands z's stamp (3 ms) under a window starting at 15 ms: z
// reads 18 tokens, truth 0.
func TestAudit33FixedUndoStaleEpochEmptyPhantom(t *testing.T) {
	a33UndoStale(t, Linear(1000, 30), 17, 0)
}

// TestAudit33FixedUndoStaleEpochEmptyPhantomExp: the same replay with
// the exponential law Exponential(250, 30, 0.01) (1,918 ticks a ms; a
// load of 1 lives 18.4 ms above Resolution, 20 lives 30.4 ms). The line
// moves to 26 ms. z's true load there is e^(-250 x 0.024) = 0.0025 (one
// unit at 2 ms); it reads 12.7: z's stamp (20.4 ms) lies below the
// window (from 23.9 ms) and reads one wrap ahead.
func TestAudit33FixedUndoStaleEpochEmptyPhantomExp(t *testing.T) {
	a33UndoStale(t, Exponential(250, 30, 0.01), 26, 1)
}

// a33UndoStale runs the undo replay under law, moving line 0 to moveTo ms
// while the undo is held, and fails if z then reads above bound (z's
// one unit, written at 2 ms, decayed to moveTo: 0 for the linear law, at
// most 1 for the exponential).
func a33UndoStale(t *testing.T, law Law, moveTo int, bound float64) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	e := newTest(t, 2, law, clk)
	ks := a33Keys(t, e, 4, -1)
	x, y, z := ks[0], ks[1], ks[2]
	_, _, yfp := e.Locate(y)
	L, M := 0, 1
	fill(e, L, 1, 11, 0, 29)
	fill(e, L, 13, 1, 0, 29)
	fill(e, L, 12, 1, 0, 1) // expires after 1 ms: the seal at 2 ms clears it
	e.poke(L, 0, yfp, Tick(e)+ticksOf(e, 29))
	fill(e, M, 0, 12, 0, 29)
	fill(e, M, 12, 2, 0, 4)
	clk.Advance(2 * time.Millisecond)
	e.Update(y, 1) // line 0 to 2 ms, a later epoch: slot 12 cleared
	if st := StateOf(e, L); st.LW != 2 || st.FP[12] != 0 {
		t.Fatalf("line 0 after the first move: %+v", st)
	}
	pausedW, resumeW := make(chan struct{}), make(chan struct{})
	pausedA, resumeA := make(chan struct{}), make(chan struct{})
	pausedU, resumeU := make(chan struct{}), make(chan struct{})
	var armW, armA, armU atomic.Bool
	e.setHooks(&testHooks{
		afterCheck:  pauseOnce(&armW, pausedW, resumeW),
		beforeCAS:   pauseOnce(&armA, pausedA, resumeA),
		beforeLower: pauseOnce(&armU, pausedU, resumeU),
	})
	var wOK, aOK bool
	var wgW, wgA sync.WaitGroup
	armW.Store(true)
	wgW.Go(func() { wOK = e.TryUpdate(z, 1, 30) })
	<-pausedW
	armA.Store(true)
	wgA.Go(func() { aOK = e.TryUpdate(x, 20, 30) })
	<-pausedA
	clk.Advance(3 * time.Millisecond)
	if !e.TryUpdate(x, 1, 30) {
		t.Fatal("B denied")
	}
	if st := StateOf(e, M); st.LW != 5 {
		t.Fatalf("B did not write line 1: %+v", st)
	}
	armU.Store(true)
	close(resumeA)
	<-pausedU // A's undo, read at epoch E, before its CAS
	clk.Advance(time.Duration(moveTo-5) * time.Millisecond)
	e.Update(y, 1) // moves line 0 to moveTo ms, sealing
	close(resumeU)
	wgA.Wait()
	if st := StateOf(e, L); st.FP[12] != 0 {
		t.Fatalf("A's undo did not empty slot 12: %+v", st)
	}
	close(resumeW)
	wgW.Wait()
	if !wOK {
		t.Fatal("W denied: z owes nothing")
	}
	// W's CAS must fail and W write its unit again at the line's time,
	// on top of what a fresh key inherits there: never a phantom.
	bound += a33Inherit(e) + 1
	got := e.Query(z)
	if got > bound {
		t.Fatalf("z (one unit at 2 ms) reads %.4f at %d ms, want at most %v (A admitted %v): "+
			"W's CAS, prepared before the move, landed on the word an undo emptied with its pre-move epoch's "+
			"version (doc.go: a write prepared before the move either fails its CAS or stores a stamp that "+
			"reads correctly in every window to come)", got, moveTo, bound, aOK)
	}
}

// a33Inherit returns what a key of no entry reads on e's two lines now:
// the larger floor's load.
func a33Inherit(e *Engine) float64 {
	fl := max(StateOf(e, 0).Floor, StateOf(e, 1).Floor)
	return e.q.value(fl, Tick(e))
}
