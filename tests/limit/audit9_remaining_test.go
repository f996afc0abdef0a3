package limit_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a9Race runs G goroutines each making per DecideN(now(), key(g, i), 1)
// calls through decide, and returns the Remaining of every admitted call
// (sorted) and the number admitted. mid, if not nil, runs once after
// half of the calls of goroutine 0.
func a9Race(G, per int, decide func(g, i int) limit.Decision, mid func()) (rem []int) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := range G {
		wg.Go(func() {
			<-start
			for i := range per {
				if g == 0 && i == per/2 && mid != nil {
					mid()
				}
				d := decide(g, i)
				if d.Allowed {
					mu.Lock()
					rem = append(rem, d.Remaining)
					mu.Unlock()
				}
				runtime.Gosched()
			}
		})
	}
	close(start)
	wg.Wait()
	sort.Ints(rem)
	return rem
}

func a9WantSeq(t *testing.T, rem []int, burst int, what string) {
	t.Helper()
	if len(rem) != burst {
		t.Fatalf("%s: %d admitted, want %d (Remaining %v)", what, len(rem), burst, rem)
	}
	for i, r := range rem {
		if r != i {
			t.Fatalf("%s: sorted Remaining %v, want 0..%d each once", what, rem, burst-1)
		}
	}
}

// TestAudit9RemainingRacingPromotion: strict count-min, 3 generations at
// the least valid Period (MaxDebt / (rate (G-1))), G goroutines race
// DecideN(1) on one key while the fake clock crosses the rotation
// deadline by 1 ms mid-race (a promotion during the racing decisions).
// The drain in that ms (0.01 token) is below a token, so the admitted
// decisions' Remaining must still be burst-1..0 each once.
func TestAudit9RemainingRacingPromotion(t *testing.T) {
	const G, burst, rate, maxDebt, gens = 8, 40, 10, 400, 3
	period := time.Duration(float64(maxDebt) / (rate * (gens - 1)) * float64(time.Second))
	for _, procs := range []int{1, 2, 8} {
		for _, cu := range []bool{false, true} {
			t.Run(fmt.Sprintf("P%d/cu=%v", procs, cu), func(t *testing.T) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				for iter := range 30 {
					clk := sketchtest.NewFakeClock()
					clk.Set(1 << 36)
					l, err := limit.New(rate, burst, limit.WithSeed(uint64(iter)), limit.WithClock(clk), limit.WithMaxDebt(maxDebt),
						limit.WithEngine(limit.CountMin), limit.WithGenerations(gens), limit.WithPeriod(period), limit.WithConservativeUpdate(cu))
					if err != nil {
						t.Fatal(err)
					}
					// Warm: write some debt to another key, then move to
					// 1 ms before the deadline.
					l.DecideN(clk.Now(), "other", 5)
					clk.Advance(period - time.Millisecond)
					rem := a9Race(G, burst, func(g, i int) limit.Decision { return l.DecideN(clk.Now(), "k", 1) },
						func() { clk.Advance(time.Millisecond) })
					a9WantSeq(t, rem, burst, fmt.Sprintf("iter %d", iter))
					if r := l.Stats().Rotations; r != 1 {
						t.Fatalf("iter %d: %d rotations, want 1 (the race must cross the deadline)", iter, r)
					}
				}
			})
		}
	}
}

// TestAudit9RemainingRacingColliding: the strict count-min with one cell
// per level (WithSize(2, 1)): every key shares every cell, so the
// limiter is one bucket for all keys; G goroutines racing DecideN(1) on
// G different keys at a frozen instant must get Remaining burst-1..0
// each once over all keys. Conservative update: only the documented
// weaker guarantee.
func TestAudit9RemainingRacingColliding(t *testing.T) {
	const G, burst = 8, 40
	for _, procs := range []int{1, 2, 8} {
		for _, cu := range []bool{false, true} {
			t.Run(fmt.Sprintf("P%d/cu=%v", procs, cu), func(t *testing.T) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				for iter := range 20 {
					clk := sketchtest.NewFakeClock()
					clk.Set(1 << 36)
					l, err := limit.New(10, burst, limit.WithSeed(uint64(iter)), limit.WithClock(clk), limit.WithMaxDebt(400),
						limit.WithEngine(limit.CountMin), limit.WithSize(2, 1), limit.WithPeriod(10*365*24*time.Hour), limit.WithConservativeUpdate(cu))
					if err != nil {
						t.Fatal(err)
					}
					now := clk.Now()
					keys := make([]string, G)
					for g := range keys {
						keys[g] = fmt.Sprintf("key-%d", g)
					}
					rem := a9Race(G, burst, func(g, i int) limit.Decision { return l.DecideN(now, keys[g], 1) }, nil)
					if cu {
						// docs/design.md, "Conservative update": with every
						// key in one cell the total over keys is not bounded
						// by the limit (a cell holds the largest debt), by
						// design. Only: no spurious denial (at least burst
						// admitted), Remaining within 0..burst-1.
						if len(rem) < burst || rem[0] < 0 || rem[len(rem)-1] > burst-1 {
							t.Fatalf("iter %d: cu: %d admitted, Remaining %v", iter, len(rem), rem)
						}
						continue
					}
					a9WantSeq(t, rem, burst, fmt.Sprintf("iter %d", iter))
				}
			})
		}
	}
}

// TestAudit9RemainingRacingRejectCost: strict, WithRejectCost(0.5),
// racing DecideN of sizes 1 and 3 on one key at a frozen instant (both
// engines, and the conservative count-min). Admissions of one key
// serialize, each reading the debt its own take left (every earlier take
// and reject cost included), so no more than burst tokens are admitted,
// the admitted Remaining values above 0 are pairwise distinct, and none
// exceeds burst-1.
func TestAudit9RemainingRacingRejectCost(t *testing.T) {
	const G, burst = 8, 40
	cases := reserveExactCases()[:3] // buckets, count-min, conservative count-min
	for _, procs := range []int{1, 2, 8} {
		for _, c := range cases {
			t.Run(fmt.Sprintf("P%d/%s", procs, c.name), func(t *testing.T) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				for iter := range 20 {
					clk := sketchtest.NewFakeClock()
					clk.Set(1 << 36)
					o := append([]limit.Option{limit.WithSeed(uint64(iter)), limit.WithClock(clk), limit.WithMaxDebt(400), limit.WithRejectCost(0.5)}, c.opts...)
					l, err := limit.New(10, burst, o...)
					if err != nil {
						t.Fatal(err)
					}
					now := clk.Now()
					var mu sync.Mutex
					var adm []limit.Decision
					var tokens atomic.Int64
					var wg sync.WaitGroup
					start := make(chan struct{})
					for g := range G {
						wg.Go(func() {
							<-start
							for i := range burst {
								n := 1 + 2*((g+i)%2)
								d := l.DecideN(now, "k", n)
								if d.Allowed {
									tokens.Add(int64(n))
									mu.Lock()
									adm = append(adm, d)
									mu.Unlock()
								}
								runtime.Gosched()
							}
						})
					}
					close(start)
					wg.Wait()
					if tokens.Load() > burst {
						t.Fatalf("iter %d: %d tokens admitted, burst %d", iter, tokens.Load(), burst)
					}
					seen := map[int]bool{}
					for _, d := range adm {
						if seen[d.Remaining] && d.Remaining > 0 {
							t.Fatalf("iter %d: two admissions with Remaining %d (each should read the debt its own take left)", iter, d.Remaining)
						}
						seen[d.Remaining] = true
						if d.Remaining > burst-1 {
							t.Fatalf("iter %d: Remaining %d > burst-1", iter, d.Remaining)
						}
					}
				}
			})
		}
	}
}

// TestAudit9RemainingRacingTier: racing DecideN(1) on one key through a
// Tier with a smaller burst than the Limiter's, strict, both engines:
// Remaining (in the tier's burst) must be tierBurst-1..0 each once.
func TestAudit9RemainingRacingTier(t *testing.T) {
	const G, burst, tierBurst = 8, 40, 24
	cases := reserveExactCases()[:3] // buckets, count-min, conservative count-min
	for _, procs := range []int{1, 2, 8} {
		for _, c := range cases {
			t.Run(fmt.Sprintf("P%d/%s", procs, c.name), func(t *testing.T) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				for iter := range 20 {
					clk := sketchtest.NewFakeClock()
					clk.Set(1 << 36)
					o := append([]limit.Option{limit.WithSeed(uint64(iter)), limit.WithClock(clk), limit.WithMaxDebt(400)}, c.opts...)
					l, err := limit.New(10, burst, o...)
					if err != nil {
						t.Fatal(err)
					}
					tr, err := l.Tier("small", 10, tierBurst)
					if err != nil {
						t.Fatal(err)
					}
					now := clk.Now()
					rem := a9Race(G, tierBurst, func(g, i int) limit.Decision { return tr.DecideN(now, "k", 1) }, nil)
					a9WantSeq(t, rem, tierBurst, fmt.Sprintf("iter %d", iter))
				}
			})
		}
	}
}

// a9Case is a limiter configuration for the sequential duration checks.
type a9Case struct {
	name   string
	opts   []limit.Option
	rotate bool // amnesty may admit early: skip the "1 ms earlier not" check
}

func a9Cases() []a9Case {
	long := limit.WithPeriod(10 * 365 * 24 * time.Hour)
	return []a9Case{
		{"buckets", []limit.Option{limit.WithEngine(limit.Buckets)}, false},
		{"buckets-reject", []limit.Option{limit.WithEngine(limit.Buckets), limit.WithRejectCost(0.5)}, false},
		{"count-min", []limit.Option{limit.WithEngine(limit.CountMin), long}, false},
		{"count-min-cu", []limit.Option{limit.WithEngine(limit.CountMin), long, limit.WithConservativeUpdate(true)}, false},
		{"count-min-reject", []limit.Option{limit.WithEngine(limit.CountMin), long, limit.WithRejectCost(0.5)}, false},
		{"count-min-rot3", []limit.Option{limit.WithEngine(limit.CountMin), limit.WithGenerations(3), limit.WithPeriod(20 * time.Second)}, true},
	}
}

// TestAudit9DurationsNeverEarly: a random sequential history of DecideN
// (n in 1..8, times moving 0..700 ms) on one key; after each decision d
// at t, a replica of the limiter (the same history replayed on a fresh
// limiter with the same seed and clock) is probed:
//   - at t + NextAfter (if > 0) Remaining+1 one-token requests are all
//     admitted;
//   - for a denial (not Never): at t + RetryAfter the same request is
//     admitted, and (non-rotating) at t + RetryAfter - 1 ms it is not;
//   - at t + ResetAfter a request of the whole burst is admitted.
func TestAudit9DurationsNeverEarly(t *testing.T) {
	testsize.Serial(t)
	const burst = 20
	type step struct {
		dt time.Duration
		n  int
	}
	for _, c := range a9Cases() {
		t.Run(c.name, func(t *testing.T) {
			for seed := range testsize.Sample(3, 3, 1) {
				rng := rand.New(rand.NewPCG(uint64(seed), 7))
				var hist []step
				for range 30 {
					hist = append(hist, step{time.Duration(rng.IntN(8)) * time.Duration(rng.IntN(100)) * time.Millisecond, 1 + rng.IntN(8)})
				}
				build := func(k int) (*limit.Limiter, *sketchtest.FakeClock, limit.Decision) {
					clk := sketchtest.NewFakeClock()
					clk.Set(1 << 36)
					o := append([]limit.Option{limit.WithSeed(5), limit.WithClock(clk), limit.WithMaxDebt(200)}, c.opts...)
					l, err := limit.New(10, burst, o...)
					if err != nil {
						t.Fatal(err)
					}
					var d limit.Decision
					for _, s := range hist[:k+1] {
						clk.Advance(s.dt)
						d = l.DecideN(clk.Now(), "k", s.n)
					}
					return l, clk, d
				}
				for k := range hist {
					_, _, d := build(k)
					if d.NextAfter > 0 {
						l, clk, _ := build(k)
						clk.Advance(d.NextAfter)
						at := clk.Now()
						for i := range d.Remaining + 1 {
							if !l.DecideN(at, "k", 1).Allowed {
								t.Fatalf("seed %d step %d: %+v; at t+NextAfter the %d-th of Remaining+1=%d one-token requests denied", seed, k, d, i+1, d.Remaining+1)
							}
						}
					}
					if !d.Allowed && !d.Never {
						l, clk, _ := build(k)
						clk.Advance(d.RetryAfter)
						if !l.DecideN(clk.Now(), "k", hist[k].n).Allowed {
							t.Fatalf("seed %d step %d: %+v; denied again at t+RetryAfter", seed, k, d)
						}
						if !c.rotate && d.RetryAfter > time.Millisecond {
							l, clk, _ := build(k)
							clk.Advance(d.RetryAfter - time.Millisecond)
							if l.PeekN(clk.Now(), "k", hist[k].n).Allowed {
								t.Fatalf("seed %d step %d: %+v; admitted at t+RetryAfter-1ms (RetryAfter late)", seed, k, d)
							}
						}
					}
					if d.ResetAfter > 0 {
						l, clk, _ := build(k)
						clk.Advance(d.ResetAfter)
						if !l.DecideN(clk.Now(), "k", burst).Allowed {
							t.Fatalf("seed %d step %d: %+v; burst denied at t+ResetAfter", seed, k, d)
						}
					}
				}
			}
		})
	}
}

// TestAudit9DecideNAllocs: DecideN (strict, the default) allocates
// nothing on either engine, admitted or denied, through a Tier too.
func TestAudit9DecideNAllocs(t *testing.T) {
	for _, c := range a9Cases() {
		t.Run(c.name, func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			clk.Set(1 << 36)
			o := append([]limit.Option{limit.WithSeed(5), limit.WithClock(clk), limit.WithMaxDebt(200)}, c.opts...)
			l, err := limit.New(10, 20, o...)
			if err != nil {
				t.Fatal(err)
			}
			tr, err := l.Tier("t", 5, 10)
			if err != nil {
				t.Fatal(err)
			}
			now := clk.Now()
			i := 0
			a := testing.AllocsPerRun(200, func() {
				i++
				l.DecideN(now, "k", 1)
				l.DecideN(now, "j", 3)
				tr.DecideN(now, "z", 2)
				if i%16 == 0 {
					now = now.Add(10 * time.Millisecond)
				}
			})
			if a != 0 {
				t.Fatalf("DecideN allocates %v per run", a)
			}
		})
	}
}

// TestAudit9RemainingRacingMixedTimes: racing strict DecideN(1) on one
// key with request times spread over 5 ms (each goroutine passes
// base + a pseudo-random 0..5 ms, stale ones count as a time already
// used), the clock at base + 5 ms. At 10 tokens/s the spread drains
// 0.05 token, so the admitted Remaining values are still burst-1..0
// each once, on both engines and on the rotating count-min.
func TestAudit9RemainingRacingMixedTimes(t *testing.T) {
	const G, burst = 8, 40
	for _, procs := range []int{1, 2, 8} {
		for _, c := range a9Cases() {
			t.Run(fmt.Sprintf("P%d/%s", procs, c.name), func(t *testing.T) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				for iter := range 10 {
					clk := sketchtest.NewFakeClock()
					clk.Set(1 << 36)
					o := append([]limit.Option{limit.WithSeed(uint64(iter)), limit.WithClock(clk), limit.WithMaxDebt(200)}, c.opts...)
					l, err := limit.New(10, burst, o...)
					if err != nil {
						t.Fatal(err)
					}
					base := clk.Now()
					clk.Advance(5 * time.Millisecond)
					rem := a9Race(G, burst, func(g, i int) limit.Decision {
						return l.DecideN(base.Add(time.Duration((g*7+i*3)%6)*time.Millisecond), "k", 1)
					}, nil)
					a9WantSeq(t, rem, burst, fmt.Sprintf("iter %d", iter))
				}
			})
		}
	}
}
