package bucket

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Deterministic replays of the races the seal exists for
// (docs/design.md, section 8, "Moving a line's time"): a write, an undo
// or a refund prepared against a line's time and held while another
// operation moves that time into later epochs. Each fails without the
// seal (or without the steps of a give-back).

// fillerFPs returns the fingerprints fill may write into lines of e
// (fill's own, and the one it steps to when avoiding a key's).
func fillerFPs(e *Engine) map[uint16]bool {
	fps := map[uint16]bool{}
	for i := range int(e.n) {
		for s := range SlotsPerLine {
			fps[uint16(0x100+17*s+1000*i)] = true
			fps[uint16(0x100+17*s+1000*i+1)] = true
		}
	}
	return fps
}

// keyAvoiding returns the first key prefix0, prefix1, ... whose
// fingerprint is neither a filler's (fillerFPs) nor one of not.
func keyAvoiding(t *testing.T, e *Engine, prefix string, not ...uint16) (string, uint16) {
	t.Helper()
	used := fillerFPs(e)
	for _, f := range not {
		used[f] = true
	}
	for k := range 1000 {
		key := fmt.Sprintf("%s%d", prefix, k)
		if _, _, kfp := e.Locate(key); !used[kfp] {
			return key, kfp
		}
	}
	t.Fatal("no key with a free fingerprint")
	return "", 0
}

// otherKey returns a key whose fingerprint is neither fp nor one that
// fill writes into lines of e.
func otherKey(t *testing.T, e *Engine, fp uint16) (string, uint16) {
	t.Helper()
	return keyAvoiding(t, e, "y", fp)
}

// ticksOf returns the ticks of ms milliseconds of e.
func ticksOf(e *Engine, ms uint64) uint64 { return ms * e.q.gn / e.q.gd }

// TestReplayStaleInsertAcrossSeal: W = TryUpdate(x, 1) on a fresh key
// checks line 1's header, picks its free slot 12, and is held right
// before its entry CAS. The clock moves 100 ms (50 slacks) and Update(y)
// moves line 1 there, in steps, sealing. W's word (slots 12 and 13, both
// empty) changed in the seal, so W's CAS fails and W decides again at
// the line's new time: x reads 1 token when W's write lands. Without the
// seal W's CAS lands a stamp 100 ms below the new window, read one or
// more wraps ahead: a phantom debt.
func TestReplayStaleInsertAcrossSeal(t *testing.T) {
	e, clk, ln, fp := replayEngine(t)
	y, yfp := otherKey(t, e, fp)
	fill(e, ln[0], 0, 13, fp, 20) // line 0: 13 live
	fill(e, ln[1], 1, 11, fp, 20) // line 1: y + 11 live = 12: W picks slot 12
	e.poke(ln[1], 0, yfp, Tick(e)+ticksOf(e, 5))
	pausedW, resumeW := make(chan struct{}), make(chan struct{})
	pausedV, resumeV := make(chan struct{}), make(chan struct{})
	var armV atomic.Bool
	e.setHooks(&testHooks{afterCheck: pauseOnce(armedTrue(), pausedW, resumeW), afterCAS: pauseOnce(&armV, pausedV, resumeV)})
	var wOK bool
	var wg sync.WaitGroup
	wg.Go(func() { wOK = e.TryUpdate("x", 1, 30) })
	<-pausedW
	clk.Advance(100 * time.Millisecond)
	e.Update(y, 1) // moves line 1 by 100 ms
	armV.Store(true)
	close(resumeW)
	<-pausedV // W's write has landed, not yet validated
	during := e.Query("x")
	close(resumeV)
	wg.Wait()
	if during != 1 {
		t.Fatalf("x reads %v right after W's write landed, want 1 (a stale write read against a later window?)", during)
	}
	if !wOK {
		t.Fatal("W denied: x owes nothing before it")
	}
	if q := e.Query("x"); q != 1 {
		t.Fatalf("x reads %v, want 1", q)
	}
}

// TestReplayStaleCandidateAcrossSeal: W = Update(x, 1) on x's entry (10
// tokens, sharing its word with an entry live 29 ms) checks the header
// and is held right before its CAS; the clock moves 15 ms and Update(y)
// moves the line there. The move's first step stops where x's entry
// (live at its base) still reads correctly, 10 ms on; the next step's
// base is past x's debt, so its seal clears x's entry, W's word changes
// and W's CAS fails: W decides again at the line's new time, where x
// owes nothing, and writes 1 token there. At no point does x read a
// phantom.
func TestReplayStaleCandidateAcrossSeal(t *testing.T) {
	e, clk, ln, fp := replayEngine(t)
	y, yfp := otherKey(t, e, fp)
	e.Update("x", 10) // x in line 0, slot 0
	if st := StateOf(e, ln[0]); st.FP[0] != fp {
		t.Fatalf("x not in line 0 slot 0: %+v", st)
	}
	now := Tick(e)
	e.poke(ln[0], 1, 0x7777, now+ticksOf(e, 29)) // x's word partner, live 29 ms
	e.poke(ln[0], 2, yfp, now+ticksOf(e, 29))    // y, in another word
	pausedW, resumeW := make(chan struct{}), make(chan struct{})
	pausedV, resumeV := make(chan struct{}), make(chan struct{})
	var armV atomic.Bool
	e.setHooks(&testHooks{afterCheck: pauseOnce(armedTrue(), pausedW, resumeW), afterCAS: pauseOnce(&armV, pausedV, resumeV)})
	var wg sync.WaitGroup
	wg.Go(func() { e.Update("x", 1) })
	<-pausedW
	clk.Advance(15 * time.Millisecond)
	e.Update(y, 1)
	armV.Store(true)
	close(resumeW)
	<-pausedV
	during := e.Query("x")
	close(resumeV)
	wg.Wait()
	if during != 1 || e.Query("x") != 1 {
		t.Fatalf("x reads %v right after W's write and %v after, want 1 (W's token, written again at the line's time)", during, e.Query("x"))
	}
}

// TestReplayRefundStepsAcrossSeal: x owes 10 tokens; TryReserve(x, 15)
// stores 25; Refund, giving back 15 tokens (more than the slack less two
// epochs, 3,101 ticks of 2,047 a ms), reads the line and is held before
// its first CAS; the clock moves 15 ms and Update(y) moves the line
// there (x's word is not sealed: x's entry and its partner are live at
// the move's base). Each CAS of the refund lowers the stamp by at most
// 3,101 ticks, from a read of the line, so the entry it stores reads
// correctly in the new window, and the last CAS, reading the new time,
// finds x's old debt expired and empties the slot: x reads 0. A refund
// in one CAS would store x's old stamp (10 ms after t0) under a window
// that starts 13 ms after t0: a phantom debt.
func TestReplayRefundStepsAcrossSeal(t *testing.T) {
	e, clk, ln, fp := replayEngine(t)
	y, yfp := otherKey(t, e, fp)
	e.Update("x", 10)
	if st := StateOf(e, ln[0]); st.FP[0] != fp {
		t.Fatalf("x not in line 0 slot 0: %+v", st)
	}
	now := Tick(e)
	e.poke(ln[0], 1, 0x7777, now+ticksOf(e, 29))
	e.poke(ln[0], 2, yfp, now+ticksOf(e, 29))
	rc, ok := e.TryReserve("x", 15, 30)
	if !ok {
		t.Fatal("reservation denied")
	}
	paused, resume := make(chan struct{}), make(chan struct{})
	e.setHooks(&testHooks{beforeLower: pauseOnce(armedTrue(), paused, resume)})
	var refunded bool
	var wg sync.WaitGroup
	wg.Go(func() { refunded = e.Refund(&rc) })
	<-paused
	clk.Advance(15 * time.Millisecond)
	e.Update(y, 1)
	close(resume)
	wg.Wait()
	if !refunded {
		t.Fatal("Refund reported false: nothing wrote x since the reservation")
	}
	if q := e.Query("x"); q != 0 {
		t.Fatalf("x reads %v after the refund, want 0 (10 tokens at t0, drained 15 ms)", q)
	}
	for s, f := range StateOf(e, ln[0]).FP {
		if f == fp {
			t.Fatalf("x still has an entry at slot %d after its debt expired", s)
		}
	}
}
