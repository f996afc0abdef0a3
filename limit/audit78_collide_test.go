package limit_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// Colliding keys racing Reserve, Cancel, Allow and RejectCost denials
// at one instant (every write in the same millisecond, where the
// count-min's Cancel does give back), in a count-min of one level of 4
// cells and a Buckets table of the fewest lines (evictions), with a
// MaxDebt small enough that cells clamp: "a key is never given back more
// than its own reservation, nor anything of another key's, even once
// MaxDebt has cut another key's debit" (reserve.go), and "A key's read
// debt is at least its own debt on either engine" (doc.go). Each key's
// own debt is at least its admitted Allows plus its reservations not
// cancelled; the limiter must read at least that (capped at MaxDebt).
func TestAudit78CollidingCancelOneSided(t *testing.T) {
	for _, e := range []limit.Engine{limit.Buckets, limit.CountMin} {
		t.Run(e.String(), func(t *testing.T) {
			sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
				for rep := range 6 {
					clk := limittest.NewFakeClock()
					clk.Set(a78Start)
					opts := a78Opts(clk, e, uint64(rep), limit.WithMaxDebt(12), limit.WithRejectCost(1))
					if e == limit.CountMin {
						opts = append(opts, limit.WithSize(1, 4))
					} else {
						opts = append(opts, limit.WithCapacity(1, 0.5))
					}
					l := limit.MustNew(10, 6, opts...)
					now := clk.Now()
					const keys = 6
					var lb [keys]int
					var wg sync.WaitGroup
					for g := range keys {
						wg.Add(1)
						go func() {
							defer wg.Done()
							rng := rand.New(rand.NewPCG(uint64(rep), uint64(g)))
							k := fmt.Sprintf("c%d-%d", rep, g)
							var held []*limit.Reservation
							var heldN []int
							for range 40 {
								n := 1 + rng.IntN(3)
								switch rng.IntN(3) {
								case 0:
									if l.AllowN(now, k, n) {
										lb[g] += n
									}
								case 1:
									if r := l.ReserveN(now, k, n); r.OK() {
										held, heldN = append(held, r), append(heldN, n)
									}
								case 2:
									if len(held) > 0 {
										i := rng.IntN(len(held))
										held[i].Cancel()
										held = append(held[:i], held[i+1:]...)
										heldN = append(heldN[:i], heldN[i+1:]...)
									}
								}
							}
							for _, n := range heldN {
								lb[g] += n
							}
						}()
					}
					wg.Wait()
					for g := range keys {
						k := fmt.Sprintf("c%d-%d", rep, g)
						debt := 6 - l.TokensAt(now, k)
						if want := math.Min(float64(lb[g]), 12); debt < want-1e-9 {
							t.Fatalf("rep %d key %d: reads debt %v; its own admitted and still-reserved tokens are %d (one-sided: at least min(that, MaxDebt 12))", rep, g, debt, lb[g])
						}
					}
				}
			})
		})
	}
}
