package meter

import (
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit112FixedStalePreAfterRetryWrite (audit 112; fixed at stop 62, the text below
// says what was wrong): docs/design.md (after "A roll-back
// that fails inside TryUpdate") and core.Config.FinalAdmission's doc:
// "a held level whose word is still the one the call wrote there reads at
// its value before the call (the first snapshot's) ... The retry still
// decides again, so racing calls of keys that share every cell are
// admitted once (audit 88), but for a writer that left a held word
// exactly as the call wrote it (a saturating add in the same
// millisecond), which no load can see". design.md: "The one case left".
//
// commitConflict takes pre (the value before the call) from the FIRST
// snapshot for every level, but a level can first be written (with the
// call's increment) by a later retry, on top of a fresher value that
// already holds another key's mark. If that level is then held, the next
// retry reads it at the first snapshot's value and drops the mark the
// call itself had read and written over.
//
// Two levels, one cell each (every key shares every cell), keys k and c
// on different stripes; no writer ever leaves a word as another wrote
// it. Seen(k) at 1000 ms: snapshot [0, 0], admit; before its level-0 CAS,
// Seen(c) at 999 ms (its time read 1 ms earlier: a delayed goroutine)
// reads [0, 0] (new), marks level 0 (Hi at 999) and pauses before its
// level-1 CAS. k's level-0 CAS fails; retry 1 (nothing held, a plain
// retry) reads [c's mark 0.999, 0], admits, and writes level 0 over c's
// mark (Hi at 1000, a new word). Before k's level-1 CAS, c completes
// (level 1: Hi at 999): c is told new. k's level-1 CAS fails; the undo of
// level 0 is refused (at Hi), so it is held with k's word; retry 2 reads
// level 0 at the FIRST snapshot's 0, not at the 0.999 (c's mark) it held
// right before k wrote it, and admits: k is told new too. Both keys
// sharing every cell are told new, and every write was visible to a load
// (not the documented exception). Reading level 0 at retry 1's value
// (the value before the call's write there) would deny k.
func TestAudit112FixedStalePreAfterRetryWrite(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(999)
	n, err := NewNovelty(time.Second, WithClock(clk), WithSeed(7), WithSize(2, 1), WithPrefetch(false))
	if err != nil {
		t.Fatal(err)
	}
	p := n.rot().Current().Gens[0]
	c := otherStripeKey(t, p, "k")

	cLoading := make(chan struct{})
	resumeC1 := make(chan struct{})
	cAtLevel1 := make(chan struct{})
	resumeC2 := make(chan struct{})
	cDone := make(chan bool, 1)
	loads, cas := 0, 0
	var cSeen bool
	core.SetHooks(p, core.Hooks{
		Load: func(uint32) {
			loads++
			if loads == 1 { // c's TryUpdate, its time (999 ms) read: pause
				cLoading <- struct{}{}
				<-resumeC1
			}
		},
		BeforeCAS: func(level uint32) {
			cas++
			switch cas {
			case 1: // k's first commit, level 0: c decides on [0, 0] and marks level 0
				resumeC1 <- struct{}{}
				<-cAtLevel1
			case 3: // c's level 1: pause
				cAtLevel1 <- struct{}{}
				<-resumeC2
			case 5: // k's retry 1, level 1 (level 0 written over c's mark): c completes
				resumeC2 <- struct{}{}
				cSeen = <-cDone
			}
		},
	})
	defer func() { // a changed interleaving leaves c paused in a hook: let it finish
		core.SetHooks(p, core.Hooks{})
		close(resumeC1)
		close(resumeC2)
	}()
	go func() { cDone <- n.Seen(c) }()
	<-cLoading
	clk.Set(1_000)
	kSeen := n.Seen("k")
	core.SetHooks(p, core.Hooks{})
	if cas < 5 {
		t.Fatalf("the interleaving did not happen (%d CAS hook calls)", cas)
	}
	if cSeen {
		t.Fatalf("Seen(c) = true: c read [0, 0]")
	}
	if !kSeen {
		t.Errorf("Seen(c) = false and Seen(k) = false: two keys sharing every cell both told new; k's last retry read level 0 at its first snapshot's 0, not at c's mark, which k's previous retry had read and written over")
	}
}

// TestAudit112DocumentedSweepRestampCountsOwnMark (audit 112; documented
// at stop 62: design.md, "Roll-backs", and priorAggregate's doc now say
// that a sweep's re-stamp of the call's held word counts as another
// writer's; the test asserts that documented outcome): design.md (after "A roll-back
// that fails inside TryUpdate") and core.Config.FinalAdmission's doc: "a
// held level whose word is still the one the call wrote there reads at
// its value before the call ..., not with the call's own increment; a
// held level another writer has changed since reads as loaded (that
// writer's mark counts)"; Novelty's doc: "a false positive needs all L
// cells refreshed within T by other keys".
//
// The horizon sweep is no writer with a mark, but it rewrites every cell
// older than 2^29 ms (decayed, re-stamped): a held word it re-stamps no
// longer equals the call's, so the retry reads the call's own mark as
// loaded, audit 109's lost first sighting again. T = 400 days (the mark
// lasts), two levels of 64 cells; k never seen, j (another stripe)
// shares k's level-1 cell only and was seen 10 ms before. Seen(k) admits
// and marks level 0; before its level-1 CAS the clock moves 2^30 ms (12.4
// days: a call preempted that long, or a clock step) and Seen(j) runs:
// its operation sweeps (k's level-0 mark, 2^30 ms old, becomes 0.97 at a
// new stamp) and refreshes j's mark on k's level-1 cell. k's CAS fails,
// the undo of level 0 is refused (at Hi), the retry reads level 0 as
// loaded (k's own mark, 0.97 > theta) and level 1 (j's): denied, so
// Seen(k) says "seen" for a key never seen, one caller, with only one of
// its two cells refreshed by another key.
func TestAudit112DocumentedSweepRestampCountsOwnMark(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000)
	n, err := NewNovelty(400*24*time.Hour, WithClock(clk), WithSeed(109), WithSize(2, 64), WithPrefetch(false))
	if err != nil {
		t.Fatal(err)
	}
	p := n.rot().Current().Gens[0]
	idx := func(key string) []uint32 {
		_, ix := core.Detailed(p, []byte(key), func(_, i uint32, _ float64) uint32 { return i })
		return ix
	}
	k := "k"
	ki := idx(k)
	j := ""
	for i := 0; i < 100_000 && j == ""; i++ {
		c := "j" + time.Duration(i).String()
		ci := idx(c)
		if ci[1] == ki[1] && ci[0] != ki[0] && core.StripeOf(p, []byte(c)) != core.StripeOf(p, []byte(k)) {
			j = c
		}
	}
	if j == "" {
		t.Fatal("no key shares k's level-1 cell alone")
	}
	if n.Seen(j) {
		t.Fatal("j seen before its first sighting")
	}
	clk.Advance(10 * time.Millisecond)
	fired, jSeen := false, false
	core.SetHooks(p, core.Hooks{BeforeCAS: func(level uint32) {
		if level == 1 && !fired {
			fired = true
			clk.Advance(time.Duration(1<<30) * time.Millisecond)
			jSeen = n.Seen(j)
		}
	}})
	seen := n.Seen(k)
	core.SetHooks(p, core.Hooks{})
	if !fired || !jSeen {
		t.Fatalf("the interleaving did not happen (fired %v, j seen %v)", fired, jSeen)
	}
	if n.rot().Current().Gens[0] != p {
		t.Fatal("the primary changed")
	}
	if !seen {
		t.Errorf("Seen(%q) = false: the documented outcome of a sweep that re-stamps the held mark mid-call is a first sighting told seen (a false positive); if this is fixed, update docs/design.md", k)
	}
}

// TestAudit112FixedHeldCheckAdoptsOthersWord (audit 112; fixed at stop 62, the text below
// says what was wrong): the same claims as
// TestAudit112StalePreAfterRetryWrite ("a held level another writer has
// changed since reads as loaded (that writer's mark counts)"; keys that
// share every cell are admitted once but for a writer that left a held
// word exactly as the call wrote it).
//
// A retry writes a held level with a zero delta; when that changes
// nothing (the other writer's word is at Hi, stamped at or after the
// call's time) put only checks it, and commitConflict still records the
// other writer's word as the call's own (mine[i] = nw[i]). If a later
// level then conflicts, the next retry finds the held level "still as
// the call wrote it" and reads it at the first snapshot's value, dropping
// the other writer's mark, though that writer changed the word.
//
// Three levels, one cell each; keys k and c on different stripes. Seen(k)
// at 1000 ms reads [0, 0, 0], admits, marks level 0 (Hi at 1000). Before
// its level-1 CAS the clock reads 1001 and Seen(c) reads [1, 0, 0] (new),
// marks levels 0 and 1 (Hi at 1001: level 0's word changed) and pauses
// before level 2. k's level-1 CAS fails; level 0 is held (at Hi); retry 1
// reads level 0 as loaded (c's word), [1, 1, 0], admits, checks level 0
// (a zero delta: c's word stays) and level 1, and before its level-2 CAS
// c completes: told new. k's level-2 CAS fails; retry 2 reads level 0,
// whose word is c's, at the first snapshot's 0, and admits: k is told new
// too. No writer left a word as k wrote it.
func TestAudit112FixedHeldCheckAdoptsOthersWord(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000)
	n, err := NewNovelty(time.Second, WithClock(clk), WithSeed(7), WithSize(3, 1), WithPrefetch(false))
	if err != nil {
		t.Fatal(err)
	}
	p := n.rot().Current().Gens[0]
	c := otherStripeKey(t, p, "k")

	cAtLevel2 := make(chan struct{})
	resumeC := make(chan struct{})
	cDone := make(chan bool, 1)
	cas := 0
	var cSeen bool
	core.SetHooks(p, core.Hooks{BeforeCAS: func(level uint32) {
		cas++
		switch cas {
		case 2: // k's first commit, level 1: c (1 ms later) decides and marks levels 0 and 1
			clk.Set(1_001)
			go func() { cDone <- n.Seen(c) }()
			<-cAtLevel2
		case 5: // c's level 2: pause
			cAtLevel2 <- struct{}{}
			<-resumeC
		case 8: // k's retry 1, level 2: c completes
			resumeC <- struct{}{}
			cSeen = <-cDone
		}
	}})
	defer close(resumeC) // a changed interleaving leaves c paused in a hook: let it finish
	kSeen := n.Seen("k")
	core.SetHooks(p, core.Hooks{})
	if cas < 8 {
		t.Fatalf("the interleaving did not happen (%d CAS hook calls)", cas)
	}
	if cSeen {
		t.Fatalf("Seen(c) = true: c read [1, 0, 0]")
	}
	if !kSeen {
		t.Errorf("Seen(c) = false and Seen(k) = false: two keys sharing every cell both told new; k's last retry read held level 0, whose word c wrote, at its first snapshot's 0")
	}
}
