package limit_test

// Adversarial acceptance tests of Limiter.Tier, written against the
// package documentation ("Tiers and changing the limit") as an outside
// user would read it.

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

// TestAdvTierRetryAfterRejectCost: "DecideN ... On a denial RejectCost
// (if any) is debited before RetryAfter is computed, so RetryAfter
// includes the penalty", and "a retry at t+RetryAfter is admitted and
// one 1 ms earlier is not", for exact tiers R/k sharing one key with the
// limiter's own policy, on both engines.
func TestAdvTierRetryAfterRejectCost(t *testing.T) {
	for _, engine := range engines {
		for _, c := range []struct {
			lim    limit.Limit
			k      int
			burst  int
			reject float64
		}{
			{10, 4, 5, 1},
			{limit.Every(3 * time.Millisecond), 7, 3, 0.5},
			{limit.Limit(50) / 3, 2, 9, 2},
			{1000, 10, 40, 1},
		} {
			name := fmt.Sprintf("%v/%v/R÷%d", engine, float64(c.lim), c.k)
			t.Run(name, func(t *testing.T) {
				clk := sketchtest.NewFakeClock()
				clk.Set(1 << 35)
				maxDebt := float64(c.k) * (float64(c.burst) + c.reject)
				l, err := limit.New(c.lim, c.burst, limit.WithClock(clk), limit.WithSeed(5), limit.WithEngine(engine),
					limit.WithMaxDebt(maxDebt), limit.WithRejectCost(c.reject), noAmnesty(engine))
				if err != nil {
					t.Skipf("outside the engine's domain: %v", err)
				}
				tr, err := l.Tier("slow", c.lim/limit.Limit(c.k), c.burst)
				if err != nil {
					t.Fatal(err)
				}
				if !tr.Exact() {
					t.Fatalf("tier R/%d not exact on an exact limiter", c.k)
				}
				deciders := []decider{l, tr}
				for i := range 600 {
					dd := deciders[i%3%2]
					n := 1 + i%2
					d := dd.DecideN(clk.Now(), "k", n)
					if d.Allowed {
						continue
					}
					if d.RetryAfter <= 0 || d.RetryAfter == limit.InfDuration {
						t.Fatalf("step %d: denied with RetryAfter %v", i, d.RetryAfter)
					}
					at := clk.Now()
					clk.SetTime(at.Add(d.RetryAfter - time.Millisecond))
					if p := dd.PeekN(clk.Now(), "k", n); p.Allowed {
						t.Fatalf("step %d: admitted 1 ms before RetryAfter %v", i, d.RetryAfter)
					}
					clk.SetTime(at.Add(d.RetryAfter))
					if p := dd.PeekN(clk.Now(), "k", n); !p.Allowed {
						t.Fatalf("step %d (policy %d, n %d): denied at RetryAfter %v: %+v", i, i%3%2, n, d.RetryAfter, p)
					}
					if i%5 == 0 {
						// and sometimes retry through the other policy first
						// (the key is shared: its debt is the same time)
						deciders[1-i%3%2].DecideN(clk.Now(), "k", 1)
					}
				}
			})
		}
	}
}

// TestAdvTiersConcurrentFrozen: N goroutines hammer one key through the
// limiter's own policy and two tiers, with the clock frozen (no drain):
// strict decisions are "exact under contention", so the outcome must be
// a linearization of the exact shared bucket: the key's final debt is
// the sum of the admitted costs (ResetAfter, in ms), some order admits
// every admission, and every denial is justified by that final debt.
func TestAdvTiersConcurrentFrozen(t *testing.T) {
	for _, procs := range []int{1, 2, 8} {
		for _, engine := range engines {
			t.Run(fmt.Sprintf("P%d/%v", procs, engine), func(t *testing.T) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				for round := range 20 {
					advTiersFrozen(t, engine, round)
				}
			})
		}
	}
}

func advTiersFrozen(t *testing.T, engine limit.Engine, round int) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1 << 33)
	// R = 10/s: a token of R is 100 ms. MaxDebt 80 tokens = 8 s.
	l, err := limit.New(10, 20, limit.WithClock(clk), limit.WithSeed(uint64(round)+1), limit.WithEngine(engine),
		limit.WithMaxDebt(80), noAmnesty(engine))
	if err != nil {
		t.Fatal(err)
	}
	free, err := l.Tier("free", 2.5, 20) // 400 ms a token, 8000 ms burst
	if err != nil {
		t.Fatal(err)
	}
	mid, err := l.Tier("mid", 5, 7) // 200 ms a token, 1400 ms burst
	if err != nil {
		t.Fatal(err)
	}
	type pol struct {
		d      decider
		tokMs  int64
		burstM int64
	}
	pols := []pol{{l, 100, 2000}, {free, 400, 8000}, {mid, 200, 1400}}
	const G, per = 8, 40
	var admitted [3][]int64 // costs of the admissions, per policy
	var denied [3][]int64   // n of the denials
	var mu sync.Mutex
	var wg sync.WaitGroup
	key := fmt.Sprintf("k%d", round)
	for g := range G {
		wg.Go(func() {
			var a [3][]int64
			var d [3][]int64
			for i := range per {
				pi := (g + i) % 3
				n := 1 + (g*7+i)%2
				var ok bool
				switch i % 3 {
				case 0:
					ok = pols[pi].d.AllowN(clk.Now(), key, n)
				default:
					ok = pols[pi].d.DecideN(clk.Now(), key, n).Allowed
				}
				if ok {
					a[pi] = append(a[pi], int64(n)*pols[pi].tokMs)
				} else {
					d[pi] = append(d[pi], int64(n))
				}
			}
			mu.Lock()
			for i := range 3 {
				admitted[i] = append(admitted[i], a[i]...)
				denied[i] = append(denied[i], d[i]...)
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	var sum int64
	type job struct{ cost, thr int64 }
	var jobs []job
	for i, p := range pols {
		for _, c := range admitted[i] {
			sum += c
			jobs = append(jobs, job{c, p.burstM - c})
		}
	}
	reset := debtOf(l, clk.Now(), key)
	if reset != time.Duration(sum)*time.Millisecond {
		t.Fatalf("round %d: ResetAfter %v, sum of admitted costs %d ms", round, reset, sum)
	}
	// Admitting in order of increasing threshold is feasible iff any order is.
	sort.Slice(jobs, func(i, j int) bool { return jobs[i].thr < jobs[j].thr })
	var pre int64
	for _, j := range jobs {
		if pre > j.thr {
			t.Fatalf("round %d: no order admits all %d admissions (debt %d ms before one of cost %d, threshold %d)", round, len(jobs), pre, j.cost, j.thr)
		}
		pre += j.cost
	}
	for i, p := range pols {
		for _, n := range denied[i] {
			if sum+n*p.tokMs <= p.burstM {
				t.Fatalf("round %d: policy %d denied n=%d although the final debt %d ms leaves room (burst %d ms)", round, i, n, sum, p.burstM)
			}
		}
	}
}
