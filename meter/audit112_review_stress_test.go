package meter

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit112NoveltyStressPerKey (regression, passes): Novelty's doc:
// "of N goroutines racing Seen on a key not seen within T, exactly one is
// told it is new" (at most one where other keys refreshed all its cells:
// a false positive) and "no false negatives within T". Small sketches
// (L = 2, 3 of 1 to 4 cells) so commits of different stripes conflict
// and levels are held (marks at Hi), the clock stepping 1 ms meanwhile
// (held words at other stamps); every key raced by several goroutines;
// T' = 64 ms, so nothing decays below theta within a round. Per key at
// most one caller is told new, and after the round every key reads as
// seen.
func TestAudit112NoveltyStressPerKey(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		for _, sz := range [][2]uint32{{2, 1}, {3, 1}, {3, 2}, {2, 4}} {
			clk := sketchtest.NewFakeClock()
			clk.Set(10_000)
			n, err := NewNovelty(64*time.Millisecond, WithClock(clk), WithSize(sz[0], sz[1]), WithSeed(uint64(sz[0]*10+sz[1])))
			if err != nil {
				t.Fatal(err)
			}
			const keys, perKey = 12, 4
			for round := range 6 {
				var fresh [keys]atomic.Int32
				var wg sync.WaitGroup
				stop := make(chan struct{})
				var ticks sync.WaitGroup
				ticks.Go(func() {
					for range 8 {
						select {
						case <-stop:
							return
						default:
						}
						clk.Advance(time.Millisecond)
						runtime.Gosched()
					}
				})
				for g := range keys * perKey {
					wg.Go(func() {
						k := fmt.Sprintf("r%d-k%d", round, g%keys)
						if !n.Seen(k) {
							fresh[g%keys].Add(1)
						}
					})
				}
				wg.Wait()
				close(stop)
				ticks.Wait()
				for k := range keys {
					key := fmt.Sprintf("r%d-k%d", round, k)
					if got := fresh[k].Load(); got > 1 {
						t.Errorf("L=%d M=%d round %d: %d callers of %s told new", sz[0], sz[1], round, got, key)
					}
					if !n.Contains(key) {
						t.Errorf("L=%d M=%d round %d: %s forgotten right after its sightings", sz[0], sz[1], round, key)
					}
				}
				clk.Advance(200 * time.Millisecond) // forget the round
			}
		}
	})
}
