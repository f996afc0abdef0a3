package rotator

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit99RotTryJumpAllRetire: TryUpdate "stays exact across
// promotions" (doc.go) when the promotion retires every generation: 8
// goroutines race TryUpdateString("k", 1, 40) while one goroutine moves
// the clock N or N+3 Periods ahead at a varying point of the race (one
// promotion of k >= N periods: the new primary is a fresh generation
// holding nothing of the old set). A goroutine stops only on a denial
// decided after it saw the move, so that denial was on the new set and
// the new primary then held the limit: after the race the primary reads
// exactly 40, no more (no over-admission by calls in flight on the old
// set) and no less (no admission after the jump lost), the admissions
// total 40 plus those before the promotion (at most 40), and Stats count
// one promotion of the periods jumped.
func TestAudit99RotTryJumpAllRetire(t *testing.T) {
	const limit = 40
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		for round := range 6 {
			n := uint32(2 + round%3)
			jump := int64(n) + int64(round%2)*3
			clk := sketchtest.NewFakeClock()
			clk.Set(a99T0)
			r := a99Rot(t, clk, n, 10*time.Millisecond)
			var admitted, calls atomic.Int64
			var moved atomic.Bool
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for calls.Load() < int64(8*round+4) {
					clk.NowMillis()
					runtime.Gosched() // a call-free spin loop can go unpreempted for ever under qemu-user
				}
				clk.Set(a99T0 + jump*10)
				moved.Store(true)
			}()
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						after := moved.Load()
						ok := r.TryUpdateString("k", 1, limit)
						calls.Add(1)
						if ok {
							admitted.Add(1)
						} else if after {
							return
						}
					}
				}()
			}
			wg.Wait()
			if got := r.QueryString("k"); got != limit {
				t.Fatalf("round %d (N=%d, jump %d periods): the new primary reads %v after the race, want exactly %d", round, n, jump, got, limit)
			}
			if a := admitted.Load(); a < limit || a > 2*limit {
				t.Fatalf("round %d: %d admitted in all, want %d after the jump plus at most %d before", round, a, limit, limit)
			}
			if st := r.Stats(); st.Promotions != 1 || st.Periods != uint64(jump) {
				t.Fatalf("round %d: Stats %+v, want one promotion of %d periods", round, st, jump)
			}
		}
	})
}
