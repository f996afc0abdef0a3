package limit_test

// Audit 38: SetLimit and SetBurst racing Multi decisions. (Its version of
// TestAdvSetLimitRaceNoMix, each worker deciding until it has itself seen
// the policies, at most 200 keys, is now that test's own loop.)

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit38MultiSetLimitNoMix: a Multi of one window whose policy
// flips; every Multi decision must be one policy's exact bucket
// (multi.go: "Each window's policy, read once").
func TestAudit38MultiSetLimitNoMix(t *testing.T) {
	for _, procs := range []int{1, 4} {
		for _, engine := range engines {
			t.Run(fmt.Sprintf("P%d/%v", procs, engine), func(t *testing.T) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				clk := sketchtest.NewFakeClock()
				clk.Set(1 << 34)
				l, err := limit.New(10, 20, limit.WithClock(clk), limit.WithSeed(39), limit.WithEngine(engine),
					limit.WithMaxDebt(80), noAmnesty(engine))
				if err != nil {
					t.Fatal(err)
				}
				m, _ := limit.NewMulti(l)
				var stop atomic.Bool
				var flips sync.WaitGroup
				flips.Go(func() {
					for i := 0; !stop.Load(); i++ {
						if i%2 == 0 {
							_ = l.SetLimit([]limit.Limit{10, 5}[i/2%2])
						} else {
							_ = l.SetBurst([]int{20, 7}[i/2%2])
						}
						runtime.Gosched()
					}
				})
				var wg sync.WaitGroup
				seen := make([]map[[2]int]int, 3)
				for g := range 3 {
					seen[g] = map[[2]int]int{}
					wg.Go(func() {
						var debt int64
						key := 0
						for i := 0; i < 1500 || len(seen[g]) < 4 && i < 1<<21; i++ {
							if i%16 == 0 {
								runtime.Gosched()
							}
							k := fmt.Sprintf("m%d-%d", g, key)
							n := 1 + i%2
							d := m.DecideKeys(clk.Now(), n, k)
							seen[g][[2]int{int(d.Limit), d.Burst}]++
							if msg := checkPolicyDecision(d, debt, n); msg != "" {
								t.Errorf("g%d step %d key %s debt %d ms: %s: %+v", g, i, k, debt, msg, d)
								return
							}
							if d.Allowed {
								debt += int64(n) * int64(1000/d.Limit)
							} else if i%5 == 0 && key < 200 {
								key, debt = key+1, 0
							}
						}
					})
				}
				wg.Wait()
				stop.Store(true)
				flips.Wait()
				for g := range seen {
					if len(seen[g]) < 4 {
						t.Errorf("worker %d saw only %v", g, seen[g])
					}
				}
			})
		}
	}
}
