package bucket

import (
	"sync"
	"sync/atomic"
	"testing"
)

// a35Key returns a key whose fingerprint is neither fp nor a filler's
// and differs from the ones in not.
func a35Key(t *testing.T, e *Engine, fp uint16, not ...uint16) (string, uint16) {
	t.Helper()
	return keyAvoiding(t, e, "z", append(not, fp)...)
}

// TestAudit35FixedMergeSumsOneFloor: an Update's merge adds "the
// higher floor's" stamp above base to the candidates' (docs/design.md
// section 8, the merge bullet; op.go: sum += max(f0, f1) - base). When
// both of the key's split chains were evicted before the merge's read,
// one into each line's floor, the merge counts only the larger one.
//
// The race, time frozen, Linear(1000, 30) (replayEngine): A =
// Update(x, 5) reads x absent, is held before its CAS; B = Update(x, 4)
// inserts into line 1 (slot 10); A's CAS lands in line 0 slot 0; A's
// validation sees B's slot changed, and A is held in its undo (lower),
// after its read, before its CAS. Meanwhile C = Update(x, 3) builds on
// A's entry (max(5, 4) + 3 = 8), the lines are full, Update(z1, 15)
// evicts B's entry (line 1's floor: 4) and Update(z2, 0.001) evicts
// x's line 0 entry (line 0's floor: 8). A's undo CAS fails, the entry
// is no longer its own: A merges: no candidate, floors 8 and 4: it
// writes 8. x's true load is 5 + 4 + 3 = 12; x reads 8.
//
// Promises: internal/bucket/doc.go, Guarantees: "One-sided: Query(k) >=
// k's true load, whatever evictions, floors, fingerprint collisions,
// decay, refunds and races"; docs/design.md section 8: the merge's sum
// "covers the key however the racing writes were split".
func TestAudit35FixedMergeSumsOneFloor(t *testing.T) {
	e, _, ln, fp := replayEngine(t)
	z1, z1fp := a35Key(t, e, fp)
	z2, _ := a35Key(t, e, fp, z1fp)
	fill(e, ln[0], 4, 8, fp, 20)  // line 0: 8 live, slots 0..3 free: A takes slot 0
	fill(e, ln[1], 0, 10, fp, 20) // line 1: 10 live
	pausedA, resumeA := make(chan struct{}), make(chan struct{})
	pausedV, resumeV := make(chan struct{}), make(chan struct{})
	pausedL, resumeL := make(chan struct{}), make(chan struct{})
	var armV, armL atomic.Bool
	e.setHooks(&testHooks{
		beforeCAS:   pauseOnce(armedTrue(), pausedA, resumeA),
		afterCAS:    pauseOnce(&armV, pausedV, resumeV),
		beforeLower: pauseOnce(&armL, pausedL, resumeL),
	})
	var wg sync.WaitGroup
	wg.Go(func() { e.Update("x", 5) }) // A
	<-pausedA
	fill(e, ln[0], 2, 2, fp, 20)
	fill(e, ln[0], 12, 2, fp, 20) // line 0: 12 live, slots 0 and 1 free
	e.Update("x", 4)              // B: line 1 (10 live): slot 10
	if st := StateOf(e, ln[1]); st.FP[10] != fp {
		t.Fatalf("B not in line 1 slot 10: %+v", st)
	}
	armV.Store(true)
	close(resumeA) // A's CAS lands in line 0, slot 0
	<-pausedV
	fill(e, ln[0], 1, 1, fp, 20)  // line 0: full
	fill(e, ln[1], 11, 3, fp, 20) // line 1: full
	armL.Store(true)
	close(resumeV) // A validates: B's slot changed: A undoes, held in lower
	<-pausedL
	e.Update("x", 3) // C: on A's entry, 8
	if st := StateOf(e, ln[0]); st.FP[0] != fp || st.Stamp[0] != Tick(e)+ticksOf(e, 8) {
		t.Fatalf("C did not build on A's entry (8 tokens): %+v", st)
	}
	e.Update(z1, 15)    // evicts B's entry (4): line 1's floor
	e.Update(z2, 0.001) // evicts x's line 0 entry (8): line 0's floor
	s0, s1 := StateOf(e, ln[0]), StateOf(e, ln[1])
	for s := range SlotsPerLine {
		if s0.FP[s] == fp || s1.FP[s] == fp {
			t.Fatalf("x still has an entry: line 0 %+v line 1 %+v", s0, s1)
		}
	}
	close(resumeL) // A's undo fails: merge
	wg.Wait()
	e.setHooks(nil)
	if q := e.Query("x"); q < 12 {
		t.Fatalf("racing Update(x, 5) [A, merged], Update(x, 4) [B], Update(x, 3) [C, on A's entry], both of x's entries evicted before A's merge (floors %v and %v tokens): Query %v, want >= 12 (the true load, time frozen). doc.go: \"Query(k) >= k's true load, whatever evictions, floors, ... and races\"; design.md: the merge's sum \"covers the key however the racing writes were split\"; op.go adds max(f0, f1), one floor. line 0 before the merge %+v, line 1 %+v; after: line 0 %+v line 1 %+v",
			float64(s0.Floor-Tick(e))/float64(ticksOf(e, 1)), float64(s1.Floor-Tick(e))/float64(ticksOf(e, 1)), q, s0, s1, StateOf(e, ln[0]), StateOf(e, ln[1]))
	}
}
