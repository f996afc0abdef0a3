package meter

import (
	"testing"

	"github.com/lfgrudge/grudge/internal/core"
)

// TestTryAcquireRefusedLeaksNothing replays the interleaving an audit
// found (docs/design.md, "Writers outside the stripe, and the roll-back",
// case 5): every key in one cell per level; T = TryAcquire(t, 3) reads
// [2, 2] and admits, commits level 0 (3), and before its CAS on level 1
// another key's Acquire raises both cells (4, 3). T's CAS fails; its undo
// finds level 0 written since, and the decision again, on [3, 3], refuses
// T. Releases have set the sketch's negative flag, so without the
// conserved rule the undo kept T's +1 in level 0: after every Guard was
// released the cell still counted 1, for good.
func TestTryAcquireRefusedLeaksNothing(t *testing.T) {
	in, err := NewInflight(0, WithSize(2, 1))
	if err != nil {
		t.Fatal(err)
	}
	in.Acquire("x").Release() // a negative delta: roll-backs after it could only restore
	g1, g2 := in.Acquire("a"), in.Acquire("b")
	var g3 *Guard
	fired := false
	core.SetHooks(in.s, core.Hooks{BeforeCAS: func(level uint32) {
		if level == 1 && !fired {
			fired = true
			g3 = in.Acquire("c")
		}
	}})
	if g := in.TryAcquire("t", 3); g != nil {
		t.Fatal("TryAcquire(t, 3) admitted with 3 in flight in every cell after the conflict")
	}
	if !fired || g3 == nil {
		t.Fatal("the interleaving did not happen: no Acquire ran before the level-1 CAS")
	}
	core.SetHooks(in.s, core.Hooks{})
	g1.Release()
	g2.Release()
	g3.Release()
	_, levels := core.Detailed(in.s, []byte("t"), func(level, _ uint32, score float64) float64 { return score })
	for l, v := range levels {
		if v != 0 {
			t.Errorf("level %d counts %v after every Guard was released, want 0: the refused TryAcquire's +1 leaked", l, v)
		}
	}
}
