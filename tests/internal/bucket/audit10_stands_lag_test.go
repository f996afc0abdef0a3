package bucket_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/bucket"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit10StandsLaggingTimes: operations passed times t (TryUpdateAt,
// UpdateAt, QueryAt) from a shared counter, each taken then lagged by a
// random 0..3 ms or, one in 50, a jump past the slack, so that writes of
// later times keep landing between other writers' reads and CASes (the
// time conflicts whose writes now stand). 8 goroutines, 2 lines,
// GOMAXPROCS 2 and 8. A group of 3 colliding keys and 3 other keys near
// their limits: each key (group) admits at most limit + rate x (the
// span of times used), and reads at the end at least admitted - rate x
// that span (one-sided: every t is inside the span).
func TestAudit10StandsLaggingTimes(t *testing.T) {
	for _, law := range a10Laws {
		for _, procs := range []int{2, 8} {
			t.Run(fmt.Sprintf("%s/P%d", law.name, procs), func(t *testing.T) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				for rep := range reps(6, 2) {
					clk := sketchtest.NewFakeClock()
					const t0ms = 1_000_000
					clk.Set(t0ms)
					e := newTest(t, 2, bucket.Linear(law.rate, law.max), clk)
					clk.Advance(1000 * time.Hour)
					group := a8Colliding(t, e, 3, fmt.Sprintf("a10lag%d", rep))
					_, _, gfp := e.Locate(group[0])
					var others []string
					for _, k := range distinctKeys(e, 6, fmt.Sprintf("a10lo%d", rep)) {
						if _, _, f := e.Locate(k); f != gfp && len(others) < 3 {
							others = append(others, k)
						}
					}
					limit := law.max / 2
					var ctr, maxMs atomic.Int64
					jumpMs := law.jump.Milliseconds()
					var gAdm atomic.Int64
					gMs := make([][]int64, 8) // effective ms (Reserved) of the group's admissions, per goroutine
					oAdm := make([]atomic.Int64, len(others))
					race(8, 1200, func(g, i int) bool {
						ms := ctr.Add(1) / 3
						if rand.IntN(50) == 0 {
							ms = ctr.Add(3*jumpMs) / 3
						}
						for {
							m := maxMs.Load()
							if ms <= m || maxMs.CompareAndSwap(m, ms) {
								break
							}
						}
						if l := int64(rand.IntN(4)); ms > l {
							ms -= l
						}
						at := time.UnixMilli(t0ms + 1 + ms)
						switch r := rand.IntN(4); {
						case r < 2:
							if rc, ok := e.TryReserveAt(at, group[rand.IntN(len(group))], 1, limit); ok {
								gAdm.Add(1)
								ms, _ := e.Reserved(&rc)
								gMs[g] = append(gMs[g], ms)
							}
						case r < 3:
							k := rand.IntN(len(others))
							if e.TryUpdateAt(at, others[k], 1, limit) {
								oAdm[k].Add(1)
							}
						default:
							e.QueryAt(at, others[rand.IntN(len(others))])
						}
						return false
					})
					span := float64(maxMs.Load()+1) / 1000 * law.rate
					end := time.UnixMilli(t0ms + 1 + maxMs.Load())
					a := float64(gAdm.Load())
					if a > limit+span+1e-6 {
						t.Fatalf("rep %d: group admitted %v > limit %v + drained %v", rep, a, limit, span)
					}
					for _, k := range group {
						if q := e.QueryAt(end, k); q < a-span-1e-6 {
							t.Fatalf("rep %d: %s reads %v < admitted %v - drained %v", rep, k, q, a, span)
						}
					}
					// Every window of the admissions' own times [a, b] holds
					// at most limit + rate x (b - a) tokens (one ms of
					// rounding allowed).
					var all []int64
					for _, v := range gMs {
						all = append(all, v...)
					}
					slices.Sort(all)
					for j := range all {
						for i := j; i >= 0; i-- {
							cnt := float64(j - i + 1)
							if bound := limit + law.rate*float64(all[j]-all[i]+1)/1000; cnt > bound+1e-9 {
								t.Fatalf("rep %d: group admitted %v tokens at times in [%d, %d] ms, bound %v", rep, cnt, all[i]-all[0], all[j]-all[0], bound)
							}
						}
					}
					for k := range others {
						a := float64(oAdm[k].Load())
						if a > limit+span+1e-6 {
							t.Fatalf("rep %d: %s admitted %v > limit %v + %v", rep, others[k], a, limit, span)
						}
						if q := e.QueryAt(end, others[k]); q < a-span-1e-6 {
							t.Fatalf("rep %d: %s reads %v < admitted %v - %v", rep, others[k], q, a, span)
						}
					}
				}
			})
		}
	}
}
