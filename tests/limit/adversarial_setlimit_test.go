package limit_test

// Adversarial acceptance tests of SetLimit and SetBurst against the
// package documentation: "SetLimit and SetBurst replace the Limiter's
// own policy whole (one pointer: a decision racing them uses the old
// policy or the new one, never a mix)"; "A key in debt keeps its debt as
// time: after SetLimit it still drains what it owes in the same time
// (ResetAfter), and pays the new cost for new requests against the burst
// in the new tokens".

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAdvSetLimitRaceNoMix: goroutines decide on keys of their own while
// another flips SetLimit between 10/s and 5/s and SetBurst between 20 and
// 7, with the clock frozen. Each Decision names its policy (Limit,
// Burst); every other field must be that policy's exact bucket's for the
// key's debt, which the goroutine alone knows (in ms: 100 or 200 a
// token). A mix (the new limit with the old burst's Remaining, a cost of
// one and a cap of the other) shows as a mismatch.
func TestAdvSetLimitRaceNoMix(t *testing.T) {
	for _, procs := range []int{1, 2, 8} {
		for _, engine := range engines {
			t.Run(fmt.Sprintf("P%d/%v", procs, engine), func(t *testing.T) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				clk := sketchtest.NewFakeClock()
				clk.Set(1 << 34)
				l, err := limit.New(10, 20, limit.WithClock(clk), limit.WithSeed(11), limit.WithEngine(engine),
					limit.WithMaxDebt(80), noAmnesty(engine))
				if err != nil {
					t.Fatal(err)
				}
				var stop atomic.Bool
				var flips sync.WaitGroup
				flipping := make(chan struct{})
				started := sync.OnceFunc(func() { close(flipping) })
				flips.Go(func() {
					defer started() // even when a setter fails
					for i := 0; !stop.Load(); i++ {
						if i == 6 {
							started()
						}
						var err error
						if i%2 == 0 {
							err = l.SetLimit([]limit.Limit{10, 5}[i/2%2])
						} else {
							err = l.SetBurst([]int{20, 7}[i/2%2])
						}
						if err != nil {
							t.Error(err)
							return
						}
						runtime.Gosched()
					}
				})
				var wg sync.WaitGroup
				seen := make([]map[[2]int]int, 4)
				for g := range 4 {
					seen[g] = map[[2]int]int{}
					wg.Go(func() {
						<-flipping
						var debt int64 // ms, of the current key
						key := 0
						// 3000 steps, and on until this worker has itself
						// decided under 3 policies, at most 2^20 steps. (Counting
						// the flipper's changes instead let a worker whose
						// thread was off the CPU while all of them ran exit
						// having seen one: the test's one flake, audit 38.)
						for i := 0; (i < 3000 || len(seen[g]) < 3) && i < 1<<20; i++ {
							if i%16 == 0 {
								runtime.Gosched() // let the flipper run at GOMAXPROCS 1
							}
							k := fmt.Sprintf("g%d-%d", g, key)
							n := 1 + i%2
							d := l.DecideN(clk.Now(), k, n)
							seen[g][[2]int{int(d.Limit), d.Burst}]++
							if msg := checkPolicyDecision(d, debt, n); msg != "" {
								t.Errorf("g%d step %d key %s debt %d ms: %s: %+v", g, i, k, debt, msg, d)
								return
							}
							if d.Allowed {
								debt += int64(n) * int64(1000/d.Limit)
							} else if i%5 == 0 && key < 200 {
								// At most 200 keys: with the clock frozen every
								// key left keeps its debt, and a long run's
								// fresh key could meet one's fingerprint (a
								// collision the docs allow, which the check
								// would call a mix).
								key, debt = key+1, 0
							}
						}
					})
				}
				wg.Wait()
				stop.Store(true)
				flips.Wait()
				pairs := map[[2]int]bool{}
				for _, s := range seen {
					for p := range s {
						pairs[p] = true
					}
				}
				if len(pairs) < 3 {
					t.Fatalf("only policies %v seen: the race was not exercised", pairs)
				}
			})
		}
	}
}

// checkPolicyDecision checks d against the exact bucket of its own
// (Limit, Burst), for a debt of debt ms before the request, on a frozen
// clock; "" if it matches.
func checkPolicyDecision(d limit.Decision, debt int64, n int) string {
	if d.Limit != 10 && d.Limit != 5 || d.Burst != 20 && d.Burst != 7 {
		return "a policy never set"
	}
	tok := int64(1000 / d.Limit)
	capMs := int64(d.Burst) * tok
	cost := int64(n) * tok
	ms := func(x int64) time.Duration { return time.Duration(x) * time.Millisecond }
	fits := debt+cost <= capMs
	if d.Allowed != fits {
		return fmt.Sprintf("Allowed %v, the policy's bucket says %v", d.Allowed, fits)
	}
	after := debt
	if fits {
		after += cost
	} else if want := ms(debt + cost - capMs); d.RetryAfter != want {
		return fmt.Sprintf("RetryAfter %v, want %v", d.RetryAfter, want)
	}
	if d.ResetAfter != ms(after) {
		return fmt.Sprintf("ResetAfter %v, want %v", d.ResetAfter, ms(after))
	}
	rem := max((capMs-after)/tok, 0)
	if int64(d.Remaining) != rem {
		return fmt.Sprintf("Remaining %d, want %d", d.Remaining, rem)
	}
	var next int64
	if after > 0 {
		next = max(after+(rem+1)*tok-capMs, 0)
	}
	if d.NextAfter != ms(next) {
		return fmt.Sprintf("NextAfter %v, want %v", d.NextAfter, ms(next))
	}
	return ""
}

// TestAdvSetLimitTimeToDrain: on a fake clock, a key in debt keeps its
// debt as time across SetLimit (ResetAfter unchanged), new requests cost
// the new limit's token against the burst in new tokens, and RetryAfter
// is exact (a retry at t+RetryAfter admitted, 1 ms earlier not), for
// slower and faster limits; SetBurst down then up leaves the debt alone.
func TestAdvSetLimitTimeToDrain(t *testing.T) {
	for _, engine := range engines {
		t.Run(engine.String(), func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			clk.Set(1 << 36)
			// 20/s: 50 ms a token; MaxDebt 200 tokens = 10 s.
			l, err := limit.New(20, 40, limit.WithClock(clk), limit.WithSeed(2), limit.WithEngine(engine),
				limit.WithMaxDebt(200), noAmnesty(engine))
			if err != nil {
				t.Fatal(err)
			}
			m := &timeBucket{debt: new(big.Rat), at: clk.NowMillis()}
			cur := newPolicy(big.NewRat(20, 1), 40)
			for range 30 {
				if !l.Allow("k") {
					t.Fatal("burst denied")
				}
				m.add(cur, 1)
			}
			before := debtOf(l, clk.Now(), "k") // 1500 ms
			steps := []struct {
				lim   limit.Limit
				r     *big.Rat
				burst int
			}{
				{5, big.NewRat(5, 1), 40},    // slower: 200 ms a token, burst 8 s
				{40, big.NewRat(40, 1), 40},  // faster: 25 ms a token, burst 1 s
				{20, big.NewRat(20, 1), 1},   // SetBurst down: 50 ms cap
				{20, big.NewRat(20, 1), 200}, // and up to MaxDebt: 10 s
				{4, big.NewRat(4, 1), 40},    // 250 ms a token, 10 s burst = MaxDebt
			}
			for i, s := range steps {
				if s.lim != l.Limit() {
					if err := l.SetBurst(1); err != nil {
						t.Fatal(err)
					}
				}
				if err := l.SetLimit(s.lim); err != nil {
					t.Fatalf("step %d SetLimit(%v): %v", i, float64(s.lim), err)
				}
				if err := l.SetBurst(s.burst); err != nil {
					t.Fatalf("step %d SetBurst(%d): %v", i, s.burst, err)
				}
				if l.Limit() != s.lim || l.Burst() != s.burst || !l.Exact() {
					t.Fatalf("step %d: Limit %v Burst %d Exact %v", i, float64(l.Limit()), l.Burst(), l.Exact())
				}
				m.advance(clk.NowMillis())
				if got := debtOf(l, clk.Now(), "k"); i == 0 && got != before {
					t.Fatalf("SetLimit changed ResetAfter %v -> %v: the debt must be kept as time", before, got)
				}
				cur = newPolicy(s.r, s.burst)
				for j := range 60 {
					m.advance(clk.NowMillis())
					n := 1 + j%3%s.burst
					d := l.DecideN(clk.Now(), "k", n)
					want := m.fits(cur, n)
					if d.Allowed != want {
						t.Fatalf("step %d/%d: Allowed %v, time bucket %v (debt %v ms)", i, j, d.Allowed, want, m.debt.FloatString(3))
					}
					if want {
						m.add(cur, n)
					}
					if !want {
						if w := time.Duration(m.retryAfter(cur, n)) * time.Millisecond; d.RetryAfter != w {
							t.Fatalf("step %d/%d: RetryAfter %v, time bucket %v", i, j, d.RetryAfter, w)
						}
						if w := time.Duration(m.msUntil(new(big.Rat))) * time.Millisecond; d.ResetAfter != w {
							t.Fatalf("step %d/%d: ResetAfter %v, time bucket %v", i, j, d.ResetAfter, w)
						}
						at := clk.Now()
						clk.SetTime(at.Add(d.RetryAfter - time.Millisecond))
						if l.PeekN(clk.Now(), "k", n).Allowed {
							t.Fatalf("step %d/%d: admitted 1 ms before RetryAfter %v", i, j, d.RetryAfter)
						}
						clk.SetTime(at.Add(d.RetryAfter))
						if !l.PeekN(clk.Now(), "k", n).Allowed {
							t.Fatalf("step %d/%d: denied at RetryAfter %v", i, j, d.RetryAfter)
						}
					}
					clk.Advance(time.Duration(j%4) * 7 * time.Millisecond)
				}
			}
		})
	}
}

// TestAdvSetLimitRefused: every refused SetLimit and SetBurst changes
// nothing (Limit, Burst, Policies, decisions), with the documented error
// types: *sketch.ConfigError for bad values, *MaxDebtError (naming the
// MaxDebt needed) for a burst that does not fit.
func TestAdvSetLimitRefused(t *testing.T) {
	for _, engine := range engines {
		t.Run(engine.String(), func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			l, err := limit.New(10, 20, limit.WithClock(clk), limit.WithSeed(2), limit.WithEngine(engine), limit.WithName("n"))
			if err != nil {
				t.Fatal(err)
			}
			for range 5 {
				l.Allow("k")
			}
			want := l.Peek("k")
			wantPol := l.Policies()
			for _, bad := range []limit.Limit{0, -1, limit.Limit(math.NaN()), limit.Inf, limit.Limit(math.Inf(1)), 1e23} {
				err := l.SetLimit(bad)
				var ce *sketch.ConfigError
				if !errors.As(err, &ce) || !errors.Is(err, sketch.ErrInvalidConfig) {
					t.Errorf("SetLimit(%v): %v, want a *sketch.ConfigError", float64(bad), err)
				}
			}
			for _, bad := range []int{0, -1, 1<<24 + 1} {
				err := l.SetBurst(bad)
				var ce *sketch.ConfigError
				if !errors.As(err, &ce) {
					t.Errorf("SetBurst(%d): %v, want a *sketch.ConfigError", bad, err)
				}
			}
			// MaxDebt is 40 tokens: burst 41 does not fit; nor does 20 at 10/3 (60 tokens of R).
			var mde *limit.MaxDebtError
			if err := l.SetBurst(41); !errors.As(err, &mde) || mde.Need < 41 || mde.Have != 40 {
				t.Errorf("SetBurst(41): %v", err)
			}
			if err := l.SetLimit(limit.Limit(10) / 3); !errors.As(err, &mde) || mde.Need < 60 || mde.Burst != 20 {
				t.Errorf("SetLimit(10/3): %v", err)
			}
			if got := l.Peek("k"); got != want {
				t.Errorf("after refused calls Peek %+v, want %+v", got, want)
			}
			if got := l.Policies(); len(got) != 1 || got[0] != wantPol[0] {
				t.Errorf("Policies %v, want %v", got, wantPol)
			}
			// SetBurst down so that 10/3 fits, then back: both succeed.
			if err := l.SetBurst(13); err != nil {
				t.Fatal(err)
			}
			if err := l.SetLimit(limit.Limit(10) / 3); err != nil {
				t.Fatalf("SetLimit(10/3) with burst 13 (39 tokens of R <= 40): %v", err)
			}
			if err := l.SetBurst(20); !errors.As(err, &mde) {
				t.Errorf("SetBurst(20) at 10/3: %v, want *MaxDebtError", err)
			}
		})
	}
}

// debtOf returns key's debt as time to drain: the ResetAfter of a PeekN
// above the burst, which is never admitted and so adds nothing.
func debtOf(l *limit.Limiter, t time.Time, key string) time.Duration {
	return l.PeekN(t, key, l.Burst()+1).ResetAfter
}
