package limit_test

// Audit 38: Multi against a rational oracle (distinct keys per window,
// RetryAfter exact and the maximum over the denying windows, probes at
// t+RetryAfter and 1 ms before it, all-or-nothing with nothing left
// behind by a denial), and under concurrency.

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a38win is the exact token bucket of one window, debt in seconds (Rat),
// per key, as of the ms at.
type a38win struct {
	r     *big.Rat // tokens per second
	burst int64
	debt  map[string]*big.Rat
	at    map[string]int64
}

func newA38Win(r *big.Rat, burst int64) *a38win {
	return &a38win{r: r, burst: burst, debt: map[string]*big.Rat{}, at: map[string]int64{}}
}

// cur returns key's debt (seconds) at ms now.
func (w *a38win) cur(key string, now int64) *big.Rat {
	d, ok := w.debt[key]
	if !ok {
		return new(big.Rat)
	}
	el := big.NewRat(now-w.at[key], 1000)
	x := new(big.Rat).Sub(d, el)
	if x.Sign() < 0 {
		x.SetInt64(0)
	}
	return x
}

func (w *a38win) cost(n int64) *big.Rat { return new(big.Rat).Quo(big.NewRat(n, 1), w.r) }
func (w *a38win) capS() *big.Rat        { return w.cost(w.burst) }

// fitsAfter: n fits after x more ms from now.
func (w *a38win) fitsAfter(key string, now, x, n int64) bool {
	d := w.cur(key, now+x)
	d.Add(d, w.cost(n))
	return d.Cmp(w.capS()) <= 0
}

// retry is the least whole x >= 0 ms after which n fits (n <= burst).
func (w *a38win) retry(key string, now, n int64) int64 {
	// Upper bound: the whole debt drained.
	hi := int64(0)
	for !w.fitsAfter(key, now, hi, n) {
		if hi == 0 {
			hi = 1
		} else {
			hi *= 2
		}
	}
	lo := int64(-1) // !fits at lo (or lo = -1)
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if w.fitsAfter(key, now, mid, n) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

func (w *a38win) take(key string, now, n int64) {
	d := w.cur(key, now)
	w.debt[key] = d.Add(d, w.cost(n))
	w.at[key] = now
}

// rem returns the window's Remaining for key at now: floor(burst - debt x r), >= 0.
func (w *a38win) rem(key string, now int64) int64 {
	x := new(big.Rat).Mul(w.cur(key, now), w.r)
	x.Sub(big.NewRat(w.burst, 1), x)
	if x.Sign() <= 0 {
		return 0
	}
	return new(big.Int).Quo(x.Num(), x.Denom()).Int64()
}

// reset returns the ms until key's debt is 0, rounded up.
func (w *a38win) reset(key string, now int64) int64 {
	d := new(big.Rat).Mul(w.cur(key, now), big.NewRat(1000, 1))
	q := new(big.Int).Quo(d.Num(), d.Denom()).Int64()
	if new(big.Rat).SetInt64(q).Cmp(d) < 0 {
		q++
	}
	return q
}

// next returns the least whole ms after which Remaining grows (0 for a
// zero debt).
func (w *a38win) next(key string, now int64) int64 {
	if w.cur(key, now).Sign() == 0 {
		return 0
	}
	r0 := w.rem(key, now)
	hi := int64(1)
	for w.rem(key, now+hi) <= r0 {
		hi *= 2
	}
	lo := int64(0) // rem(lo) <= r0
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if w.rem(key, now+mid) > r0 {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

type a38spec struct {
	r     *big.Rat
	lim   limit.Limit
	burst int
}

// TestAudit38MultiOracle: three windows of different exact rates, keys
// per window drawn from small sets (so that windows disagree), random n
// and time steps on one fake clock; every Multi decision must be the
// conjunction of the windows' exact buckets, a denial must take nothing
// from any window (each window's Tokens equal its oracle after it), and
// RetryAfter must be the maximum over the windows of each one's exact
// retry (at least 1 ms). Probes: every window admits at t+RetryAfter and
// at least one denies at t+RetryAfter-1ms (PeekN), and sometimes the
// Multi itself is asked again at exactly t+RetryAfter and must admit.
func TestAudit38MultiOracle(t *testing.T) {
	testsize.Serial(t)
	specs := [][]a38spec{
		{{big.NewRat(10, 1), 10, 20}, {big.NewRat(2, 1), 2, 5}, {big.NewRat(1, 2), limit.Every(2 * time.Second), 3}},
		{{big.NewRat(50, 1), 50, 7}, {big.NewRat(4, 1), 4, 9}, {big.NewRat(5, 2), 2.5, 4}},
		{{big.NewRat(1000, 3), limit.Every(3 * time.Millisecond), 30}, {big.NewRat(20, 1), 20, 3}, {big.NewRat(8, 1), 8, 16}},
	}
	for si, spec := range specs {
		if !testsize.Keep(si, testsize.Sample(1, 2, 4)) {
			continue
		}
		for _, eng := range engines {
			for _, reject := range []int64{0, 1} {
				t.Run(fmt.Sprintf("spec%d/%v/reject%d", si, eng, reject), func(t *testing.T) {
					clk := sketchtest.NewFakeClock()
					now := int64(1 << 36)
					clk.Set(now)
					var ls []*limit.Limiter
					var ws []*a38win
					for i, s := range spec {
						l, err := limit.New(s.lim, s.burst, limit.WithClock(clk), limit.WithSeed(uint64(7+i)),
							limit.WithEngine(eng), limit.WithName(fmt.Sprintf("w%d", i)), noAmnesty(eng), limit.WithRejectCost(float64(reject)))
						if err != nil {
							t.Fatal(err)
						}
						ls = append(ls, l)
						ws = append(ws, newA38Win(s.r, int64(s.burst)))
					}
					m, err := limit.NewMulti(ls...)
					if err != nil {
						t.Fatal(err)
					}
					rng := rand.New(rand.NewPCG(uint64(si), 38))
					var adm, den, probes int
					lastAdv := int64(1)
					lags := 0
					check := func(step int, keys []string) {
						t.Helper()
						for i, w := range ws {
							want, _ := new(big.Rat).Sub(w.capS(), w.cur(keys[i], now)).Mul(new(big.Rat).Sub(w.capS(), w.cur(keys[i], now)), w.r).Float64()
							if got := ls[i].TokensAt(clk.Now(), keys[i]); got-want > 1e-6 || want-got > 1e-6 {
								t.Fatalf("step %d window %d key %s: Tokens %v, oracle %v (a denial must take nothing: multi.go \"a denial by any window gives back what the windows before it took\")", step, i, keys[i], got, want)
							}
						}
					}
					for step := range 700 {
						keys := []string{fmt.Sprintf("a%d", rng.IntN(3)), fmt.Sprintf("b%d", rng.IntN(2)), fmt.Sprintf("c%d", rng.IntN(2))}
						n := 1 + rng.IntN(3)
						if rng.IntN(40) == 0 {
							n = 10 // above some bursts: Never
						}
						// Sometimes a stale t, up to 120 ms before the time the
						// limiter decides at (now): every duration counts from
						// it, the lag included (doc.go "Keys and time").
						var lag int64
						// Only when the clock has not moved since the last
						// reads at now (check's TokensAt): then the limiter
						// decides at now, not at the stale t.
						if rng.IntN(5) == 0 && step > 0 && lastAdv == 0 {
							lag = int64(1 + rng.IntN(120))
							lags++
						}
						d := m.DecideKeys(clk.Now().Add(-time.Duration(lag)*time.Millisecond), n, keys...)
						gapped := func(x int64) time.Duration {
							if x == 0 {
								return 0
							}
							return time.Duration(x+lag) * time.Millisecond
						}
						never := false
						fits := true
						var ra int64
						for i, w := range ws {
							if int64(n) > w.burst {
								never = true
								continue
							}
							x := w.retry(keys[i], now, int64(n))
							if x > 0 {
								fits = false
							}
							ra = max(ra, x)
						}
						if never {
							fits = false
						}
						if !fits && reject > 0 {
							// The first window in order that denies (on its
							// read, or Never) charges its RejectCost, up to
							// MaxDebt (2 x burst).
							for i, w := range ws {
								if int64(n) > w.burst || w.retry(keys[i], now, int64(n)) > 0 {
									w.take(keys[i], now, reject)
									if mx := w.cost(2 * w.burst); w.debt[keys[i]].Cmp(mx) > 0 {
										w.debt[keys[i]] = mx
									}
									break
								}
							}
							ra = 0
							for i, w := range ws {
								if int64(n) <= w.burst {
									ra = max(ra, w.retry(keys[i], now, int64(n)))
								}
							}
							ra = max(ra, 1)
						}
						if d.Allowed != fits {
							t.Fatalf("step %d keys %v n %d: Allowed %v, oracle %v: %+v", step, keys, n, d.Allowed, fits, d)
						}
						if fits {
							adm++
							for i, w := range ws {
								w.take(keys[i], now, int64(n))
							}
						} else {
							den++
							if never {
								if !d.Never || d.RetryAfter != limit.InfDuration {
									t.Fatalf("step %d n %d: want Never, got %+v", step, n, d)
								}
							} else if d.RetryAfter != gapped(ra) {
								t.Fatalf("step %d keys %v n %d lag %d ms: RetryAfter %v, oracle max over windows %d ms + lag (multi.go: \"a retry at t+RetryAfter is admitted by all of them ... and one 1 ms earlier is not\"): %+v", step, keys, n, lag, d.RetryAfter, ra, d)
							}
						}
						check(step, keys)
						if !never {
							// Remaining the least; ResetAfter the latest; NextAfter
							// the latest next token among the windows holding the
							// least; Policy the window with the least Remaining
							// (admission) or the longest retry (denial), first
							// in order on ties.
							rem, reset, next := int64(1<<62), int64(0), int64(0)
							name := ""
							var longest int64 = -1
							for i, w := range ws {
								ri, xi, ni := w.rem(keys[i], now), w.reset(keys[i], now), w.next(keys[i], now)
								reset = max(reset, xi)
								switch {
								case ri < rem:
									rem, next = ri, ni
									if fits {
										name = ls[i].Name()
									}
								case ri == rem:
									next = max(next, ni)
								}
								if !fits {
									if x := w.retry(keys[i], now, int64(n)); x > longest {
										longest, name = x, ls[i].Name()
									}
								}
							}
							if int64(d.Remaining) != rem || d.ResetAfter != gapped(reset) || d.NextAfter != gapped(next) || d.Policy != name {
								t.Fatalf("step %d keys %v n %d lag %d: Remaining %d ResetAfter %v NextAfter %v Policy %q; oracle %d, %d ms, %d ms, %q (multi.go DecideKeys doc)", step, keys, n, lag, d.Remaining, d.ResetAfter, d.NextAfter, d.Policy, rem, reset, next, name)
							}
						}
						if !d.Allowed && !d.Never {
							probes++
							if rng.IntN(3) == 0 {
								// Advance to 1 ms before: every window's
								// PeekN, at least one denies; then to t+RA:
								// the Multi admits.
								now += ra - 1
								clk.Set(now)
								denies := false
								for i, l := range ls {
									pd := l.PeekN(clk.Now(), keys[i], n)
									if pd.Allowed != ws[i].fitsAfter(keys[i], now, 0, int64(n)) {
										t.Fatalf("step %d window %d: PeekN at RetryAfter-1ms Allowed %v, oracle disagrees", step, i, pd.Allowed)
									}
									denies = denies || !pd.Allowed
								}
								if !denies {
									t.Fatalf("step %d: every window admits 1 ms before the Multi's RetryAfter %v (not the least)", step, d.RetryAfter)
								}
								now++
								clk.Set(now)
								d2 := m.DecideKeys(clk.Now(), n, keys...)
								if !d2.Allowed {
									t.Fatalf("step %d keys %v n %d: denied at exactly t+RetryAfter (%v): %+v", step, keys, n, d.RetryAfter, d2)
								}
								adm++
								for i, w := range ws {
									w.take(keys[i], now, int64(n))
								}
								check(step, keys)
							}
						}
						lastAdv = int64(rng.IntN(4)) * int64([]int{1, 7, 50, 333}[rng.IntN(4)])
						now += lastAdv
						clk.Set(now)
					}
					t.Logf("%d admitted, %d denied, %d probed, %d stale t", adm, den, probes, lags)
					if adm < 100 || den < 100 || probes < 50 || lags < 20 {
						t.Fatalf("schedule too one-sided: %d admitted, %d denied, %d probes, %d stale", adm, den, probes, lags)
					}
					st := m.Stats()
					if st.Admitted != uint64(adm) || st.Denied != uint64(den) {
						t.Fatalf("Multi.Stats %d/%d, want %d/%d", st.Admitted, st.Denied, adm, den)
					}
				})
			}
		}
	}
}

// TestAudit38MultiConcurrentOneKey: goroutines hammer one key through a
// Multi of two windows on a frozen clock, at several GOMAXPROCS; the
// Multi never admits past the tighter burst, every admission is in both
// windows, and the windows' debts are at least the admitted requests'
// (a denial's rollback never gives back what an admission took).
func TestAudit38MultiConcurrentOneKey(t *testing.T) {
	for _, procs := range []int{1, 2, 8} {
		for _, eng := range engines {
			t.Run(fmt.Sprintf("P%d/%v", procs, eng), func(t *testing.T) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				for round := range 20 {
					clk := sketchtest.NewFakeClock()
					clk.Set(1 << 35)
					a, _ := limit.New(10, 20, limit.WithClock(clk), limit.WithEngine(eng), limit.WithName("a"), noAmnesty(eng))
					b, _ := limit.New(5, 12, limit.WithClock(clk), limit.WithEngine(eng), limit.WithName("b"), noAmnesty(eng))
					m, err := limit.NewMulti(a, b)
					if err != nil {
						t.Fatal(err)
					}
					var admitted atomic.Int64
					var wg sync.WaitGroup
					for g := range 6 {
						wg.Go(func() {
							for i := range 40 {
								n := 1 + (g+i)%3
								if m.AllowN(clk.Now(), "k", n) {
									admitted.Add(int64(n))
								}
							}
						})
					}
					wg.Wait()
					got := admitted.Load()
					if got > 12 {
						t.Fatalf("round %d: %d tokens admitted, above the tighter burst 12", round, got)
					}
					if got < 10 {
						// 6x40 requests of 1..3 on an empty key: at least
						// 10 of the 12 must have gone through.
						t.Fatalf("round %d: only %d tokens admitted of 12", round, got)
					}
					for _, l := range []*limit.Limiter{a, b} {
						if debt := float64(l.Burst()) - l.Tokens("k"); debt < float64(got)-1e-9 {
							t.Fatalf("round %d window %s: debt %v below the %d tokens admitted", round, l.Name(), debt, got)
						}
					}
				}
			})
		}
	}
}

// TestAudit38MultiInexactRetryAfter: windows at rates no engine holds
// exactly (3 pi/s, sqrt 2/s, 10 e/s: Exact false): on every denial, every window
// admits the request at t+RetryAfter and one denies at 1 ms before, and
// the Multi admits it at t+RetryAfter (doc.go: an inexact policy's
// "RetryAfter still predicts its own next decision to the millisecond").
func TestAudit38MultiInexactRetryAfter(t *testing.T) {
	for _, reject := range []float64{0, 0.7} {
		t.Run(fmt.Sprint("reject", reject), func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			now := int64(1 << 36)
			clk.Set(now)
			var ls []*limit.Limiter
			for i, s := range []struct {
				lim   limit.Limit
				burst int
			}{{limit.Limit(3 * math.Pi), 11}, {limit.Limit(math.Sqrt2), 4}, {limit.Limit(10 * math.E), 30}} {
				l, err := limit.New(s.lim, s.burst, limit.WithClock(clk), limit.WithName(fmt.Sprint("w", i)), limit.WithSeed(uint64(i)), limit.WithRejectCost(reject), noAmnesty(limit.CountMin))
				if err != nil {
					t.Fatal(err)
				}
				ls = append(ls, l)
			}
			m, _ := limit.NewMulti(ls...)
			rng := rand.New(rand.NewPCG(uint64(reject*10), 4))
			probes := 0
			for step := range 800 {
				key := fmt.Sprint("k", rng.IntN(3))
				n := 1 + rng.IntN(3)
				d := m.AllowN(clk.Now(), key, n)
				if !d && rng.IntN(2) == 0 {
					// Decide again to read the RetryAfter (a denial
					// changes nothing without a reject cost; with one,
					// this second denial is the one probed).
					dd := m.DecideKeys(clk.Now(), n, key)
					if dd.Allowed || dd.Never {
						continue
					}
					probes++
					ra := dd.RetryAfter.Milliseconds()
					now += ra - 1
					clk.Set(now)
					denies := false
					for _, l := range ls {
						denies = denies || !l.PeekN(clk.Now(), key, n).Allowed
					}
					if !denies {
						t.Fatalf("step %d: every window admits %d 1 ms before RetryAfter %v", step, n, dd.RetryAfter)
					}
					now++
					clk.Set(now)
					if d2 := m.DecideKeys(clk.Now(), n, key); !d2.Allowed {
						t.Fatalf("step %d: denied at exactly t+RetryAfter %v: %+v", step, dd.RetryAfter, d2)
					}
				}
				now += int64(rng.IntN(3)) * int64([]int{1, 13, 140}[rng.IntN(3)])
				clk.Set(now)
			}
			for _, l := range ls {
				if l.Exact() {
					t.Fatalf("window %s is exact (%v): not the case tested", l.Name(), l.Engine())
				}
			}
			if probes < 50 {
				t.Fatalf("only %d probes", probes)
			}
		})
	}
}
