package meter

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

// a115Call is one Seen of the stress: its key, whether it was told seen,
// and the global sequence numbers read before it started and after it
// returned.
type a115Call struct {
	key        int
	seen       bool
	start, end int64
}

// TestAudit115NoveltyStressHappensBefore (regression, passes): Novelty's
// doc: "no false negatives within T", "of N goroutines racing Seen on a
// key not seen within T, exactly one is told it is new", and "a false
// positive needs all L cells refreshed within T by other keys". Small
// sketches (L = 2 to 4, M = 1 or 2: commits of different stripes meet,
// levels are held at Hi), a yield before every commit CAS to widen the
// windows, and a clock that ticks 1 ms at a time within a round (held
// words at other stamps) but never T within one; the cells forget
// between rounds. Checked against the real-time order of each round's
// calls: a Seen that starts after a Seen of the same key returned is
// told seen; per key at most one caller is told new; with M = 1 (every
// key shares every cell) a Seen that starts after any Seen returned is
// told seen.
func TestAudit115NoveltyStressHappensBefore(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		for _, sz := range [][2]uint32{{2, 1}, {3, 1}, {4, 1}, {3, 2}, {4, 2}} {
			clk := sketchtest.NewFakeClock()
			clk.Set(10_000)
			n, err := NewNovelty(time.Second, WithClock(clk), WithSize(sz[0], sz[1]), WithSeed(uint64(sz[0]*10+sz[1])), WithPrefetch(false), WithPeriodWindows(1e6))
			if err != nil {
				t.Fatal(err)
			}
			p := n.rot().Current().Gens[0]
			var conflicts, held atomic.Int64
			core.SetHooks(p, core.Hooks{
				BeforeCAS: func(uint32) { runtime.Gosched() },
				Conflict:  func(uint32) { conflicts.Add(1) },
				Held:      func(uint32) { held.Add(1) },
			})
			const workers, perWorker, keys, rounds = 4, 12, 10, 25
			for round := range rounds {
				var seq atomic.Int64
				calls := make([][]a115Call, workers)
				var wg sync.WaitGroup
				stop := make(chan struct{})
				var ticks sync.WaitGroup
				ticks.Go(func() {
					for i := 0; i < 200; i++ {
						select {
						case <-stop:
							return
						default:
						}
						if i%4 == 0 {
							clk.Advance(time.Millisecond)
						}
						runtime.Gosched()
					}
				})
				for w := range workers {
					wg.Go(func() {
						x := uint32(w*7919 + round*104729 + 1)
						for range perWorker {
							x ^= x << 13
							x ^= x >> 17
							x ^= x << 5
							k := int(x % keys)
							c := a115Call{key: k, start: seq.Add(1)}
							c.seen = n.Seen(fmt.Sprintf("r%d-k%d", round, k))
							c.end = seq.Add(1)
							calls[w] = append(calls[w], c)
						}
					})
				}
				wg.Wait()
				close(stop)
				ticks.Wait()
				var all []a115Call
				for _, cs := range calls {
					all = append(all, cs...)
				}
				fresh := map[int]int{}
				firstEnd := int64(1 << 62)
				keyEnd := map[int]int64{}
				for _, c := range all {
					if !c.seen {
						fresh[c.key]++
					}
					firstEnd = min(firstEnd, c.end)
					if e, ok := keyEnd[c.key]; !ok || c.end < e {
						keyEnd[c.key] = c.end
					}
				}
				for _, c := range all {
					if c.seen {
						continue
					}
					if c.start > keyEnd[c.key] {
						t.Errorf("L=%d M=%d round %d: a Seen of k%d started after one of k%d returned, told new", sz[0], sz[1], round, c.key, c.key)
					}
					if sz[1] == 1 && c.start > firstEnd {
						t.Errorf("L=%d M=%d round %d: a Seen of k%d started after a Seen returned (every key shares every cell), told new", sz[0], sz[1], round, c.key)
					}
				}
				for k, f := range fresh {
					if f > 1 {
						t.Errorf("L=%d M=%d round %d: %d callers of k%d told new", sz[0], sz[1], round, f, k)
					}
				}
				clk.Advance(3 * time.Second) // forget the round
			}
			core.SetHooks(p, core.Hooks{})
			if n.rot().Current().Gens[0] != p {
				t.Fatal("the primary changed")
			}
			t.Logf("L=%d M=%d: %d commit conflicts, %d levels held by a denial", sz[0], sz[1], conflicts.Load(), held.Load())
		}
	})
}
