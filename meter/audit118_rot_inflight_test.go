package meter_test

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit118RotInflightTryAcquireExactAcrossClockJumps (regression,
// passes): Inflight's doc: "TryAcquire(key, max) acquires only if the
// count is below max, exactly under contention (the sketch's TryUpdate):
// N goroutines racing TryAcquire(k, 100) without releasing get exactly
// 100 guards"; its counts "take no time", so a clock jump must change
// nothing. Goroutines race TryAcquire(k, max) while another steps the
// fake clock by 2^31 ms (a re-base of the sketch's time) and reads
// another key, which runs the re-base mid-race. Exactly max guards, Count
// = max, and 0 after every Guard is released (released twice: idempotent).
func TestAudit118RotInflightTryAcquireExactAcrossClockJumps(t *testing.T) {
	rounds := testsize.Sample(40, 10, 4)
	for round := range rounds {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_000)
		in, err := meter.NewInflight(64, meter.WithClock(clk), meter.WithSize(2, 8), meter.WithSeed(uint64(round)))
		if err != nil {
			t.Fatal(err)
		}
		const racers, max = 16, 5
		key := fmt.Sprintf("k%d", round)
		guards := make(chan *meter.Guard, racers*4)
		var wg sync.WaitGroup
		stop := make(chan struct{})
		var jumps sync.WaitGroup
		jumps.Go(func() {
			for range 4 {
				select {
				case <-stop:
					return
				default:
				}
				clk.Advance(time.Duration(1<<31) * time.Millisecond)
				in.Count("other")
				runtime.Gosched()
			}
		})
		for range racers {
			wg.Go(func() {
				for range 3 {
					if g := in.TryAcquire(key, max); g != nil {
						guards <- g
					}
				}
			})
		}
		wg.Wait()
		close(stop)
		jumps.Wait()
		close(guards)
		var held []*meter.Guard
		for g := range guards {
			held = append(held, g)
		}
		if len(held) != max {
			t.Fatalf("round %d: %d racers admitted %d guards with limit %d and no release, across clock jumps of 2^31 ms", round, racers, len(held), max)
		}
		if c := in.Count(key); c != max {
			t.Fatalf("round %d: Count = %d with %d held", round, c, max)
		}
		clk.Advance(time.Duration(1<<31) * time.Millisecond)
		for _, g := range held {
			g.Release()
			g.Release()
		}
		if c := in.Count(key); c != 0 {
			t.Fatalf("round %d: Count = %d after every Guard was released", round, c)
		}
		if g := in.TryAcquire(key, 1); g == nil {
			t.Fatalf("round %d: TryAcquire(k, 1) refused after every Guard was released", round)
		} else {
			g.Release()
		}
	}
}
