package limit_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit45XRateRacingReservationsSerialDelays: "reservations of one
// key racing with each other get exactly the delays of a serial order, as
// x/time/rate's" (ReserveN doc). 10/s, burst 5, MaxDebt 40, the clock
// frozen: 60 racing Reserve(1): a serial x/time/rate order (bounded by
// MaxDebt) gives 40 OK with delays 0 x5, 100ms, ..., 3500ms. Buckets may
// deny one with room (doc "Exactness"), so there the OK delays must be a
// set of distinct serial slots, none below 0 or past 3500ms.
func TestAudit45XRateRacingReservationsSerialDelays(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		a45Each(t, func(t *testing.T, eng limit.Engine) {
			for round := range 20 {
				e := a45New(t, 10, 5, eng, limit.WithMaxDebt(40))
				var mu sync.Mutex
				var delays []time.Duration
				var wg sync.WaitGroup
				start := make(chan struct{})
				for range 60 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						r := e.l.Reserve("k")
						if r.OK() {
							mu.Lock()
							delays = append(delays, r.Delay())
							mu.Unlock()
						}
					}()
				}
				close(start)
				wg.Wait()
				slices.Sort(delays)
				var want []time.Duration
				for i := range 40 {
					want = append(want, max(0, time.Duration(i-4)*a45D))
				}
				if eng == limit.CountMin {
					if !slices.Equal(delays, want) {
						t.Fatalf("round %d: delays %v, want %v", round, delays, want)
					}
					continue
				}
				// Buckets: distinct serial slots (0 may repeat 5 times).
				seen := map[time.Duration]int{}
				for _, d := range delays {
					seen[d]++
					if d < 0 || d > 3500*time.Millisecond || d%a45D != 0 || (d > 0 && seen[d] > 1) || seen[d] > 5 {
						t.Fatalf("round %d: delays %v: not serial slots", round, delays)
					}
				}
				if len(delays) < 37 || len(delays) > 40 {
					t.Fatalf("round %d: %d OK, want 40 (37 at least on Buckets)", round, len(delays))
				}
			}
		})
	})
}

// TestAudit45XRateWaitDeadlineEdge: a wait that would end 1 ms after the
// deadline is refused before anything is debited (docs/readings.md Wait
// row: "checked before the debit, as x/time/rate's maxFutureReserve").
func TestAudit45XRateWaitDeadlineEdge(t *testing.T) {
	a45Each(t, func(t *testing.T, eng limit.Engine) {
		e := a45New(t, 10, 3, eng)
		e.clk.SetTime(time.Now().Add(time.Hour).Truncate(time.Millisecond))
		if !e.l.AllowN(e.clk.Now(), "k", 3) {
			t.Fatal("burst not admitted")
		}
		ctx, cancel := context.WithDeadline(context.Background(), e.clk.Now().Add(199*time.Millisecond))
		defer cancel()
		err := e.l.WaitN(ctx, "k", 2) // acts at +200ms
		if !errors.Is(err, limit.ErrPastDeadline) {
			t.Errorf("WaitN ending 1ms past the deadline: %v", err)
		}
		if tk := e.l.Tokens("k"); tk != 0 {
			t.Errorf("tokens %v after refused wait, want 0", tk)
		}
	})
}
