package limit_test

import (
	"fmt"
	"runtime"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit8TierReserveExactRacing: TestReserveDelaysExactMovingClock
// through a Tier of another rate (the limiter 10/s, the tier 2.5/s,
// burst 6: 400 ms a token): racing reservations of one key get the
// delays of a serial order, t0 + (k+1-burst) x 400 ms for k >= burst.
func TestAudit8TierReserveExactRacing(t *testing.T) {
	const G, per, burst, moves = 8, 6, 6, 40
	for _, procs := range []int{1, 2, 8} {
		for _, c := range reserveExactCases() {
			t.Run(fmt.Sprintf("P%d/%s", procs, c.name), func(t *testing.T) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				clk := sketchtest.NewFakeClock()
				clk.Set(1 << 36)
				o := append([]limit.Option{limit.WithSeed(4), limit.WithClock(clk), limit.WithMaxDebt(400)}, c.opts...)
				l, err := limit.New(10, 20, o...)
				if err != nil {
					t.Fatal(err)
				}
				tier, err := l.Tier("slow", 2.5, burst)
				if err != nil {
					t.Fatal(err)
				}
				start := clk.Now()
				var mu sync.Mutex
				var acts []time.Time
				raceMovingClock(clk, G, moves, func(int) {
					for range per {
						r := tier.ReserveN(l.Now(), "k", 1)
						if !r.OK() {
							t.Error("refused below MaxDebt")
							return
						}
						mu.Lock()
						acts = append(acts, start.Add(r.DelayFrom(start)))
						mu.Unlock()
						runtime.Gosched()
					}
				})
				if t.Failed() {
					return
				}
				sort.Slice(acts, func(i, j int) bool { return acts[i].Before(acts[j]) })
				t0 := acts[burst].Add(-400 * time.Millisecond)
				if t0.Before(start) || t0.After(start.Add(moves*time.Millisecond)) {
					t.Fatalf("first take at +%v (acts from start: %v)", t0.Sub(start), acts)
				}
				for k := burst; k < len(acts); k++ {
					if want := t0.Add(time.Duration(k+1-burst) * 400 * time.Millisecond); !acts[k].Equal(want) {
						t.Fatalf("take #%d may act at +%v, want +%v exactly", k, acts[k].Sub(start), want.Sub(start))
					}
				}
			})
		}
	}
}
