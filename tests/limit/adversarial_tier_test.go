package limit_test

// Adversarial acceptance tests of Limiter.Tier, written against the
// package documentation ("Tiers and changing the limit") as an outside
// user would read it.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
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
				// A RejectCost off the engine's grid (half a token of an odd
				// number of ticks: Every(3ms) on Buckets) makes neither
				// exact (WithRejectCost); the predictions below hold anyway.
				if l.Exact() && !tr.Exact() {
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

// TestAdvTierReserveWait: a Tier's reservations queue up to the
// limiter's MaxDebt ("Reservations of any policy queue up to the
// limiter's MaxDebt"; Tier.MaxDebt is it in the tier's tokens), each
// with the exact delay of the tier's bucket, and its WaitN waits on the
// limiter's fake clock for exactly that delay.
func TestAdvTierReserveWait(t *testing.T) {
	for _, engine := range engines {
		t.Run(engine.String(), func(t *testing.T) {
			clk := limittest.NewFakeClock()
			clk.SetTime(time.Now().Add(time.Hour)) // real contexts' deadlines stay ahead
			// 10/s, MaxDebt 80 tokens = 8 s; the tier 2.5/s (400 ms), burst 5 (2 s).
			l, err := limit.New(10, 20, limit.WithClock(clk), limit.WithEngine(engine), limit.WithMaxDebt(80), noAmnesty(engine))
			if err != nil {
				t.Fatal(err)
			}
			tr, err := l.Tier("slow", 2.5, 5)
			if err != nil {
				t.Fatal(err)
			}
			if tr.MaxDebt() != 20 {
				t.Fatalf("Tier.MaxDebt %v, want 20 tier tokens (8 s)", tr.MaxDebt())
			}
			for i := range 20 {
				r := tr.ReserveN(clk.Now(), "k", 1)
				want := time.Duration(max(i+1-5, 0)) * 400 * time.Millisecond
				if !r.OK() || r.Delay() != want {
					t.Fatalf("reservation %d: OK %v Delay %v, want %v", i+1, r.OK(), r.Delay(), want)
				}
			}
			if r := tr.ReserveN(clk.Now(), "k", 1); r.OK() {
				t.Fatalf("reservation 21 past MaxDebt OK, Delay %v", r.Delay())
			}
			if err := tr.WaitN(context.Background(), "k", 1); !errors.Is(err, limit.ErrMaxDebt) {
				t.Fatalf("WaitN past MaxDebt: %v", err)
			}
			// The base policy sees the same debt as time: 8 s, its burst 2 s.
			if d := l.PeekN(clk.Now(), "k", 1); d.Allowed || d.RetryAfter != 6100*time.Millisecond {
				t.Fatalf("base policy on the shared key: %+v, want RetryAfter 6.1s", d)
			}
			// WaitN on a fresh key past the burst waits 400 ms of the fake clock.
			for range 5 {
				if err := tr.Wait(context.Background(), "w"); err != nil {
					t.Fatal(err)
				}
			}
			done := make(chan error, 1)
			go func() { done <- tr.Wait(context.Background(), "w") }()
			clk.BlockUntilTimers(1)
			clk.Advance(399 * time.Millisecond)
			select {
			case err := <-done:
				t.Fatalf("Wait returned %v 1 ms early", err)
			case <-time.After(20 * time.Millisecond):
			}
			clk.Advance(time.Millisecond)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestAdvTierUnchangedBySetLimit: "Tiers are not changed by them": a
// tier's decisions (Limit, Burst, costs, durations) are the same before
// and after SetLimit/SetBurst on its limiter.
func TestAdvTierUnchangedBySetLimit(t *testing.T) {
	for _, engine := range engines {
		mk := func(set bool) []limit.Decision {
			clk := sketchtest.NewFakeClock()
			l, err := limit.New(10, 20, limit.WithClock(clk), limit.WithEngine(engine), limit.WithMaxDebt(80), limit.WithSeed(4), noAmnesty(engine))
			if err != nil {
				t.Fatal(err)
			}
			tr, err := l.Tier("t", 5, 8)
			if err != nil {
				t.Fatal(err)
			}
			if set {
				if err := l.SetBurst(3); err != nil {
					t.Fatal(err)
				}
				if err := l.SetLimit(2); err != nil {
					t.Fatal(err)
				}
			}
			var out []limit.Decision
			for i := range 100 {
				out = append(out, tr.DecideN(clk.Now(), "k", 1+i%3))
				clk.Advance(time.Duration(i%7) * 31 * time.Millisecond)
			}
			return out
		}
		a, b := mk(false), mk(true)
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("%v decision %d: %+v after SetLimit, %+v before", engine, i, b[i], a[i])
			}
		}
	}
}

// TestAdvRestoreAfterSetLimit: the snapshot of a limiter whose policy
// SetLimit changed restores into a limiter freshly built by New with the
// original configuration ("The burst, RejectCost, ... are configuration,
// not state"; SetLimit leaves the base units), and its tiers decide
// there as on the saved one.
func TestAdvRestoreAfterSetLimit(t *testing.T) {
	for _, e := range advEngines {
		t.Run(e.name, func(t *testing.T) {
			clk := limittest.NewFakeClock()
			clk.Set(1_700_000_000_000)
			a := advNew(t, clk, e.opts)
			if err := a.SetLimit(5); err != nil {
				t.Fatal(err)
			}
			ta, _ := a.Tier("t", 2, 10)
			for i := range 300 {
				k := fmt.Sprintf("k%d", i%17)
				if i%2 == 0 {
					a.Allow(k)
				} else {
					ta.Allow(k)
				}
				clk.Advance(time.Duration(i%5) * time.Millisecond)
			}
			snap := limiterSnap(t, a)
			clk2 := limittest.NewFakeClock()
			clk2.Set(clk.NowMillis())
			b := advNew(t, clk2, e.opts)
			if _, err := b.ReadFrom(bytes.NewReader(snap)); err != nil {
				t.Fatalf("restore of a SetLimit'd limiter into New's configuration: %v", err)
			}
			tb, _ := b.Tier("t", 2, 10)
			for i := range 300 {
				k := fmt.Sprintf("k%d", i%17)
				if da, db := ta.DecideN(clk.Now(), k, 1), tb.DecideN(clk2.Now(), k, 1); da != db {
					t.Fatalf("call %d: restored tier %+v, saved tier %+v", i, db, da)
				}
				clk.Advance(7 * time.Millisecond)
				clk2.Advance(7 * time.Millisecond)
			}
		})
	}
}
