package meter

import (
	"fmt"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit109FixedNoveltyConflictHidesFirstSighting (audit 109; fixed at stop 61, the text below
// says what was wrong): Novelty's doc
// (meter/novelty.go; meter/doc.go: "exactly one of racing callers is
// told a key is new"): "Seen is exact under contention: of N goroutines
// racing Seen on a key not seen within T, exactly one is told it is
// new", and "a false positive needs all L cells refreshed within T by
// other keys".
//
// Two levels. Key k was never seen; key j shares k's level-1 cell only
// (its level-0 cell is another) and was seen 10 ms ago. One Seen(k): the
// primary's TryUpdate reads [0, 0.99], admits (new), commits level 0 (0
// -> 1, at Hi), and before its level-1 CAS a Seen(j) refreshes j's mark
// (its level-1 cell, k's, 0.99 -> 1 at a later stamp). k's CAS fails;
// its undo cannot roll level 0 back (the word it stored is at Hi = 1:
// docs/design.md, "Roll-backs", case 1), so the level is held, and the
// decision again reads [1 (k's own mark), 1 (j's)]: denied. Seen(k)
// returns true ("seen") for a key never seen, with only one of its two
// cells ever written by another key: of one caller of a key not seen,
// none is told it is new. The held level's own increment is counted as
// another key's mark (for a limiter, "stricter, never looser"; for
// Novelty a lost first sighting).
func TestAudit109FixedNoveltyConflictHidesFirstSighting(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000)
	n, err := NewNovelty(time.Second, WithClock(clk), WithSeed(109), WithSize(2, 64), WithPrefetch(false))
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
		c := fmt.Sprintf("j%d", i)
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
			jSeen = n.Seen(j) // another key's sighting, on k's level-1 cell only
		}
	}})
	seen := n.Seen(k)
	core.SetHooks(p, core.Hooks{})
	if !fired || !jSeen {
		t.Fatalf("the interleaving did not happen (fired %v, j seen %v)", fired, jSeen)
	}
	if seen {
		t.Errorf("Seen(%q) = true on its first sighting (one caller, a key never seen; %q shares only its level-1 cell): no caller was told it is new", k, j)
	}
}

// otherStripeKey returns a key whose stripe differs from k's on p.
func otherStripeKey(t *testing.T, p *core.Sketch, k string) string {
	t.Helper()
	for i := range 100_000 {
		c := fmt.Sprintf("c%d", i)
		if core.StripeOf(p, []byte(c)) != core.StripeOf(p, []byte(k)) {
			return c
		}
	}
	t.Fatal("no key on another stripe")
	return ""
}

// TestAudit109ReviewConflictAcrossStripesDecidesAgain (stop 62): stop
// 61's fix for audit 109 made a conflicting commit complete as an
// Update does, with no second decision, and lost the exactness of keys
// that share every cell (audit 88's one-cell race told two callers new
// in stop 62's CI). One cell (M = 1, L = 1): Seen(k) admits, and before
// its CAS Seen(c), c on another stripe, marks the cell; k's CAS fails, and
// its retry reads c's mark: seen. Exactly one of the two is told new.
func TestAudit109ReviewConflictAcrossStripesDecidesAgain(t *testing.T) {
	for _, levels := range []uint32{1, 3} {
		t.Run(fmt.Sprint("L=", levels), func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			clk.Set(1_000)
			n, err := NewNovelty(time.Second, WithClock(clk), WithSeed(7), WithSize(levels, 1), WithPrefetch(false))
			if err != nil {
				t.Fatal(err)
			}
			p := n.rot().Current().Gens[0]
			c := otherStripeKey(t, p, "k")
			fired, cSeen := false, true
			core.SetHooks(p, core.Hooks{BeforeCAS: func(level uint32) {
				if level == 0 && !fired {
					fired = true
					cSeen = n.Seen(c)
				}
			}})
			kSeen := n.Seen("k")
			core.SetHooks(p, core.Hooks{})
			if !fired {
				t.Fatal("the interleaving did not happen")
			}
			if cSeen == kSeen {
				t.Errorf("Seen(c) = %v, Seen(k) = %v on one shared cell per level: want exactly one told new", cSeen, kSeen)
			}
		})
	}
}

// TestAudit109ReviewHeldLevelChangedCounts (stop 62): a held level that
// another writer changed since the call wrote it counts as loaded. Two
// levels of one cell each: Seen(k) marks level 0; before its level-1 CAS,
// 1 ms later, Seen(c) (another stripe) reads k's partial mark, is told new
// and marks both levels (level 0 at a new stamp). k's CAS fails, its undo
// of level 0 is refused (the word changed), and the retry reads c's marks
// on both: k is seen. Reading level 0 at its value before k (stop 61's
// Update-like completion did the same in effect) told both new.
func TestAudit109ReviewHeldLevelChangedCounts(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000)
	n, err := NewNovelty(time.Second, WithClock(clk), WithSeed(8), WithSize(2, 1), WithPrefetch(false))
	if err != nil {
		t.Fatal(err)
	}
	p := n.rot().Current().Gens[0]
	c := otherStripeKey(t, p, "k")
	fired, cSeen := false, true
	core.SetHooks(p, core.Hooks{BeforeCAS: func(level uint32) {
		if level == 1 && !fired {
			fired = true
			clk.Advance(time.Millisecond)
			cSeen = n.Seen(c)
		}
	}})
	kSeen := n.Seen("k")
	core.SetHooks(p, core.Hooks{})
	if !fired {
		t.Fatal("the interleaving did not happen")
	}
	if cSeen || !kSeen {
		t.Errorf("Seen(c) = %v, Seen(k) = %v: want c new (it read k's partial mark) and k seen (c marked every cell)", cSeen, kSeen)
	}
}
