package grudge_test

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
)

// grudgetest/ticker.go: "Tick delivers one tick, which makes the attached
// Rotator rotate once, and returns when that rotation is done, so
// Rotations() read right after sees it ... Concurrent Ticks each rotate
// once." (migrating.md: "it waits for the rotation it delivered").
//
// With concurrent Ticks a Tick can return before its own rotation: it
// numbers its tick (sent.Add(1)) after the channel send, so two racing
// Ticks can take each other's numbers, and the one holding the earlier
// number returns when the other's rotation is reported. Seen here as a
// Tick after which Rotations() is no higher than it was before the Tick.
func TestAudit64FixedConcurrentTickReturnsEarly(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(8))
	deadline := time.Now().Add(8 * time.Second)
	var early atomic.Int64
	rounds := 0
	for early.Load() == 0 && time.Now().Before(deadline) {
		rounds++
		tk := grudgetest.NewFakeTicker()
		rot, err := grudge.NewRotator(grudge.RotatorConfig{
			Sketch:      grudge.Config{Levels: 1, CellsPerLevel: 8, Hi: 1, Clock: grudgetest.NewFakeClock()},
			Generations: 2,
			Ticker:      tk,
		})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for g := 0; g < 6; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 10; i++ {
					before := rot.Rotations()
					tk.Tick()
					if rot.Rotations() <= before {
						early.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		rot.Close()
	}
	if n := early.Load(); n > 0 {
		t.Fatalf("in %d rounds of 6 goroutines x 10 Ticks: %d Tick calls returned with Rotations() no higher than before the Tick; grudgetest: Tick \"returns when that rotation is done, so Rotations() read right after sees it\"", rounds, n)
	}
}
