package bucket

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit10RacingInsertsLoneKeyDenied: x is a key alone (no other key
// has its fingerprint), with no entry (never written, or its entry
// cleared by a move after it drained, as happens to every idle key).
// Three of x's own requests race, each TryUpdate(x, 1, 20), x owing 0:
//
//  1. A reads x's lines (no candidate), picks a free slot of line i0
//     (fewer live entries) and is held before its CAS.
//  2. Other keys' entries land in line i0 (in words A's slot is not
//     in), so line i1 now has fewer live entries.
//  3. B reads (no candidate), takes a free slot of line i1, CASes, and
//     is held before its validation.
//  4. A CASes its slot of line i0 (its word did not change) and is held
//     before its validation.
//  5. C reads both of x's entries, writes on top of the first (A's),
//     and is admitted.
//  6. A validates: B's slot, a candidate of x, changed; A cannot undo
//     (C wrote on top) and is denied, keeping its write.
//
// x owed 0 and asked for 1 of 20: every serial order of A, B, C admits
// all three (3 tokens). TryUpdate's doc: "For one key it is exact under
// contention"; docs/design.md, section 8, "Exact TryUpdate for one key":
// "no tentative write is ever visible (no second candidate exists), so
// no denial is spurious". Here a second candidate exists: two racing
// inserts of the key itself, into different lines.
func TestAudit10RacingInsertsLoneKeyDenied(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	e := newTest(t, 2, Linear(10, 40), clk)
	i0, i1, fp := e.Locate("x")
	fill(e, int(i1), 0, 2, fp, 5000) // line i1: 2 live; line i0: 0: A picks i0, slot 0
	var bc, ac atomic.Int32
	pA, rA := make(chan struct{}), make(chan struct{})
	pB, rB := make(chan struct{}), make(chan struct{})
	pA2, rA2 := make(chan struct{}), make(chan struct{})
	e.setHooks(&testHooks{
		beforeCAS: func() {
			if bc.Add(1) == 1 { // A
				close(pA)
				<-rA
			}
		},
		afterCAS: func() {
			switch ac.Add(1) {
			case 1: // B
				close(pB)
				<-rB
			case 2: // A
				close(pA2)
				<-rA2
			}
		},
	})
	var aOK, bOK bool
	var wg sync.WaitGroup
	aDone := make(chan struct{})
	wg.Go(func() { defer close(aDone); aOK = e.TryUpdate("x", 1, 20) })
	<-pA
	fill(e, int(i0), 2, 4, fp, 5000) // line i0: 4 live (slots 2..5), A's word (slots 0, 1) unchanged
	wg.Go(func() { bOK = e.TryUpdate("x", 1, 20) })
	<-pB
	close(rA)
	<-pA2
	cOK := e.TryUpdate("x", 1, 20)
	close(rA2)
	// A finishes while B is held (past rA2 its hooks block no more). A
	// 10 ms sleep let B go first under qemu on a loaded machine (audit
	// 157: 7 runs in 1,600).
	select {
	case <-aDone:
	case <-time.After(10 * time.Second):
		t.Fatal("A never finished while B was held")
	}
	close(rB)
	wg.Wait()
	e.setHooks(nil)
	q := e.Query("x")
	t.Logf("A %v, B %v, C %v; x reads %v", aOK, bOK, cOK, q)
	// The documented limit (docs/design.md, section 8, "Exact TryUpdate
	// for one key": a key's own racing inserts): A is denied and its
	// token kept. The day every serial order's answer (all three
	// admitted, 3) comes out, this test says the docs are stale.
	if aOK || !bOK || !cOK || q != 3 {
		t.Fatalf("A %v, B %v, C %v, x reads %v: the documented outcome is A denied keeping its token, B and C admitted, 3 (docs/design.md, section 8)", aOK, bOK, cOK, q)
	}
}

// TestAudit10ClearedExpiredCandidateDenies: x is a key alone with a live
// entry in line i0 and an expired one in line i1 (left by an earlier
// racing insert; it drained long ago). A = TryUpdate(x, 1, 20) writes on
// its live entry and is held before its validation. Time moves past the
// slack; z, another key, writes into line i1, and its move clears x's
// expired entry (it would read a wrap ahead in the new window). B =
// TryUpdate(x, 1, 20) writes on top of A's entry and is admitted. A
// validates: a candidate of x changed (the expired entry, now empty),
// A cannot undo (B wrote on top), and A is denied, keeping its token.
// x never owed more than 11 of 20; nothing of x's load changed (an
// expired entry read 0 and an empty slot reads 0): a spurious denial of
// a key alone (TryUpdate's doc: "For one key it is exact under
// contention").
func TestAudit10ClearedExpiredCandidateDenies(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	e := newTest(t, 2, Linear(10, 40), clk)
	i0, i1, fp := e.Locate("x")
	z := sameLine(t, e, i1, "z", "x")
	if _, _, f := e.Locate(z); f == fp {
		t.Fatal("z shares x's fingerprint")
	}
	// Both lines at now.
	for k := 0; StateOf(e, int(i0)).LW != NowMs(e) || StateOf(e, int(i1)).LW != NowMs(e); k++ {
		e.Update(fmt.Sprintf("w%d", k), 0.0001)
		if k > 100 {
			t.Fatal("lines not moved to now")
		}
	}
	now := Tick(e)
	e.poke(int(i1), 12, fp, now-1)                  // expired
	e.poke(int(i0), 12, fp, now+1000*e.q.gn/e.q.gd) // 10 tokens: 1 s at 10/s
	if q := e.Query("x"); q < 9.9 || q > 10.01 {
		t.Fatalf("x reads %v, want 10", q)
	}
	paused, resume := make(chan struct{}), make(chan struct{})
	e.setHooks(&testHooks{afterCAS: pauseOnce(armedTrue(), paused, resume)})
	var aOK bool
	var wg sync.WaitGroup
	wg.Go(func() { aOK = e.TryUpdate("x", 1, 20) })
	<-paused
	clk.Advance(2 * time.Second)
	e.Update(z, 1) // moves line i1 by 2 s (> the slack, 369 ms): clears x's expired entry
	cleared := true
	for _, s := range StateOf(e, int(i1)).FP {
		if s == fp {
			cleared = false
		}
	}
	bOK := e.TryUpdate("x", 1, 20)
	close(resume)
	wg.Wait()
	e.setHooks(nil)
	q := e.Query("x")
	t.Logf("x's expired entry cleared %v; A %v, B %v; x reads %v", cleared, aOK, bOK, q)
	// The documented limit (docs/design.md, section 8, "Exact TryUpdate
	// for one key": a cleared expired candidate is a changed slot): A
	// is denied and its token kept.
	if aOK || !bOK {
		t.Fatalf("A %v, B %v, x reads %v: the documented outcome is A denied keeping its token, B admitted (docs/design.md, section 8)", aOK, bOK, q)
	}
}
