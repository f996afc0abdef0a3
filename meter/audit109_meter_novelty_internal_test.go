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
