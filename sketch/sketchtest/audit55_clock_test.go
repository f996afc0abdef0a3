package sketchtest_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit55FakeClockNowNeverTorn: movers keep the invariant "an odd
// millisecond carries a 0.5 ms fraction, an even one none" (Set(even),
// SetTime(odd + 0.5 ms), Advance(±2 ms), Advance(±1 ms)+Advance(±0.5 ms)
// is not used since two moves are not one) while readers call Now and
// NowMillis: every Now is a state the clock held (the invariant holds),
// at GOMAXPROCS 1..8 under -race.
func TestAudit55FakeClockNowNeverTorn(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		c := sketchtest.NewFakeClock()
		c.Set(1_700_000_000_000)
		var stop atomic.Bool
		var wg sync.WaitGroup
		for m := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 3000; i++ {
					switch (i + m) % 4 {
					case 0:
						c.Set(1_700_000_000_000 + int64(i)*2)
					case 1:
						c.SetTime(time.UnixMilli(1_700_000_000_001 + int64(i)*2).Add(500 * time.Microsecond))
					case 2:
						c.Advance(2 * time.Millisecond)
					case 3:
						c.Advance(-2 * time.Millisecond)
					}
				}
			}()
		}
		var bad atomic.Int64
		var rw sync.WaitGroup
		for range 2 {
			rw.Add(1)
			go func() {
				defer rw.Done()
				for !stop.Load() {
					n := c.Now()
					ms, frac := n.UnixMilli(), n.Nanosecond()%1e6
					if (ms%2 == 0) != (frac == 0) || (ms%2 != 0 && frac != 500_000) {
						bad.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		stop.Store(true)
		rw.Wait()
		if b := bad.Load(); b != 0 {
			t.Fatalf("%d torn Now readings (a fraction of one move beside the ms of another)", b)
		}
		n := c.Now()
		if n.UnixMilli() != c.NowMillis() {
			t.Fatalf("quiescent Now %v vs NowMillis %d", n, c.NowMillis())
		}
	})
}
