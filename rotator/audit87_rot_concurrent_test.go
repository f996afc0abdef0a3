package rotator_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit87RotTryUpdateExactAcrossBoundaries: rotator.TryUpdate "stays
// exact across promotions", and across up to N-1 promotions the primary
// is a generation written all along (warm start), so with no decay the
// total admitted by racing TryUpdates equals the limit exactly. At
// GOMAXPROCS 1, 2, 4 and 8, 8 goroutines call TryUpdateAt with explicit
// times spread over N-1 deadlines (the clock set past them, so no time is
// capped; times behind the mark count as the mark), for one key and for
// 8 keys all colliding (CellsPerLevel 1: the total over all keys is the
// limit); the promotions happen inside the race. Exactly N-1 periods
// rotate, and the primary reads the limit afterwards.
func TestAudit87RotTryUpdateExactAcrossBoundaries(t *testing.T) {
	const (
		P        = 100 * time.Millisecond
		limit    = 300
		workers  = 8
		attempts = 150
	)
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		for _, n := range []uint32{2, 3, 4} {
			for _, m := range []uint32{1, 1 << 10} {
				keys := 1
				if m == 1 {
					keys = 8
				}
				clk := sketchtest.NewFakeClock()
				clk.SetTime(a87T0)
				r := a87Rot(t, clk, decay.None(), n, m, P)
				span := time.Duration(n-2)*P + 60*time.Millisecond // from P - 30ms to (N-1)P + 30ms
				clk.SetTime(a87T0.Add(P - 30*time.Millisecond + span))
				var admitted atomic.Int64
				var wg sync.WaitGroup
				for g := range workers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := range attempts {
							at := a87T0.Add(P - 30*time.Millisecond + span*time.Duration(i*workers+g)/(workers*attempts))
							if r.TryUpdateAt(at, fmt.Sprintf("k%d", (g+i)%keys), 1, limit) {
								admitted.Add(1)
							}
						}
					}()
				}
				wg.Wait()
				if got := admitted.Load(); got != limit {
					t.Fatalf("N=%d M=%d: %d admitted across %d promotions, want exactly %d", n, m, got, n-1, limit)
				}
				if st := r.Stats(); st.Periods != uint64(n-1) {
					t.Fatalf("N=%d M=%d: %d periods rotated, want %d", n, m, st.Periods, n-1)
				}
				// k0 holds every admission: the only key, or all keys colliding.
				if total := r.QueryString("k0"); total != limit {
					t.Fatalf("N=%d M=%d: the primary reads %v after the race, want %d", n, m, total, limit)
				}
			}
		}
	})
}

// TestAudit87RotTryUpdateExactClockMover: as above with the short forms
// and the clock moved by one goroutine while 8 others race
// TryUpdateString(k, 1, 300): N-1 Periods at once (N = 2, 3, 4: one
// promotion of N-1 periods, whose new primary is the youngest generation,
// written all along), at whatever point of the race the move lands;
// exactly 300 are admitted.
func TestAudit87RotTryUpdateExactClockMover(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		for round := range 6 {
			n := uint32(2 + round%3)
			clk := sketchtest.NewFakeClock()
			clk.SetTime(a87T0)
			r := a87Rot(t, clk, decay.None(), n, 1<<10, time.Second)
			var admitted, calls atomic.Int64
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Move once a share of the calls has run (no sleeping: it
				// spins on the count the workers publish).
				for calls.Load() < int64(40*(round+1)) {
					r.QueryString("x")
				}
				clk.Advance(time.Duration(n-1) * time.Second)
			}()
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 150 {
						if r.TryUpdateString("k", 1, 300) {
							admitted.Add(1)
						}
						calls.Add(1)
					}
				}()
			}
			wg.Wait()
			if got := admitted.Load(); got != 300 {
				t.Fatalf("round %d (N=%d): %d admitted, want exactly 300", round, n, got)
			}
			if got := r.QueryString("k"); got != 300 {
				t.Fatalf("round %d (N=%d): Query = %v after the promotion, want 300", round, n, got)
			}
			if st := r.Stats(); st.Periods != uint64(n-1) || st.Promotions != 1 {
				t.Fatalf("round %d (N=%d): stats %+v, want one promotion of %d periods", round, n, st, n-1)
			}
		}
	})
}
