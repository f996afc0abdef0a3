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

// TestAudit8ReserveExactRacingStaleFuture: TestReserveDelaysExactMovingClock
// with the t passed a third of the time stale (1 s before the clock:
// counts as the high-water mark) and a third of the time in the future
// (counts as the clock's reading): the
// sorted absolute times to act of one key alone must be exactly
// t0 + (k+1-burst) x 100 ms for k >= burst.
func TestAudit8ReserveExactRacingStaleFuture(t *testing.T) {
	const G, per, burst, moves = 8, 25, 10, 40
	cases := append(reserveExactCases(),
		reserveExactCase{"count-min-rot3-cu", []limit.Option{limit.WithEngine(limit.CountMin), limit.WithGenerations(3), limit.WithPeriod(20 * time.Second), limit.WithConservativeUpdate(true)}})
	for _, procs := range []int{1, 2, 8} {
		for _, c := range cases {
			t.Run(fmt.Sprintf("P%d/%s", procs, c.name), func(t *testing.T) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				clk := sketchtest.NewFakeClock()
				clk.Set(1 << 36)
				o := append([]limit.Option{limit.WithSeed(3), limit.WithClock(clk), limit.WithMaxDebt(400)}, c.opts...)
				l, err := limit.New(10, burst, o...)
				if err != nil {
					t.Fatal(err)
				}
				start := clk.Now()
				var mu sync.Mutex
				var acts []time.Time
				raceMovingClock(clk, G, moves, func(g int) {
					for i := range per {
						tt := l.Now()
						switch (g + i) % 3 {
						case 1:
							tt = tt.Add(-time.Second)
						case 2:
							tt = tt.Add(time.Hour)
						}
						r := l.ReserveN(tt, "k", 1)
						if !r.OK() {
							t.Error("refused below MaxDebt")
							return
						}
						act := start.Add(r.DelayFrom(start)) // timeToAct: never before start
						mu.Lock()
						acts = append(acts, act)
						mu.Unlock()
						runtime.Gosched()
					}
				})
				if t.Failed() {
					return
				}
				sort.Slice(acts, func(i, j int) bool { return acts[i].Before(acts[j]) })
				// The first take's time, from the exact schedule of the
				// k >= burst ones.
				t0 := acts[burst].Add(-100 * time.Millisecond)
				if t0.Before(start) || t0.After(start.Add(moves*time.Millisecond)) {
					t.Fatalf("first take at +%v, want within the %d ms the clock moved", t0.Sub(start), moves)
				}
				for k := burst; k < len(acts); k++ {
					if want := t0.Add(time.Duration(k+1-burst) * 100 * time.Millisecond); !acts[k].Equal(want) {
						t.Fatalf("take #%d may act at +%v, want +%v exactly", k, acts[k].Sub(start), want.Sub(start))
					}
				}
			})
		}
	}
}
