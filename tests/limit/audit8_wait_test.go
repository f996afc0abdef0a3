package limit_test

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// TestAudit8WaitNRacingNeverEarly: 24 goroutines WaitN(ctx, k, 1) on one
// key of a 10/s limiter (burst 4), 3 times each, on a fake clock that
// can wait, moved 1 ms at a time by a driver while every live waiter is
// blocked on its timer.
// The k-th return (sorted by the clock's reading when it returned) is no
// earlier than start + (k+1-burst) x 100 ms, and the last no later than
// that plus the few ms the driver may run ahead.
func TestAudit8WaitNRacingNeverEarly(t *testing.T) {
	const G, per, burst = 24, 3, 4
	for _, procs := range []int{1, 2, 8} {
		for _, c := range append(reserveExactCases(), a8Cases()[0], a8Cases()[2]) {
			t.Run(fmt.Sprintf("P%d/%s", procs, c.name), func(t *testing.T) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				clk := limittest.NewFakeClock()
				clk.Set(1 << 36)
				o := append([]limit.Option{limit.WithSeed(11), limit.WithClock(clk), limit.WithMaxDebt(400)}, c.opts...)
				l, err := limit.New(10, burst, o...)
				if err != nil {
					t.Fatal(err)
				}
				start := clk.Now()
				var mu sync.Mutex
				var rets []time.Time
				var wg sync.WaitGroup
				var done atomic.Int32
				for range G {
					wg.Go(func() {
						defer done.Add(1)
						for range per {
							if err := l.WaitN(context.Background(), "k", 1); err != nil {
								t.Error(err)
								return
							}
							now := clk.Now()
							mu.Lock()
							rets = append(rets, now)
							mu.Unlock()
						}
					})
				}
				// The clock moves only while every live waiter is
				// blocked on its timer: a waiter still running (woken,
				// or between two waits) would otherwise read a clock
				// that ran on under machine load, and its return would
				// look late (seen: +8.4 s for +6.8 s under make test).
				for done.Load() < G {
					if n := clk.Timers(); n > 0 && n == G-int(done.Load()) {
						clk.Advance(time.Millisecond)
					}
					runtime.Gosched()
				}
				wg.Wait()
				if t.Failed() {
					return
				}
				sort.Slice(rets, func(i, j int) bool { return rets[i].Before(rets[j]) })
				for k, r := range rets {
					if k < burst {
						continue
					}
					if lb := start.Add(time.Duration(k+1-burst) * 100 * time.Millisecond); r.Before(lb) {
						t.Fatalf("wait #%d returned at +%v, before +%v", k, r.Sub(start), lb.Sub(start))
					}
				}
				last := rets[len(rets)-1].Sub(start)
				if want := time.Duration(G*per-burst) * 100 * time.Millisecond; last > want+50*time.Millisecond {
					t.Fatalf("last wait returned at +%v, want about +%v", last, want)
				}
			})
		}
	}
}
