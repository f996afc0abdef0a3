package limit_test

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit66CancelRaceSameMs: Reservation.Cancel gives a reservation
// back where no other request wrote the key's cells since, "and with the
// count-min so does one written since only within the same millisecond,
// below MaxDebt" (reserve.go). At one frozen millisecond, goroutines
// reserve one key and cancel every other reservation, far below MaxDebt:
// on the count-min every Cancel gives back, so the key's debt is exactly
// the kept reservations; on Buckets a Cancel may keep its debit ("on the
// safe side"), so the debt is at least the kept ones and at most all
// taken. Both engines, GOMAXPROCS 1..8, -race.
func TestAudit66CancelRaceSameMs(t *testing.T) {
	for _, eng := range []limit.Engine{limit.CountMin, limit.Buckets} {
		t.Run(eng.String(), func(t *testing.T) {
			sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
				clk := sketchtest.NewFakeClock()
				clk.Set(8_000_000)
				max := 2000.0
				opts := []limit.Option{limit.WithClock(clk), limit.WithEngine(eng), limit.WithMaxDebt(max), limit.WithSeed(5)}
				r := limit.Limit(1000)
				if eng == limit.Buckets {
					r = 1e5 // MaxDebt 2000 drains in 20 ms
				}
				l, err := limit.New(r, 10, opts...)
				if err != nil {
					t.Fatal(err)
				}
				var kept, taken atomic.Int64
				var wg sync.WaitGroup
				for g := 0; g < 6; g++ {
					wg.Add(1)
					go func(g int) {
						defer wg.Done()
						tm := l.Now()
						for i := 0; i < 250; i++ {
							rv := l.ReserveN(tm, "k", 1)
							if !rv.OK() {
								t.Errorf("reservation refused below MaxDebt")
								return
							}
							taken.Add(1)
							if (i+g)%2 == 0 {
								rv.Cancel()
							} else {
								kept.Add(1)
							}
						}
					}(g)
				}
				wg.Wait()
				debt := 10 - l.TokensAt(l.Now(), "k")
				k, tk := float64(kept.Load()), float64(taken.Load())
				switch {
				case eng == limit.CountMin && debt != k:
					t.Fatalf("count-min: debt %v after %v kept of %v taken in one ms (all Cancels below MaxDebt), want exactly %v", debt, k, tk, k)
				case debt < k || debt > tk:
					t.Fatalf("buckets: debt %v outside [kept %v, taken %v]", debt, k, tk)
				}
			})
		})
	}
}
