package limit_test

import (
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// At a frozen clock, goroutines race DecideN on one key under the
// limiter's policy (while another flips SetLimit between 10/s and 5/s
// and SetBurst between 20 and 12) and under a Tier of 2.5/s. Promises:
// "a decision racing them uses the old policy or the new one, never a
// mix" (doc.go), so every admitted Decision's Remaining is its own
// policy's floor(Burst - debt/cost) for the ResetAfter it reports; and
// the durations "are exact for a key alone in its cells" with strict
// decisions exact under contention, an admission's debt being "what the
// take itself left (nU and every earlier take, none of a later one)"
// (engine.go, tryAndQueryAt), so the admitted decisions' ResetAfters,
// sorted, form a serial chain: each is the previous plus the request's
// own cost (1000/Limit ms a token), from 0. Both engines.
func TestAudit78RacingSetLimitDecisionsChain(t *testing.T) {
	for _, e := range []limit.Engine{limit.Buckets, limit.CountMin} {
		t.Run(e.String(), func(t *testing.T) {
			sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
				for rep := range 10 {
					clk := limittest.NewFakeClock()
					clk.Set(a78Start)
					l := limit.MustNew(10, 20, a78Opts(clk, e, uint64(rep), limit.WithMaxDebt(80))...)
					tr, err := l.Tier("slow", 2.5, 10)
					if err != nil {
						t.Fatal(err)
					}
					now := clk.Now()
					key := fmt.Sprintf("r%d", rep)
					var mu sync.Mutex
					var got []limit.Decision
					var ns []int
					stop := make(chan struct{})
					var flip sync.WaitGroup
					flip.Add(1)
					go func() {
						defer flip.Done()
						for i := 0; ; i++ {
							select {
							case <-stop:
								return
							default:
							}
							if i%2 == 0 {
								_ = l.SetLimit([]limit.Limit{10, 5}[i/2%2])
							} else {
								_ = l.SetBurst([]int{20, 12}[i/2%2])
							}
						}
					}()
					var wg sync.WaitGroup
					for g := range 4 {
						wg.Add(1)
						go func() {
							defer wg.Done()
							for i := range 12 {
								n := 1 + (g+i)%3
								var d limit.Decision
								if (g+i)%4 == 0 {
									d = tr.DecideN(now, key, n)
								} else {
									d = l.DecideN(now, key, n)
								}
								if d.Allowed {
									mu.Lock()
									got, ns = append(got, d), append(ns, n)
									mu.Unlock()
								}
							}
						}()
					}
					wg.Wait()
					close(stop)
					flip.Wait()
					idx := make([]int, len(got))
					for i := range idx {
						idx[i] = i
					}
					sort.Slice(idx, func(a, b int) bool { return got[idx[a]].ResetAfter < got[idx[b]].ResetAfter })
					prev := time.Duration(0)
					for _, i := range idx {
						d := got[i]
						costMs := float64(ns[i]) * 1000 / float64(d.Limit)
						if want := prev + time.Duration(costMs)*time.Millisecond; d.ResetAfter != want {
							t.Fatalf("rep %d: admitted n=%d under %v/s b%d reports ResetAfter %v; the serial chain wants %v (previous %v)", rep, ns[i], float64(d.Limit), d.Burst, d.ResetAfter, want, prev)
						}
						prev = d.ResetAfter
						c := 1000 / float64(d.Limit)
						wantRem := int((float64(d.Burst)*c - float64(d.ResetAfter/time.Millisecond)) / c)
						if wantRem < 0 {
							wantRem = 0
						}
						if d.Remaining != wantRem {
							t.Fatalf("rep %d: admitted n=%d under %v/s b%d, ResetAfter %v: Remaining %d; its policy wants %d (a mix of policies?)", rep, ns[i], float64(d.Limit), d.Burst, d.ResetAfter, d.Remaining, wantRem)
						}
					}
				}
			})
		})
	}
}
