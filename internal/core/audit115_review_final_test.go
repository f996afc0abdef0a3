package core_test

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit115FinalAdmissionLimiterExact (regression): Config.FinalAdmission
// "changes what a TryUpdate's retry after a commit conflict reads at a held
// level ... The retry still decides again, so racing calls of keys that
// share every cell are admitted once"; TryUpdate's doc: "with every key
// colliding (CellsPerLevel=1) the total admitted over all keys never
// exceeds the limit". On the generic path (a limiter's counts, no clamp
// near, every aggregator; a ticking clock so undos are refused and
// levels held), keys of many stripes racing TryUpdate(k, 1, limit) with
// M = 1 admit at most limit in all, and every cell holds at least what
// was admitted.
func TestAudit115FinalAdmissionLimiterExact(t *testing.T) {
	for _, agg := range []core.Aggregator{core.Min, core.Max, core.Mean} {
		for _, final := range []bool{false, true} {
			for _, procs := range []int{1, 2, 4} {
				t.Run(fmt.Sprintf("agg%v-final%v-procs%d", agg, final, procs), func(t *testing.T) {
					defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
					clk := sketchtest.NewFakeClock()
					clk.Set(1_000)
					s, err := core.New(core.Config{Levels: 3, CellsPerLevel: 1, Lo: 0, Hi: 1e6, Aggregator: agg, Clock: clk, FinalAdmission: final})
					if err != nil {
						t.Fatal(err)
					}
					const limit = 600
					var conflicts atomic.Int64
					core.SetHooks(s, core.Hooks{Conflict: func(uint32) { conflicts.Add(1) }, BeforeCAS: func(uint32) { runtime.Gosched() }})
					var admitted atomic.Int64
					var wg sync.WaitGroup
					stop := make(chan struct{})
					var ticks sync.WaitGroup
					ticks.Go(func() {
						for {
							select {
							case <-stop:
								return
							default:
							}
							clk.Advance(time.Millisecond)
							runtime.Gosched()
						}
					})
					for g := range 8 {
						wg.Go(func() {
							for i := range 120 {
								if s.TryUpdate([]byte(fmt.Sprintf("k%d-%d", g, i%5)), 1, limit) {
									admitted.Add(1)
								}
							}
						})
					}
					wg.Wait()
					close(stop)
					ticks.Wait()
					a := admitted.Load()
					t.Logf("%d admitted, %d commit conflicts", a, conflicts.Load())
					if a > limit {
						t.Errorf("%d admitted over all keys sharing every cell; limit %d", a, limit)
					}
					_, ls := core.Detailed(s, []byte("any"), func(_, _ uint32, v float64) float64 { return v })
					for l, v := range ls {
						if v < float64(a) {
							t.Errorf("level %d reads %v < %d admitted", l, v, a)
						}
					}
				})
			}
		}
	}
}

// a115Find returns a key (prefix-i) on a stripe not in used whose
// per-level cell indexes satisfy want, and marks its stripe used.
func a115Find(t *testing.T, s *core.Sketch, prefix string, used map[uint64]bool, want func(c []uint32) bool) []byte {
	t.Helper()
	for i := range 200_000 {
		k := []byte(fmt.Sprintf("%s-%d", prefix, i))
		st := core.StripeOf(s, k)
		_, c := core.Detailed(s, k, func(_, index uint32, _ float64) uint32 { return index })
		if used[st] || !want(c) {
			continue
		}
		used[st] = true
		return k
	}
	t.Fatalf("no key %s-* with the wanted cells", prefix)
	return nil
}

// TestAudit115FinalUndoneThenHeldReadsRetryValue (regression, passes):
// Config.FinalAdmission: "while the level's word is still the one the
// call wrote, the retry reads it at the value the increment went in
// over"; design.md: "the snapshot value of the attempt that wrote it".
// On the generic path a level can be written in attempt 1, undone
// exactly (not held), and written again in attempt 2 over a different
// value, then held: it must read at attempt 2's value.
//
// Hi = 2, delta 1, limit 2.5 (admitted iff the Min is at most 1.5), L =
// 3, no decay, one instant. K reads [0, 0, 0] and admits; level 0 -> 1.
// Before its level-1 CAS, a (K's level-1 cell only) adds 1.6: the CAS
// fails, level 0 is undone exactly (its word unchanged). Before the
// retry's loads, b (K's level-0 cell only) adds 1.6. Retry 1 reads [1.6,
// 1.6, 0], admits, writes levels 0 and 1 to Hi; before its level-2 CAS c
// (K's level-2 cell only) adds 1.6: the CAS fails, levels 0 and 1 are held
// (at Hi, undo refused) with K's words. Retry 2 must read them at retry
// 1's 1.6 (not the first snapshot's 0): [1.6, 1.6, 1.6], denied.
func TestAudit115FinalUndoneThenHeldReadsRetryValue(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	s, err := core.New(core.Config{Levels: 3, CellsPerLevel: 64, Lo: 0, Hi: 2, Clock: clk, FinalAdmission: true})
	if err != nil {
		t.Fatal(err)
	}
	used := map[uint64]bool{}
	k := a115Find(t, s, "k", used, func([]uint32) bool { return true })
	_, kc := core.Detailed(s, k, func(_, index uint32, _ float64) uint32 { return index })
	only := func(l int) func(c []uint32) bool {
		return func(c []uint32) bool {
			for j := range c {
				if (c[j] == kc[j]) != (j == l) {
					return false
				}
			}
			return true
		}
	}
	b := a115Find(t, s, "b", used, only(0))
	a := a115Find(t, s, "a", used, only(1))
	c := a115Find(t, s, "c", used, only(2))
	cas, rereads := 0, 0
	var undone, held []uint32
	core.SetHooks(s, core.Hooks{
		BeforeCAS: func(level uint32) {
			cas++
			switch cas {
			case 2: // attempt 1, level 1
				s.Update(a, 1.6)
			case 5: // retry 1, level 2
				s.Update(c, 1.6)
			}
		},
		Reread: func(uint32) {
			rereads++
			if rereads == 1 {
				s.Update(b, 1.6)
			}
		},
		Rollback: func(level uint32) { undone = append(undone, level) },
		Held:     func(level uint32) { held = append(held, level) },
	})
	ok := s.TryUpdate(k, 1, 2.5)
	core.SetHooks(s, core.Hooks{})
	if cas < 5 || rereads < 2 {
		t.Fatalf("the interleaving did not happen (%d CAS hook calls, %d rereads)", cas, rereads)
	}
	t.Logf("undo calls %v, held at the denial %v", undone, held)
	if ok {
		t.Errorf("TryUpdate admitted: its last retry read a held level below its value before the call's write (1.6), every level of the key at 1.6 without it")
	}
	_, ls := core.Detailed(s, k, func(_, _ uint32, v float64) float64 { return v })
	t.Logf("k's levels after: %v", ls)
}
