package bucket

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// a31RefundRace: one goroutine reserves 45 on a key owing 5 (limit 50,
// clock frozen) and refunds it, again and again; others ask
// TryUpdate(x, 1, 50). Returns the tokens admitted and kept (5, every
// reservation whose Refund returned false, every admitted TryUpdate)
// after rounds rounds of at most 200 reservations.
func a31RefundRace(t *testing.T, procs, rounds int) (worst float64, cut int64) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
	for range rounds {
		e := newTest(t, 2, Linear(1000, 60), nil)
		e.Update("x", 5)
		var kept atomic.Int64 // in tokens
		kept.Store(5)
		var stop atomic.Bool
		var wg sync.WaitGroup
		wg.Go(func() {
			defer stop.Store(true)
			for range 200 {
				rc, ok := e.TryReserve("x", 45, 50)
				if !ok {
					return
				}
				if !e.Refund(&rc) {
					kept.Add(45)
					atomic.AddInt64(&cut, 1)
					return
				}
			}
		})
		for range 3 {
			wg.Go(func() {
				for !stop.Load() {
					if e.TryUpdate("x", 1, 50) {
						kept.Add(1)
					}
					runtime.Gosched()
				}
			})
		}
		wg.Wait()
		worst = max(worst, float64(kept.Load()))
	}
	return worst, cut
}

// TestAudit31FixedRefundCutShortOverAdmitsRace is the deterministic
// TestAudit31FixedRefundCutShortOverAdmits without hooks: one goroutine
// reserves 45 on a key owing 5 (Linear(1000, 60), limit 50, clock
// frozen) and refunds it (15 steps of at most 3.06 tokens), again and
// again, while 3 goroutines ask TryUpdate(x, 1, 50). Every Refund that
// returns false here was cut short by an admitted TryUpdate that read a
// partly refunded debt, so the key keeps 5 + 45 + the TryUpdates: past
// its limit of 50. Under -race (which widens the window between two
// steps) the audit saw 5 to 18 such Refunds and up to 92 tokens kept
// in 300 rounds at each of GOMAXPROCS 2, 4 and 8, in every run;
// without -race, 1 in 9,000 rounds, so the test needs -race.
func TestAudit31FixedRefundCutShortOverAdmitsRace(t *testing.T) {
	for _, p := range []int{2, 4, 8} {
		w, c := a31RefundRace(t, p, 300)
		t.Logf("GOMAXPROCS %d: most tokens kept %v (limit 50), Refunds cut short %d", p, w, c)
		if w > 50 {
			t.Errorf("GOMAXPROCS %d: key x kept %v tokens admitted against a limit of 50 with the clock frozen (%d Refunds returned false after a TryUpdate admitted on a partly refunded debt); want at most 50: doc.go, \"a key at its limit is never admitted early\"; Refund: false means \"the debt stays\"", p, w, c)
		}
	}
}
