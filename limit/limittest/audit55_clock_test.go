package limittest_test

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit/limittest"
)

// TestAudit55FixedFakeClockConcurrentAdvanceLosesMoves (fixed: Advance reads and moves the time under the lock): 4 goroutines
// each Advance(1 ms) 2000 times: the clock should read 8000 ms. Advance
// reads the time outside the lock (Set(c.ms.Load() + d)), so two
// concurrent Advances can both read X and both Set X+1: moves are lost.
// clock.go: "Safe for concurrent use"; sketchtest.FakeClock, whose scale
// it shares, loses none.
func TestAudit55FixedFakeClockConcurrentAdvanceLosesMoves(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	lost := int64(0)
	for range 20 {
		c := limittest.NewFakeClock()
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 2000 {
					c.Advance(time.Millisecond)
				}
			}()
		}
		wg.Wait()
		if got := c.NowMillis(); got != 8000 {
			lost += 8000 - got
		}
	}
	if lost > 0 {
		t.Errorf("20 runs of 4 x 2000 concurrent Advance(1ms): %d ms of moves lost in all (want every run at 8000 ms; clock.go: \"Safe for concurrent use\")", lost)
	}
}
