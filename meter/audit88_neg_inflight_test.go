package meter

import (
	"testing"

	"github.com/lfgrudge/grudge/internal/core"
)

// TestAudit88NegInflightForcedInterleavings: every key in one cell per
// level (L = 2, M = 1), so each cell counts the total in flight.
// TryAcquire(t, max) is admitted on [2, 2], commits level 0 and, before
// its CAS on level 1, another key's Guard is released or acquired (or
// both) from outside the stripe: the CAS fails, the undo takes the +1
// back out of level 0 (SetConserved: a subtraction, whatever the
// negative writes), and the call decides again on the fresh cells. Its
// answer must be what the fresh total allows (admitted iff total + 1 <=
// max), the cells must then count exactly the Guards outstanding, and
// after every Guard is released every cell must read 0: no +1 kept by a
// refused call (an over-count for good) and no -1 lost or doubled (an
// under-count, which would admit past max).
func TestAudit88NegInflightForcedInterleavings(t *testing.T) {
	for _, tc := range []struct {
		name  string
		max   int
		moves string // in the hook: r = release a, A = acquire c
		admit bool
	}{
		{"release-then-admit", 3, "r", true},
		{"acquire-then-refuse", 3, "A", false},
		{"acquire-release-admit", 3, "Ar", true},
		{"release-acquire-admit", 3, "rA", true},
		{"acquire-acquire-refuse", 4, "AA", false},
		{"release-release-admit", 3, "rr", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, err := NewInflight(0, WithSize(2, 1))
			if err != nil {
				t.Fatal(err)
			}
			in.Acquire("x").Release() // a negative write first: the negative flag is set
			guards := []*Guard{in.Acquire("a"), in.Acquire("b")}
			fired := false
			core.SetHooks(in.s, core.Hooks{BeforeCAS: func(level uint32) {
				if level != 1 || fired {
					return
				}
				fired = true
				for _, m := range tc.moves {
					switch m {
					case 'r':
						guards[0].Release() // idempotent: a second 'r' does nothing
					case 'A':
						guards = append(guards, in.Acquire("c"))
					}
				}
			}})
			g := in.TryAcquire("t", tc.max)
			core.SetHooks(in.s, core.Hooks{})
			if !fired {
				t.Fatal("the interleaving did not happen")
			}
			if (g != nil) != tc.admit {
				t.Fatalf("TryAcquire(t, %d) admitted = %v, want %v", tc.max, g != nil, tc.admit)
			}
			if g != nil {
				guards = append(guards, g)
			}
			out := 0
			for _, gd := range guards {
				if !gd.released.Load() {
					out++
				}
			}
			_, levels := core.Detailed(in.s, []byte("t"), func(_, _ uint32, score float64) float64 { return score })
			for l, v := range levels {
				if v != float64(out) {
					t.Errorf("level %d counts %v with %d Guards outstanding", l, v, out)
				}
			}
			for _, gd := range guards {
				gd.Release()
			}
			_, levels = core.Detailed(in.s, []byte("t"), func(_, _ uint32, score float64) float64 { return score })
			for l, v := range levels {
				if v != 0 {
					t.Errorf("level %d counts %v after every Guard was released, want 0", l, v)
				}
			}
		})
	}
}
