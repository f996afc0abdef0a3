package limit_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// TestWaitNDeadlineRace races, on a frozen fake clock, a WaitN whose
// deadline is the clock's reading (so it may only be admitted if it needs
// no wait) with a ReserveN of the same key that takes the debt past the
// burst. Whichever goes first, WaitN must return at once: nil when its
// own reservation fit the burst, ErrPastDeadline otherwise. Its time to
// act is read after its reservation and may count the ReserveN made
// after it; before WaitN bounded the wait by what its cap admitted, such
// a WaitN waited for a timer the frozen clock never fires (and on a real
// clock it was waited out to the deadline and refused).
func TestWaitNDeadlineRace(t *testing.T) {
	rounds := 2000
	if testing.Short() {
		rounds = 300
	}
	for _, e := range []limit.Engine{limit.Buckets, limit.CountMin} {
		for _, procs := range []int{2, 8} {
			t.Run(fmt.Sprintf("%v/P%d", e, procs), func(t *testing.T) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				clk := limittest.NewFakeClock()
				// An hour ahead of the wall clock: the context's deadline,
				// at the fake clock's reading, is not done in real time.
				clk.SetTime(time.Now().Add(time.Hour))
				l, err := limit.New(10, 5, limit.WithClock(clk), limit.WithEngine(e), limit.WithMaxDebt(50))
				if err != nil {
					t.Fatal(err)
				}
				admitted := 0
				for round := range rounds {
					key := fmt.Sprintf("k%d", round)
					if !l.ReserveN(clk.Now(), key, 4).OK() { // debt 4: one more token fits the burst
						t.Fatalf("round %d: the first ReserveN was refused", round)
					}
					start := make(chan struct{})
					errc := make(chan error, 1)
					var wg sync.WaitGroup
					wg.Go(func() {
						<-start
						ctx, cancel := context.WithDeadline(context.Background(), clk.Now())
						defer cancel()
						errc <- l.WaitN(ctx, key, 1)
					})
					wg.Go(func() {
						<-start
						l.ReserveN(clk.Now(), key, 4)
					})
					close(start)
					select {
					case err := <-errc:
						switch {
						case err == nil:
							admitted++
						case !errors.Is(err, limit.ErrPastDeadline):
							t.Fatalf("round %d: WaitN = %v, want nil or ErrPastDeadline", round, err)
						}
					case <-time.After(10 * time.Second):
						t.Fatalf("round %d: WaitN with its deadline at the clock's reading still waits after 10 s", round)
					}
					wg.Wait()
				}
				t.Logf("%d of %d WaitN admitted", admitted, rounds)
			})
		}
	}
}
