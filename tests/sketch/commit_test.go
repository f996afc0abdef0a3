package sketch_test

import (
	"fmt"
	"testing"

	"github.com/lfgrudge/grudge/internal/conv"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestTryUpdateCommitConflict drives the conflict paths of an admitted
// TryUpdate deterministically: the TryUpdate of key A (cells x, y at
// levels 0, 1) is held after its CAS on x and before its CAS on y (by the
// commit hook, newCommitGate), while Updates of other
// keys change y (and x). On release the CAS on y fails and the decision
// is taken again on fresh values: still admitted (the commit goes on),
// or denied with x rolled back, by the exact undo when x is untouched or
// by subtracting the increment when x was written meanwhile. Every cell
// must end holding exactly the committed mass.
func TestTryUpdateCommitConflict(t *testing.T) {
	cases := []struct {
		name      string
		dMass     float64 // Update(D) while held: raises y
		bMass     float64 // Update(B) while held: raises x
		admitted  bool
		wantX     float64
		wantY     float64
		wantQuery float64
	}{
		// y: 0.5 -> 2.5; fresh aggregate min(10.5, 2.5) + 1 <= 5: admitted.
		{"readmitted", 2, 0, true, 11.5, 3.5, 3.5},
		// y: 0.5 -> 10.5; min(10.5, 10.5) + 1 > 5: denied, x restored by exact undo.
		{"denied/undo", 10, 0, false, 10.5, 10.5, 10.5},
		// as above, but x was also written (+1): the increment is subtracted.
		{"denied/subtract", 10, 1, false, 11.5, 10.5, 10.5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := sketch.Config{Levels: 2, CellsPerLevel: 4, Hi: 1e9, Clock: sketchtest.NewFakeClock()}
			a, b, d := conflictKeys(t, cfg)
			s := mustNewSketch(t, cfg)
			gate := newCommitGate(t, s, 1) // after the CAS on x (level 0), before y
			s.Update(b, 10)                // x = 10
			s.Update(a, 0.5)               // x = 10.5, y = 0.5

			done := make(chan bool, 1)
			go func() { done <- s.TryUpdate(a, 1, 5) }() // snapshot min(10.5, 0.5) + 1 <= 5: admitted
			gate.wait(t)
			if c.dMass != 0 {
				s.Update(d, c.dMass)
			}
			if c.bMass != 0 {
				s.Update(b, c.bMass)
			}
			gate.open()
			if got := <-done; got != c.admitted {
				t.Fatalf("TryUpdate = %v, want %v", got, c.admitted)
			}
			lv := s.QueryDetailed(a).Levels
			if lv[0].Score != c.wantX || lv[1].Score != c.wantY {
				t.Fatalf("cells (x, y) = (%v, %v), want (%v, %v)", lv[0].Score, lv[1].Score, c.wantX, c.wantY)
			}
			if q := s.Query(a); q != c.wantQuery {
				t.Fatalf("Query(A) = %v, want %v", q, c.wantQuery)
			}
			// The stripe was released: the next TryUpdate of A is decided normally.
			if ok := s.TryUpdate(a, 1, c.wantQuery+1); !ok {
				t.Fatal("TryUpdate after the conflict was denied at its exact limit")
			}
		})
	}
}

// conflictKeys returns keys A = (x, y), B = (x, v) and D = (u, y) (cell
// per level, L = 2) with u != x and v != y: B shares only A's level-0
// cell, D only its level-1 cell.
func conflictKeys(t *testing.T, cfg sketch.Config) (a, b, d []byte) {
	t.Helper()
	_, norm, err := conv.Normalize(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := norm.Hasher(norm.Seed)
	cells := func(k []byte) (uint32, uint32) {
		hash := h.Sum64(k)
		return core.Index(hash, 0, norm.CellsPerLevel), core.Index(hash, 1, norm.CellsPerLevel)
	}
	var keys [][]byte
	for i := range 100 {
		keys = append(keys, fmt.Appendf(nil, "conflict-%d", i))
	}
	for _, ka := range keys {
		x, y := cells(ka)
		for _, kb := range keys {
			bx, by := cells(kb)
			if bx != x || by == y {
				continue
			}
			for _, kd := range keys {
				if dx, dy := cells(kd); dx != x && dy == y {
					return ka, kb, kd
				}
			}
		}
	}
	t.Fatal("no keys with the wanted collision pattern")
	return nil, nil, nil
}
