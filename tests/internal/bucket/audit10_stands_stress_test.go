package bucket_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/bucket"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a10Law is one law of the stress: its long jump (ms, past the slack)
// and the n of the lone key's requests.
type a10Law struct {
	name      string
	rate, max float64
	jump      time.Duration
}

var a10Laws = []a10Law{
	{"2000x60", 2000, 60, 7 * time.Millisecond}, // slack about 2 ms
	{"1000x60", 1000, 60, 9 * time.Millisecond}, // slack about 4 ms
	{"10x40", 10, 40, 4 * time.Second},          // slack about 369 ms
}

// TestAudit10StandsStress: 8 goroutines on 2 lines, GOMAXPROCS 2 and 8,
// the fake clock advanced by the callers (1 ms every 4th call, a long
// jump past the slack every 300th), on:
//   - a group of 3 colliding keys (same lines and fingerprint: one
//     bucket) and 4 other keys, each TryUpdate(k, 1, limit) near its
//     limit: admitted <= limit + drained, and the final load >=
//     admitted - drained (one-sided);
//   - a lone key (its own fingerprint) asked for a small n whose debt
//     drains faster than the calls come, so it is never near its limit:
//     every denial of it is spurious, and every Query reading far above
//     what it can owe is a phantom. Both are counted and reported.
func TestAudit10StandsStress(t *testing.T) {
	for _, law := range a10Laws {
		for _, procs := range []int{2, 8} {
			t.Run(fmt.Sprintf("%s/P%d", law.name, procs), func(t *testing.T) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				var spurious, phantoms, soloCalls int64
				maxSolo := 0.0
				var denLoads atomic.Value
				denLoads.Store("")
				for rep := range reps(6, 2) {
					clk := sketchtest.NewFakeClock()
					clk.Set(1_000_000)
					e := newTest(t, 2, bucket.Linear(law.rate, law.max), clk)
					group := a8Colliding(t, e, 3, fmt.Sprintf("a10col%d", rep))
					_, _, gfp := e.Locate(group[0])
					var others []string
					var solo string
					for _, k := range distinctKeys(e, 8, fmt.Sprintf("a10o%d", rep)) {
						if _, _, f := e.Locate(k); f == gfp {
							continue
						}
						if solo == "" {
							solo = k
						} else if len(others) < 4 {
							others = append(others, k)
						}
					}
					limit := law.max / 2
					// solo's n: the debt of 1/8 ms, so 8 goroutines
					// with 4 calls per ms owe well under the limit.
					nSolo := law.rate / 1000 / 8
					start := clk.Now()
					var calls, gAdm, sDen, sPh, sCalls atomic.Int64
					oAdm := make([]atomic.Int64, len(others))
					var maxQ atomic.Uint64
					race(8, 1500, func(g, i int) bool {
						c := calls.Add(1)
						if c%300 == 0 {
							clk.Advance(law.jump)
						} else if c%4 == 0 {
							clk.Advance(time.Millisecond)
						}
						switch r := rand.IntN(8); {
						case r < 3:
							if e.TryUpdate(group[rand.IntN(len(group))], 1, limit) {
								gAdm.Add(1)
							}
						case r < 5:
							k := rand.IntN(len(others))
							if e.TryUpdate(others[k], 1, limit) {
								oAdm[k].Add(1)
							}
						case r < 7:
							sCalls.Add(1)
							if ok, q := e.TryUpdateAndQuery(solo, nSolo, limit); !ok {
								sDen.Add(1)
								denLoads.Store(fmt.Sprintf("%s%.3f ", denLoads.Load(), q))
							}
						default:
							q := e.Query(solo)
							for {
								m := maxQ.Load()
								if q <= float64(m)/1e6 || maxQ.CompareAndSwap(m, uint64(q*1e6)) {
									break
								}
							}
							if q > limit/2 {
								sPh.Add(1)
							}
						}
						return false
					})
					drained := clk.Now().Sub(start).Seconds() * law.rate
					if a := float64(gAdm.Load()); a > limit+drained+1e-6 {
						t.Fatalf("rep %d: group admitted %v > limit %v + drained %v", rep, a, limit, drained)
					} else {
						for _, k := range group {
							if q := e.Query(k); q < a-drained-1e-6 {
								t.Fatalf("rep %d: group key %s reads %v < admitted %v - drained %v", rep, k, q, a, drained)
							}
						}
					}
					for k := range others {
						a := float64(oAdm[k].Load())
						if a > limit+drained+1e-6 {
							t.Fatalf("rep %d: %s admitted %v > limit %v + drained %v", rep, others[k], a, limit, drained)
						}
						if q := e.Query(others[k]); q < a-drained-1e-6 {
							t.Fatalf("rep %d: %s reads %v < admitted %v - drained %v", rep, others[k], q, a, drained)
						}
					}
					spurious += sDen.Load()
					phantoms += sPh.Load()
					soloCalls += sCalls.Load()
					maxSolo = max(maxSolo, float64(maxQ.Load())/1e6)
				}
				t.Logf("lone key: %d spurious denials, %d phantom reads (> limit/2), in %d TryUpdates; max reading %.3f (limit %v)", spurious, phantoms, soloCalls, maxSolo, law.max/2)
				if spurious > 0 {
					t.Logf("loads the denials returned: %s", denLoads.Load())
				}
				// Spurious denials are the documented racing-insert limit
				// (docs/design.md, section 8, "Exact TryUpdate for one
				// key"): the audit saw 0 to 3 in 18,000 calls. Phantom
				// reads were the move protocol's residual (1 in about 30
				// runs of 1000x60/P8 until 2026-12-04), removed by the
				// seal ("Moving a line's time").
				if phantoms > 0 || spurious*200 > soloCalls {
					t.Errorf("lone key far below its limit: %d spurious denials (bound 0.5%% of %d), %d phantom reads (bound 0)", spurious, soloCalls, phantoms)
				}
			})
		}
	}
}
