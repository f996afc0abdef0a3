package bucket

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit10StandsYieldStress: the windows the stands argument is about
// (between an entry's CAS and its validation, between the header check
// and the CAS, before a move's header CAS) widened by yields in the test
// hooks, 8 goroutines on 2 lines, GOMAXPROCS 2 and 8, the fake clock
// moved by the callers (1 ms every 4th call, past the slack every
// 200th). Keys: x, alone (its own fingerprint), asked for a debt of
// 1/8 ms at a time, never near its limit; 5 others hammered near their
// limits. Counted: x's denials (every one spurious) and readings of x
// above limit/2 (phantoms), each bounded (see the end); checked: each other key admits at most
// limit + drained and reads at least admitted - drained.
func TestAudit10StandsYieldStress(t *testing.T) {
	type lawC struct {
		name      string
		rate, max float64
		jump      time.Duration
	}
	for _, lw := range []lawC{{"2000x60", 2000, 60, 7 * time.Millisecond}, {"1000x60", 1000, 60, 9 * time.Millisecond}, {"10x40", 10, 40, 4 * time.Second}} {
		for _, procs := range []int{2, 8} {
			t.Run(fmt.Sprintf("%s/P%d", lw.name, procs), func(t *testing.T) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				var den, ph, calls int64
				var denLoads []float64
				denCands := map[int]int{}
				for rep := range 3 {
					clk := sketchtest.NewFakeClock()
					clk.Set(1_000_000)
					e := newTest(t, 2, Linear(lw.rate, lw.max), clk)
					yield := func() {
						if rand.IntN(3) == 0 {
							runtime.Gosched()
						}
					}
					e.setHooks(&testHooks{beforeCAS: yield, afterCAS: yield, beforeMove: func(uint64) { yield() }, afterLoad: yield})
					keys := a10Others(e, "x", 5, fmt.Sprintf("o%d-", rep))
					_, _, xfp := e.Locate("x")
					limit := lw.max / 2
					nx := lw.rate / 1000 / 8
					start := clk.Now()
					var ctr, xDen, xPh, xCalls atomic.Int64
					adm := make([]atomic.Int64, len(keys))
					var mu sync.Mutex
					var wg sync.WaitGroup
					for range 8 {
						wg.Go(func() {
							for range 800 {
								c := ctr.Add(1)
								if c%200 == 0 {
									clk.Advance(lw.jump)
								} else if c%4 == 0 {
									clk.Advance(time.Millisecond)
								}
								switch r := rand.IntN(8); {
								case r < 4:
									k := rand.IntN(len(keys))
									if e.TryUpdate(keys[k], 1, limit) {
										adm[k].Add(1)
									}
								case r < 7:
									xCalls.Add(1)
									if ok, q := e.TryUpdateAndQuery("x", nx, limit); !ok {
										xDen.Add(1)
										// x's entries in both lines just after (2: the
										// racing-insert or cleared-candidate paths).
										c := 0
										for i := range 2 {
											for _, f := range StateOf(e, i).FP {
												if f == xfp {
													c++
												}
											}
										}
										mu.Lock()
										denLoads = append(denLoads, q)
										denCands[c]++
										mu.Unlock()
									}
								default:
									if e.Query("x") > limit/2 {
										xPh.Add(1)
									}
								}
							}
						})
					}
					wg.Wait()
					e.setHooks(nil)
					drained := clk.Now().Sub(start).Seconds() * lw.rate
					for k := range keys {
						a := float64(adm[k].Load())
						if a > limit+drained+1e-6 {
							t.Fatalf("rep %d: %s admitted %v > limit %v + drained %v", rep, keys[k], a, limit, drained)
						}
						if q := e.Query(keys[k]); q < a-drained-1e-6 {
							t.Fatalf("rep %d: %s reads %v < admitted %v - drained %v", rep, keys[k], q, a, drained)
						}
					}
					den += xDen.Load()
					ph += xPh.Load()
					calls += xCalls.Load()
				}
				t.Logf("x alone: %d denials (loads returned %v; x's entry count just after: %v), %d phantom readings, in %d TryUpdates", den, denLoads, denCands, ph, calls)
				// Spurious denials of x are the documented racing-insert
				// limit (docs/design.md, section 8, "Exact TryUpdate for one
				// key"): the audit saw up to 0.3% of calls with every hook
				// yielding. Phantom readings were the move protocol's
				// residual (a tentative write read across a long move,
				// which this test's jumps past the slack make): 11 and 16
				// in about 7,200 calls in 2 of 13 runs on 2 vCPUs on
				// 2026-12-04, none since the seal (section 8, "Moving a
				// line's time").
				if ph > 0 || den*50 > calls {
					t.Errorf("x, never near its limit: %d spurious denials (bound 2%% of %d), %d phantom readings (bound 0)", den, calls, ph)
				}
			})
		}
	}
}
