package limit_test

// audit20: a Multi of windows with different rates, bursts, engines and
// RejectCost, against exact rational buckets (math/big.Rat), under a
// fake clock stepping back and forward, with stale and future t, one
// key for every window or one key per window, and single-window calls
// in between so that the windows' time scales (each Limiter has its own
// high-water mark) drift apart.

import (
	"context"
	"fmt"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// a20win is one window's exact model: its own time (the high-water mark
// of the times its Limiter used) and each key's debt in tokens at that
// time's stamp.
type a20win struct {
	rate   *big.Rat // tokens per ms
	burst  int
	reject int64
	maxD   *big.Rat
	hw     int64
	debt   map[string]*big.Rat // at stamp[key]
	stamp  map[string]int64
	name   string
}

func (w *a20win) at(t, c int64) {
	if e := min(t, c); e > w.hw {
		w.hw = e
	}
}

// cur returns key's debt at the window's time.
func (w *a20win) cur(key string) *big.Rat {
	d, ok := w.debt[key]
	if !ok {
		return new(big.Rat)
	}
	return w.drained(d, w.hw-w.stamp[key])
}

func (w *a20win) drained(d *big.Rat, x int64) *big.Rat {
	r := new(big.Rat).Sub(d, new(big.Rat).Mul(w.rate, big.NewRat(x, 1)))
	if r.Sign() < 0 {
		r.SetInt64(0)
	}
	return r
}

func (w *a20win) set(key string, d *big.Rat) {
	if d.Cmp(w.maxD) > 0 {
		d = new(big.Rat).Set(w.maxD)
	}
	w.debt[key], w.stamp[key] = d, w.hw
}

func (w *a20win) fitsAfter(key string, x int64, n int64) bool {
	d := w.drained(w.cur(key), x)
	return d.Add(d, big.NewRat(n, 1)).Cmp(big.NewRat(int64(w.burst), 1)) <= 0
}

// state is Limiter.state's exact answer for key at t: durations from t
// (callers pass the earlier of t and the clock's reading)
// (gap = how far the window's time is after t).
func (w *a20win) state(key string, t int64, n int) limit.Decision {
	d := limit.Decision{Burst: w.burst, Policy: w.name}
	gap := max(w.hw-t, 0)
	debt := w.cur(key)
	switch {
	case n > w.burst:
		d.Never, d.RetryAfter = true, limit.InfDuration
	case w.fitsAfter(key, 0, int64(n)):
		d.Allowed = true
	default:
		x := a18least(1, func(x int64) bool { return w.fitsAfter(key, x, int64(n)) })
		d.RetryAfter = time.Duration(gap+x) * time.Millisecond
	}
	rem := new(big.Rat).Sub(big.NewRat(int64(w.burst), 1), debt)
	if rem.Sign() > 0 {
		d.Remaining = int(new(big.Int).Quo(rem.Num(), rem.Denom()).Int64())
	}
	if debt.Sign() > 0 {
		reset := a18least(0, func(x int64) bool { return w.drained(debt, x).Sign() == 0 })
		next := a18least(0, func(x int64) bool { return w.fitsAfter(key, x, int64(d.Remaining+1)) })
		d.ResetAfter = time.Duration(gap+reset) * time.Millisecond
		d.NextAfter = time.Duration(gap+next) * time.Millisecond
	}
	return d
}

// TestAudit20MultiOracle: every field of DecideKeys' Decision (and
// Multi.DecideContext's, at the first window's Now) is the conjunction
// of the exact windows': admitted iff every window fits; Remaining the
// least, ResetAfter the latest, NextAfter the latest of the windows
// holding the least (0 if one of them is full); on a denial RetryAfter the latest window's wait,
// named by the first window with it; the first denying window charges
// its RejectCost.
func TestAudit20MultiOracle(t *testing.T) {
	testsize.Serial(t)
	type wcfg struct {
		lim    limit.Limit
		rate   *big.Rat
		burst  int
		eng    limit.Engine
		reject float64
	}
	cfgs := [][]wcfg{
		{{10, big.NewRat(1, 100), 5, limit.Buckets, 1}, {limit.Every(250 * time.Millisecond), big.NewRat(1, 250), 8, limit.CountMin, 0}, {1, big.NewRat(1, 1000), 3, limit.Auto, 2}},
		{{limit.Every(3 * time.Second), big.NewRat(1, 3000), 2, limit.CountMin, 0}, {1000, big.NewRat(1, 1), 20, limit.Buckets, 3}},
		{{2.5, big.NewRat(1, 400), 4, limit.Buckets, 0}, {2.5, big.NewRat(1, 400), 4, limit.CountMin, 1}, {40, big.NewRat(1, 25), 6, limit.Buckets, 0}},
	}
	steps := []int64{0, 1, 2, 24, 25, 99, 100, 250, 399, 400, 1_000, 3_000, 60_000, 3_600_000, 86_400_000}
	for ci, cfg := range cfgs {
		for seed := range uint64(3) {
			t.Run(fmt.Sprintf("%d/%d", ci, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, uint64(ci)+200))
				clk := limittest.NewFakeClock()
				clk.Set(1_700_000_000_000)
				var ls []*limit.Limiter
				var ws []*a20win
				for i, c := range cfg {
					name := fmt.Sprintf("w%d", i)
					l, err := limit.New(c.lim, c.burst, limit.WithClock(clk), limit.WithEngine(c.eng), limit.WithSeed(seed+uint64(i)), limit.WithName(name), limit.WithRejectCost(c.reject))
					if err != nil {
						t.Fatal(err)
					}
					if !l.Exact() {
						t.Fatalf("window %d not exact", i)
					}
					md := new(big.Rat)
					md.SetFloat64(l.MaxDebt())
					ls = append(ls, l)
					ws = append(ws, &a20win{rate: c.rate, burst: c.burst, reject: int64(c.reject), maxD: md, hw: clk.NowMillis(),
						debt: map[string]*big.Rat{}, stamp: map[string]int64{}, name: name})
				}
				m, err := limit.NewMulti(ls...)
				if err != nil {
					t.Fatal(err)
				}
				maxBurst := 0
				for _, w := range ws {
					maxBurst = max(maxBurst, w.burst)
				}
				var denials, lagged int
				for i := range 200 {
					s := steps[rng.IntN(len(steps))]
					if rng.IntN(2) == 0 {
						s = int64(rng.IntN(120))
					}
					switch rng.IntN(5) {
					case 0, 1, 2:
						clk.Set(clk.NowMillis() + s)
					case 3:
						clk.Set(clk.NowMillis() - s)
					}
					c := clk.NowMillis()
					hw0 := ws[0].hw
					var at int64
					switch rng.IntN(5) {
					case 0, 1:
						at = c
					case 2:
						at = hw0 - int64(rng.IntN(3))
					case 3:
						at = c - steps[rng.IntN(len(steps))]
					default:
						at = c + steps[rng.IntN(len(steps))]
					}
					n := 1 + rng.IntN(maxBurst+1)
					if rng.IntN(2) == 0 {
						n = 1 + rng.IntN(2)
					}
					keys := []string{"k"}
					if rng.IntN(4) == 0 {
						keys = nil
						for j := range ws {
							keys = append(keys, fmt.Sprintf("k%d", (j+rng.IntN(2))%2))
						}
					}
					key := func(j int) string {
						if len(keys) == 1 {
							return keys[0]
						}
						return keys[j]
					}
					if rng.IntN(6) == 0 {
						// One window alone, at its own t: its time scale drifts from the others'.
						j := rng.IntN(len(ws))
						ws[j].at(at, c)
						want := ws[j].state("k", min(at, c), 1)
						got := ls[j].DecideN(time.UnixMilli(at), "k", 1)
						if want.Allowed {
							ws[j].set("k", new(big.Rat).Add(ws[j].cur("k"), big.NewRat(1, 1)))
							want = ws[j].state("k", min(at, c), 1)
							want.Allowed, want.RetryAfter = true, 0
						} else if ws[j].reject > 0 {
							ws[j].set("k", new(big.Rat).Add(ws[j].cur("k"), big.NewRat(ws[j].reject, 1)))
							want = ws[j].state("k", min(at, c), 1) // RetryAfter includes the penalty
						}
						want.Limit = got.Limit
						if got != want {
							t.Fatalf("step %d: window %d alone DecideN(%d) clock %d:\n got  %+v\n want %+v", i, j, at, c, got, want)
						}
						continue
					}
					var got limit.Decision
					ctxForm := len(keys) == 1 && rng.IntN(3) == 0
					if ctxForm {
						at = c // DecideContext: the first window's Now, the clock's reading
					}
					for _, w := range ws {
						w.at(at, c)
					}
					// The oracle.
					denied := -1
					for j, w := range ws {
						if n > w.burst || !w.fitsAfter(key(j), 0, int64(n)) {
							denied = j
							break
						}
					}
					if denied < 0 {
						for j, w := range ws {
							w.set(key(j), new(big.Rat).Add(w.cur(key(j)), big.NewRat(int64(n), 1)))
						}
					} else if w := ws[denied]; w.reject > 0 {
						w.set(key(denied), new(big.Rat).Add(w.cur(key(denied)), big.NewRat(w.reject, 1)))
					}
					if ctxForm {
						got, _ = m.DecideContext(context.Background(), "k", n)
					} else {
						got = m.DecideKeys(time.UnixMilli(at), n, keys...)
					}
					want := limit.Decision{Allowed: denied < 0, Remaining: int(^uint(0) >> 1)}
					var st []limit.Decision
					for j, w := range ws {
						st = append(st, w.state(key(j), min(at, c), n))
					}
					name := -1
					for j, s := range st {
						if s.Remaining < want.Remaining {
							want.Remaining, want.NextAfter = s.Remaining, s.NextAfter
							if denied < 0 {
								name = j
							}
						} else if s.Remaining == want.Remaining {
							if want.NextAfter == 0 || s.NextAfter == 0 {
								// A full window holds the least: it never
								// grows (audit 52).
								want.NextAfter = 0
							} else {
								want.NextAfter = max(want.NextAfter, s.NextAfter)
							}
						}
						want.ResetAfter = max(want.ResetAfter, s.ResetAfter)
					}
					if denied >= 0 {
						for j, s := range st {
							if s.Never {
								if !want.Never {
									want.Never, want.RetryAfter, name = true, limit.InfDuration, j
								}
							} else if !want.Never && s.RetryAfter > want.RetryAfter {
								want.RetryAfter, name = s.RetryAfter, j
							}
						}
					}
					want.Burst, want.Policy, want.Limit = ws[name].burst, ws[name].name, ls[name].Limit()
					if got != want {
						t.Fatalf("step %d: DecideKeys(t %d, n %d, %v) clock %d (ctx form %v), hws %d/%d, denied by %d:\n got  %+v\n want %+v",
							i, at, n, keys, c, ctxForm, ws[0].hw, ws[len(ws)-1].hw, denied, got, want)
					}
					if !got.Allowed && !got.Never {
						denials++
						if ws[0].hw > at {
							lagged++
						}
						// The wait is exact from t: PeekN of every window at
						// the window's time reached at t+RetryAfter.
						if got.NextAfter > got.RetryAfter {
							t.Fatalf("step %d: NextAfter %v > RetryAfter %v", i, got.NextAfter, got.RetryAfter)
						}
					}
				}
				if denials < 20 || lagged < 5 {
					t.Fatalf("weak run: %d denials, %d with a lag", denials, lagged)
				}
			})
		}
	}
}
