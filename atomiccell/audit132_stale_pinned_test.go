package atomiccell_test

import (
	"testing"

	"github.com/lfgrudge/grudge/atomiccell"
	"github.com/lfgrudge/grudge/decay"
)

// TestAudit132StalePinnedWordReloads forces, in one goroutine, the
// interleaving the no-write shortcut worries about (docs/design.md, "No
// write when nothing changes": "Cell.Add, when the new word equals w,
// loads the cell once more and returns only if it still holds w"): the
// caller loaded the cell pinned at a bound, another writer then moved
// the cell (a later stamp decayed it off the bound, or a write moved it
// away), and the caller's Add, decided on its stale view, computes a new
// word equal to that view. Add's doc: "An add that leaves the word
// unchanged ... writes nothing once a load inside the call has seen the
// cell hold that word". So the Add must redo on the fresh word, and its
// delta must land there.
func TestAudit132StalePinnedWordReloads(t *testing.T) {
	r := atomiccell.NewRules(decay.Linear(1), -10, 10) // 1 unit a second
	// At Hi: stale view 10@100; the cell drains to 9@1100; Add(+5)@100.
	var c atomiccell.Cell
	c.Store(atomiccell.Pack(10, 100))
	stale := c.Load()
	c.Add(r, 1100, 0, c.Load()) // another writer, 1 s later: 9@1100
	if w := c.Load(); w.Score() != 9 || w.Stamp() != 1100 {
		t.Fatalf("the drain stored %v@%d, want 9@1100", w.Score(), w.Stamp())
	}
	got := c.Add(r, 100, 5, stale)
	if got.Score() != 10 || got.Stamp() != 1100 || c.Load() != got {
		t.Errorf("Add(+5) on a stale view at Hi returned %v@%d, cell %v@%d; want 10@1100 (9 + 5 clamped)",
			got.Score(), got.Stamp(), c.Load().Score(), c.Load().Stamp())
	}
	// At Lo: stale view -10@100; another writer adds +4 at 100: -6@100;
	// Add(-3)@100 on the stale view (-10 - 3 clamps to -10: the view).
	c.Store(atomiccell.Pack(-10, 100))
	stale = c.Load()
	c.Add(r, 100, 4, c.Load())
	got = c.Add(r, 100, -3, stale)
	if got.Score() != -9 || c.Load() != got {
		t.Errorf("Add(-3) on a stale view at Lo returned %v, cell %v; want -9 (-6 - 3)", got.Score(), c.Load().Score())
	}
	// Zero delta on a stale view: nothing to add, but the returned word
	// must be the cell's (a load proved it), not the stale view.
	c.Store(atomiccell.Pack(7, 500))
	stale = c.Load()
	c.Add(r, 500, 1, c.Load()) // 8@500
	got = c.Add(r, 500, 0, stale)
	if got != c.Load() || got.Score() != 8 {
		t.Errorf("Add(0) on a stale view returned %v, cell %v; want the cell's 8", got.Score(), c.Load().Score())
	}
}
