package bucket

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit34SplitUpdatesMovingLinesStress: hooks that only yield. Each round, 5
// goroutines Update a fresh key by 4 tokens at once (racing inserts,
// undos, merges) while a mover advances the clock 1 ms at a time and
// writes two other keys (moving both lines' lw). Every write of the key
// is at the round's start or later, so its true load at the end is at
// least 20 tokens less the elapsed ms (Linear(1000, 60): a token a ms);
// the key must never read below that. It reports how many rounds read
// below (Finding 1's merge under-count, if the race shows up without
// hooks) and fails on any.
func TestAudit34SplitUpdatesMovingLinesStress(t *testing.T) {
	rounds := 1500
	if testsize.Race {
		rounds = 600
	}
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_000_000)
		e := newTest(t, 2, Linear(1000, 60), clk)
		var undos atomic.Int64 // give-back CASes tried (undos after a conflict): the races happen
		// The hooks only yield (and count undos), to widen the windows
		// between a read, its CAS and its validation.
		y := func() { runtime.Gosched() }
		e.setHooks(&testHooks{beforeLower: func() { undos.Add(1) }, beforeCAS: y, afterCAS: y, afterCheck: y, afterLoad: y})
		bad, worst := 0, 0.0
		for r := range rounds {
			k := fmt.Sprintf("a34s%d", r)
			t0 := clk.NowMillis()
			start := make(chan struct{})
			var wg sync.WaitGroup
			for range 5 {
				wg.Go(func() {
					<-start
					e.Update(k, 4)
				})
			}
			wg.Go(func() {
				<-start
				for i := range 3 {
					clk.Advance(time.Millisecond)
					e.Update(fmt.Sprintf("mv%d", i%2), 0.001)
				}
			})
			close(start)
			wg.Wait()
			el := float64(clk.NowMillis() - t0)
			lo := 20 - el
			if q := e.Query(k); q < lo-1e-9 {
				bad++
				worst = max(worst, lo-q)
			}
			clk.Advance(30 * time.Millisecond) // the key drains before the next round
		}
		t.Logf("%d rounds, %d undo CASes tried, %d read below", rounds, undos.Load(), bad)
		if bad > 0 {
			t.Fatalf("%d of %d rounds read the key below its true load (worst by %.3f tokens)", bad, rounds, worst)
		}
	})
}
