package limit_test

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit8LaggingTimeFreezes: callers pass t (request timestamps) that
// lag the limiter's clock by an hour, as AllowN allows ("a t before a
// time already used counts as that time"; nothing used the clock's
// reading). 8 goroutines race AllowN(t0 + i ms, "hot", 1) on a 1000/s
// Buckets limiter (burst 30): the key's debt drains between calls. Then,
// serially, a fresh key takes its burst at t1 = the last t + 1 ms, and
// its burst again at t1 + 1 s (1000 tokens drained by then): both must
// be admitted. A builtOn compensation during the race is an Update at
// the clock's reading, which moves the high-water mark an hour ahead:
// every later t counts as that time, the limiter's time stops for the
// callers, and the second burst is refused.
func TestAudit8LaggingTimeFreezes(t *testing.T) {
	for _, procs := range []int{2, 8} {
		for rep := range 5 {
			t.Run(fmt.Sprintf("P%d/%d", procs, rep), func(t *testing.T) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				clk := sketchtest.NewFakeClock()
				const t0ms = 1_000_000_000
				clk.Set(t0ms)
				l, err := limit.New(1000, 30, limit.WithEngine(limit.Buckets), limit.WithClock(clk), limit.WithSeed(uint64(rep)))
				if err != nil {
					t.Fatal(err)
				}
				clk.Advance(time.Hour)
				var ctr atomic.Int64
				var denied atomic.Int64
				var wg sync.WaitGroup
				go0 := make(chan struct{})
				for range 8 {
					wg.Go(func() {
						<-go0
						for range 500 {
							if !l.AllowN(time.UnixMilli(t0ms+ctr.Add(1)), "hot", 1) {
								denied.Add(1)
							}
						}
					})
				}
				close(go0)
				wg.Wait()
				t1 := time.UnixMilli(t0ms + ctr.Load() + 1)
				a := l.AllowN(t1, "fresh", 30)
				b := l.AllowN(t1.Add(time.Second), "fresh", 30)
				if !a || !b {
					t.Fatalf("fresh key's burst at t1 %v, again 1 s later %v (hot key: %d of 4000 denied)", a, b, denied.Load())
				}
			})
		}
	}
}
