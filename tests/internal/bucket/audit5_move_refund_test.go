package bucket_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/bucket"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit5MoveRefundAcrossMove: refunds racing the long move of their
// line. Linear(10, 40) (15 ticks a ms, slack 369 ms), two lines, keys
// alone. In each round, at time X, the test gives each of 4 own keys two
// reservations of 1 token (R1 kept, R2 held: R2 replaced R1's entry,
// live), then moves the clock by a gap of 1 s or more: both have
// drained, and R1's stamp is more than the slack below the new time,
// so R1 would read one wrap (2^16 ticks, 4.37 s) high in the moved
// window. Then, concurrently: each key's goroutine refunds R2 (which
// restores R1, live at the line's old time, unless the move came first),
// another goroutine queries the key, and 2 goroutines write other keys
// of the lines at the new time (long moves). Every Query must read 0
// (op.go, Refund: "An entry the write replaced that has expired since
// (or was empty) comes back as an empty slot: the same load, 0, without
// a stamp that could drift out of its window"; design.md: "an undo or
// refund never restores an entry that had expired"), and so must every
// key after the round.
func TestAudit5MoveRefundAcrossMove(t *testing.T) {
	law := bucket.Linear(10, 40)
	gaps := []time.Duration{time.Second, 1500 * time.Millisecond, 3 * time.Second, time.Hour}
	a5Procs(t, func(t *testing.T) {
		clk := sketchtest.NewFakeClock()
		clk.Set(1 << 34)
		e := a5Engine(t, 2, law, clk, 77)
		taken := map[uint16]bool{}
		own := a5Keys(e, 4, "rown", taken)
		movers := a5Keys(e, 4, "rmove", taken)
		for r := range reps(400, 80) {
			X := clk.Now()
			rcs := make([]bucket.Receipt, len(own))
			for i, k := range own {
				if _, ok := e.TryReserveAt(X, k, 1, 39); !ok {
					t.Fatalf("round %d: own key %d: first reservation denied", r, i)
				}
				var ok bool
				if rcs[i], ok = e.TryReserveAt(X, k, 1, 39); !ok {
					t.Fatalf("round %d: own key %d: second reservation denied", r, i)
				}
			}
			for _, k := range movers {
				e.UpdateAt(X, k, 1)
			}
			gap := gaps[r%len(gaps)]
			clk.Advance(gap)
			Y := clk.Now()
			var mu sync.Mutex
			var bad []string
			race(2*len(own)+2, 1, func(g, _ int) bool {
				switch {
				case g < len(own):
					e.Refund(&rcs[g])
				case g < 2*len(own):
					k := g - len(own)
					for range 8 {
						if q := e.QueryAt(Y, own[k]); q != 0 {
							mu.Lock()
							bad = append(bad, fmt.Sprintf("own key %d read %v while its reservation was refunded", k, q))
							mu.Unlock()
						}
					}
				default:
					for i := range movers {
						e.UpdateAt(Y, movers[(g+i)%len(movers)], 1)
					}
				}
				return false
			})
			for i, k := range own {
				if q := e.QueryAt(Y, k); q != 0 {
					bad = append(bad, fmt.Sprintf("own key %d reads %v after the round", i, q))
				}
			}
			if len(bad) > 0 {
				t.Fatalf("round %d (gap %v): %s", r, gap, strings.Join(bad, "; "))
			}
			clk.Advance(time.Second) // the movers' debts drain
		}
	})
}
