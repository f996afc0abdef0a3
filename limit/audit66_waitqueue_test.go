package limit_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit66TierWaitQueueExact: 20 goroutines call Tier.WaitN(ctx, key,
// 1) at once on a tier of 1/3 of the limiter's rate (10/3 per second: a
// token every 300 ms) with burst 5, on a fake clock. "Reservations of one
// key racing with each other get exactly the delays of a serial order"
// (ReserveN): the i-th reservation (from 0) may act at max(0, i-4) x 300
// ms. Stepping the clock 300 ms at a time, exactly min(20, 5 + k) waits
// have returned nil after k steps, never more, on both engines and
// GOMAXPROCS 1..8.
func TestAudit66TierWaitQueueExact(t *testing.T) {
	for _, eng := range []limit.Engine{limit.Buckets, limit.CountMin} {
		t.Run(eng.String(), func(t *testing.T) {
			sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
				clk := limittest.NewFakeClock()
				clk.Set(5_000_000)
				l, err := limit.New(10, 5, limit.WithClock(clk), limit.WithEngine(eng), limit.WithMaxDebt(60), limit.WithSeed(4))
				if err != nil {
					t.Fatal(err)
				}
				tier, err := l.Tier("slow", 10.0/3, 5)
				if err != nil {
					t.Fatal(err)
				}
				if !tier.Exact() {
					t.Fatal("tier not exact")
				}
				const N = 20
				var done atomic.Int64
				var wg sync.WaitGroup
				errs := make(chan error, N)
				for i := 0; i < N; i++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						if err := tier.WaitN(context.Background(), "k", 1); err != nil {
							errs <- err
							return
						}
						done.Add(1)
					}()
				}
				waitFor := func(want int64) {
					deadline := time.Now().Add(10 * time.Second)
					for done.Load() < want && time.Now().Before(deadline) {
						time.Sleep(time.Millisecond)
					}
				}
				// all 20 have reserved: 5 returned, 15 timers pending.
				waitFor(5)
				clk.BlockUntilTimers(N - 5)
				for k := 0; k <= N-5; k++ {
					want := int64(min(N, 5+k))
					waitFor(want)
					time.Sleep(2 * time.Millisecond)
					if got := done.Load(); got != want {
						t.Fatalf("after %d steps of 300 ms: %d waits returned, want exactly %d", k, got, want)
					}
					if k < N-5 {
						clk.Advance(299 * time.Millisecond)
						time.Sleep(2 * time.Millisecond)
						if got := done.Load(); got != want {
							t.Fatalf("1 ms before step %d: %d waits returned, want %d", k+1, got, want)
						}
						clk.Advance(time.Millisecond)
					}
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					t.Errorf("WaitN: %v", err)
				}
			})
		})
	}
}
