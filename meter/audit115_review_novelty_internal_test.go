package meter

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit115NoveltyRandomInterleavingsFalsePositive (regression,
// passes): Novelty's doc: "a false positive needs all L cells refreshed
// within T by other keys ... or a Seen whose commit meets another key's
// write and spans a horizon sweep of its cells, a clock step or stall of
// days inside one call"; design.md: a held level whose word is still the
// call's reads at the value its increment went in over, one another
// writer changed reads as loaded. Seeded random interleavings of one
// Seen(k) (k never seen, L = 3 or 4) with other keys' sightings, each
// sharing exactly one of k's cells, run from k's commit hooks (before a
// CAS, before a retry's loads, before an undo), the clock stepping 0 or
// 1 ms before each: k is told seen only if every one of its cells got
// another key's mark, and k reads as seen afterwards.
func TestAudit115NoveltyRandomInterleavingsFalsePositive(t *testing.T) {
	for _, levels := range []uint32{3, 4} {
		clk := sketchtest.NewFakeClock()
		clk.Set(100_000)
		n, err := NewNovelty(time.Hour, WithClock(clk), WithSeed(uint64(levels)), WithSize(levels, 16), WithPrefetch(false), WithPeriodWindows(1e6))
		if err != nil {
			t.Fatal(err)
		}
		p := n.rot().Current().Gens[0]
		idx := func(key string) []uint32 {
			_, ix := core.Detailed(p, []byte(key), func(_, i uint32, _ float64) uint32 { return i })
			return ix
		}
		seenRuns, conflicts := 0, 0
		for iter := range 1500 {
			rng := rand.New(rand.NewPCG(uint64(iter), uint64(levels)))
			k := fmt.Sprintf("k%d-%d", levels, iter)
			ki := idx(k)
			// others[l]: keys sharing k's level-l cell only, on other stripes.
			others := make([][]string, levels)
			for i := 0; i < 1_000_000; i++ {
				c := fmt.Sprintf("o%d-%d-%d", levels, iter, i)
				if core.StripeOf(p, []byte(c)) == core.StripeOf(p, []byte(k)) {
					continue
				}
				ci := idx(c)
				same := -1
				for l := range ci {
					if ci[l] == ki[l] {
						if same >= 0 {
							same = -2
							break
						}
						same = l
					}
				}
				if same >= 0 && len(others[same]) < 3 {
					others[same] = append(others[same], c)
				}
				full := true
				for l := range others {
					full = full && len(others[l]) == 3
				}
				if full {
					break
				}
			}
			marked := make([]bool, levels)
			used := make([]int, levels)
			mark := func(l int) {
				if used[l] == len(others[l]) {
					return
				}
				n.Seen(others[l][used[l]])
				used[l]++
				marked[l] = true
			}
			for l := range int(levels) {
				if rng.IntN(4) == 0 {
					mark(l)
				}
			}
			inHook := false
			hook := func(uint32) {
				if inHook || rng.IntN(3) != 0 {
					return
				}
				inHook = true
				defer func() { inHook = false }()
				if rng.IntN(2) == 0 {
					clk.Advance(time.Millisecond)
				}
				mark(rng.IntN(int(levels)))
			}
			core.SetHooks(p, core.Hooks{
				BeforeCAS: hook,
				Reread:    hook,
				Rollback:  hook,
				Conflict: func(uint32) {
					if !inHook {
						conflicts++
					}
				},
			})
			seen := n.Seen(k)
			core.SetHooks(p, core.Hooks{})
			all := true
			for _, m := range marked {
				all = all && m
			}
			if seen {
				seenRuns++
			}
			if seen && !all {
				t.Errorf("L=%d iter %d: Seen(k) = true for a key never seen; other keys marked its cells %v", levels, iter, marked)
			}
			if !n.Contains(k) {
				t.Errorf("L=%d iter %d: k forgotten right after its sighting", levels, iter)
			}
			clk.Advance(3 * time.Hour) // forget everything
		}
		t.Logf("L=%d: %d runs told seen, %d commit conflicts", levels, seenRuns, conflicts)
	}
}

// TestAudit115NoveltyNestedInterleavingsOneCell (regression, passes):
// core.Config.FinalAdmission: "The retry still decides again, so racing
// calls of keys that share every cell are admitted once (audits 88 and
// 112), but for a writer that left a held word exactly as the call wrote
// it (a saturating add stamped at the call's time), which no load can
// see". One cell a level (M = 1, L = 2 to 4: every key shares every
// cell), keys on pairwise distinct stripes, seeded random interleavings:
// Seen(k) runs other keys' sightings from its commit hooks (before a CAS,
// before a retry's loads, before an undo), and those run more from
// theirs (nested two deep), the clock stepping 1 ms before each, so no
// sighting starts at or before a word already written. At most one of
// them is told new.
func TestAudit115NoveltyNestedInterleavingsOneCell(t *testing.T) {
	for _, levels := range []uint32{2, 3, 4} {
		clk := sketchtest.NewFakeClock()
		clk.Set(100_000)
		n, err := NewNovelty(time.Hour, WithClock(clk), WithSeed(uint64(levels)), WithSize(levels, 1), WithPrefetch(false), WithPeriodWindows(1e6))
		if err != nil {
			t.Fatal(err)
		}
		p := n.rot().Current().Gens[0]
		twoNew, conflicts := 0, 0
		for iter := range 1500 {
			rng := rand.New(rand.NewPCG(uint64(iter), uint64(levels)+100))
			var keys []string
			stripes := map[uint64]bool{}
			for i := 0; len(keys) < 5; i++ {
				c := fmt.Sprintf("n%d-%d-%d", levels, iter, i)
				if st := core.StripeOf(p, []byte(c)); !stripes[st] {
					stripes[st] = true
					keys = append(keys, c)
				}
			}
			next, depth, fresh := 1, 0, 0
			var order []string
			seen := func(k string) {
				if !n.Seen(k) {
					fresh++
					order = append(order, k)
				}
			}
			hook := func(uint32) {
				if depth >= 2 || next == len(keys) || rng.IntN(3) != 0 {
					return
				}
				depth++
				defer func() { depth-- }()
				clk.Advance(time.Millisecond)
				k := keys[next]
				next++
				seen(k)
			}
			core.SetHooks(p, core.Hooks{
				BeforeCAS: hook,
				Reread:    hook,
				Rollback:  hook,
				Conflict:  func(uint32) { conflicts++ },
			})
			seen(keys[0])
			core.SetHooks(p, core.Hooks{})
			if fresh > 1 {
				twoNew++
				if twoNew <= 5 {
					t.Errorf("L=%d iter %d: %d keys sharing every cell told new (%v)", levels, iter, fresh, order)
				}
			}
			clk.Advance(3 * time.Hour)
		}
		t.Logf("L=%d: %d commit conflicts", levels, conflicts)
	}
}
