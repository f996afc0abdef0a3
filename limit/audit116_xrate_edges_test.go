package limit_test

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// a116RealClock returns a fake clock set a day ahead of the real time,
// so that a context deadline on its scale lies far ahead in real time.
func a116RealClock() *limittest.FakeClock {
	clk := limittest.NewFakeClock()
	clk.Set(time.Now().Add(24 * time.Hour).UnixMilli())
	return clk
}

// TestAudit116WaitDeadlineBoundary (passes; a regression test): WaitN
// "as x/time/rate's WaitN" admits a wait that ends exactly at the
// context's deadline (x/time/rate: ok iff the wait <= deadline - now)
// and refuses one 1 ms (or half a ms) longer before debiting anything.
// Every(7ms), burst 1, after one admission: the next token is 7 ms away.
func TestAudit116WaitDeadlineBoundary(t *testing.T) {
	for _, eng := range []limit.Engine{limit.Buckets, limit.CountMin} {
		for _, c := range []struct {
			dl time.Duration
			ok bool
		}{{7 * time.Millisecond, true}, {7500 * time.Microsecond, true}, {6 * time.Millisecond, false}, {6900 * time.Microsecond, false}} {
			clk := a116RealClock()
			l, err := limit.New(limit.Every(7*time.Millisecond), 1, limit.WithClock(clk), limit.WithEngine(eng), limit.WithCapacity(16, 0.01))
			if err != nil {
				t.Fatal(err)
			}
			if !l.AllowN(clk.Now(), "k", 1) {
				t.Fatal("first request denied")
			}
			ctx, cancel := context.WithDeadline(context.Background(), clk.Now().Add(c.dl))
			done := make(chan error, 1)
			go func() { done <- l.WaitN(ctx, "k", 1) }()
			if c.ok {
				clk.BlockUntilTimers(1)
				clk.Advance(6 * time.Millisecond)
				select {
				case err := <-done:
					t.Fatalf("%v deadline %v: WaitN returned %v 1 ms early", eng, c.dl, err)
				default:
				}
				clk.Advance(time.Millisecond)
				if err := <-done; err != nil {
					t.Fatalf("%v deadline %v: WaitN: %v, want nil (x/time/rate waits 7 ms)", eng, c.dl, err)
				}
			} else {
				err := <-done
				if !errors.Is(err, limit.ErrPastDeadline) || !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("%v deadline %v: WaitN: %v, want ErrPastDeadline", eng, c.dl, err)
				}
				// Nothing debited: the next token is still 7 ms away.
				if d := l.PeekN(clk.Now(), "k", 1); d.RetryAfter != 7*time.Millisecond {
					t.Fatalf("%v deadline %v: after the refused wait %+v, want RetryAfter 7ms", eng, c.dl, d)
				}
			}
			cancel()
		}
	}
}

// TestAudit116NonPositiveNPanicsEverywhere (passes; a regression test):
// "n <= 0 panics" on every form taking n, the Tier's and an Inf
// limiter's included (x/time/rate's AllowN(t, 0) is true: a documented
// deviation).
func TestAudit116NonPositiveNPanicsEverywhere(t *testing.T) {
	clk := limittest.NewFakeClock()
	l := limit.MustNew(10, 20, limit.WithClock(clk), limit.WithCapacity(16, 0.01))
	inf := limit.MustNew(limit.Inf, 1, limit.WithClock(clk))
	tr, err := l.Tier("t", 5, 10)
	if err != nil {
		t.Fatal(err)
	}
	now := clk.Now()
	for _, n := range []int{0, -1} {
		calls := map[string]func(){
			"AllowN":       func() { l.AllowN(now, "k", n) },
			"DecideN":      func() { l.DecideN(now, "k", n) },
			"PeekN":        func() { l.PeekN(now, "k", n) },
			"ReserveN":     func() { l.ReserveN(now, "k", n) },
			"WaitN":        func() { _ = l.WaitN(context.Background(), "k", n) },
			"DecideCtx":    func() { _, _ = l.DecideContext(context.Background(), "k", n) },
			"Tier.AllowN":  func() { tr.AllowN(now, "k", n) },
			"Tier.DecideN": func() { tr.DecideN(now, "k", n) },
			"Tier.Reserve": func() { tr.ReserveN(now, "k", n) },
			"Tier.WaitN":   func() { _ = tr.WaitN(context.Background(), "k", n) },
			"Inf.AllowN":   func() { inf.AllowN(now, "k", n) },
			"Inf.DecideN":  func() { inf.DecideN(now, "k", n) },
			"Inf.ReserveN": func() { inf.ReserveN(now, "k", n) },
			"Inf.WaitN":    func() { _ = inf.WaitN(context.Background(), "k", n) },
		}
		for name, f := range calls {
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("%s(n=%d) did not panic", name, n)
					}
				}()
				f()
			}()
		}
	}
}

// TestAudit116InfLimiterAsXrate (passes; a regression test): an Inf
// limiter admits every n "as x/time/rate's Inf": AllowN true, DecideN
// Allowed with Never false and Remaining the burst, ReserveN OK with
// Delay 0 (for a stale and a future t too), WaitN nil, TokensAt the burst;
// SetBurst changes only the reported burst.
func TestAudit116InfLimiterAsXrate(t *testing.T) {
	clk := limittest.NewFakeClock()
	clk.Set(1 << 40)
	l := limit.MustNew(limit.Inf, 3, limit.WithClock(clk))
	for _, b := range []int{3, 1, 1000} {
		if err := l.SetBurst(b); err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{1, b, b + 1, 1 << 40} {
			for _, dt := range []time.Duration{0, -time.Hour, time.Hour} {
				tm := clk.Now().Add(dt)
				if !l.AllowN(tm, "k", n) {
					t.Fatalf("Inf AllowN(n=%d) denied", n)
				}
				d := l.DecideN(tm, "k", n)
				if !d.Allowed || d.Never || d.Remaining != b || d.RetryAfter != 0 || d.ResetAfter != 0 || d.NextAfter != 0 || d.Burst != b || d.Limit != limit.Inf {
					t.Fatalf("Inf DecideN(n=%d, dt=%v) = %+v", n, dt, d)
				}
				r := l.ReserveN(tm, "k", n)
				if !r.OK() || r.Delay() != 0 {
					t.Fatalf("Inf ReserveN(n=%d, dt=%v): OK %v Delay %v", n, dt, r.OK(), r.Delay())
				}
				r.Cancel()
				if err := l.WaitN(context.Background(), "k", n); err != nil {
					t.Fatalf("Inf WaitN(n=%d): %v", n, err)
				}
				if got := l.TokensAt(tm, "k"); got != float64(b) {
					t.Fatalf("Inf TokensAt = %v, want %d", got, b)
				}
			}
		}
	}
}

// TestAudit116InexactSelfPredictionAndNeverEarly drives inexact
// limiters (Exact() false: Every(24h) at burst 3, 0.37/s, 5001/s past
// 2^24 units, an inexact Tier) and checks two documented guarantees:
// "RetryAfter predicts the limiter's own next decision to the
// millisecond: a retry at t+RetryAfter is admitted and one 1 ms earlier
// is not", and "decisions are never earlier than the exact bucket's"
// (a rational bucket that follows the limiter's own outcomes never
// denies what the limiter admits, and its RetryAfter is never longer).
func TestAudit116InexactSelfPredictionAndNeverEarly(t *testing.T) {
	type cfg struct {
		rate  limit.Limit
		burst int
		opts  []limit.Option
	}
	cfgs := []cfg{
		{limit.Every(24 * time.Hour), 3, nil},
		{limit.Every(24 * time.Hour), 30, nil},
		{0.37, 5, nil},
		{5001, 2000, []limit.Option{limit.WithMaxDebt(1 << 16)}},
		{1e-3, 2, []limit.Option{limit.WithMaxDebt(40)}},
		{limit.Every(time.Minute), 4096, nil},
	}
	seeds := testsize.Sample(4, 2, 1)
	steps := testsize.Sample(150, 80, 40)
	for ci, c := range cfgs {
		for seed := range seeds {
			clk := limittest.NewFakeClock()
			const start = int64(1) << 40
			clk.Set(start)
			l, err := limit.New(c.rate, c.burst, append([]limit.Option{limit.WithClock(clk), limit.WithCapacity(16, 0.01), limit.WithSeed(uint64(seed))}, c.opts...)...)
			if err != nil {
				t.Logf("cfg %d: %v", ci, err)
				continue
			}
			R := a116Rat(float64(c.rate))
			pol := a116Pol{r: R, b: c.burst, lf: c.rate}
			o := &a116Bucket{d: new(big.Rat), hw: start,
				max: new(big.Rat).Quo(new(big.Rat).Mul(a116Rat(l.MaxDebt()), big.NewRat(1000, 1)), R)}
			rng := rand.New(rand.NewPCG(uint64(ci), uint64(seed)))
			drain := a116Ceil(pol.costMs(c.burst))
			name := fmt.Sprintf("cfg %d (%v/s burst %d, %v, Exact %v) seed %d", ci, float64(c.rate), c.burst, l.Engine(), l.Exact(), seed)
			for step := range steps {
				if rng.IntN(3) == 0 {
					clk.Advance(time.Duration(rng.Int64N(max(drain/2, 2))) * time.Millisecond)
				}
				n := 1 + rng.IntN(c.burst)
				if rng.IntN(3) == 0 {
					n = 1
				}
				now := clk.NowMillis()
				gap := o.at(now, now)
				ex := new(big.Rat).Add(o.d, pol.costMs(n))
				exFits := ex.Cmp(pol.costMs(pol.b)) <= 0
				d := l.DecideN(clk.Now(), "k", n)
				if d.Allowed && !exFits {
					t.Fatalf("%s step %d: admitted n=%d where the exact bucket (debt %s ms) denies: early", name, step, n, o.d.FloatString(3))
				}
				if d.Allowed {
					o.d = ex
					continue
				}
				x := new(big.Rat).Sub(ex, pol.costMs(pol.b))
				if exRA := time.Duration(gap+max(a116Ceil(x), 1)) * time.Millisecond; d.RetryAfter < exRA {
					t.Fatalf("%s step %d: RetryAfter %v below the exact bucket's %v (n=%d)", name, step, d.RetryAfter, exRA, n)
				}
				// Self-prediction: 1 ms before is denied, at RetryAfter admitted.
				if d.RetryAfter > 30*24*time.Hour || rng.IntN(2) == 0 {
					continue
				}
				clk.Advance(d.RetryAfter - time.Millisecond)
				if p := l.PeekN(clk.Now(), "k", n); p.Allowed {
					t.Fatalf("%s step %d: admitted 1 ms before RetryAfter %v (n=%d): %+v", name, step, d.RetryAfter, n, p)
				}
				clk.Advance(time.Millisecond)
				if p := l.PeekN(clk.Now(), "k", n); !p.Allowed {
					t.Fatalf("%s step %d: denied at RetryAfter %v (n=%d): %+v", name, step, d.RetryAfter, n, p)
				}
			}
		}
	}
}

// TestAudit116StrictOptimisticChargeTwins (passes; a regression test):
// single-threaded, optimistic mode (WithStrict(false): Query, then
// Update if it fits) decides as strict mode does: "over-admits by at
// most the number of racers", so with one caller by none, and never
// denies with room. Twins on Buckets and CountMin, driven by Allow (the
// Charge path in strict mode), AllowN(t, 1), AllowN(t, n) and Tier
// Allow, at rates whose ticks differ (1e6/s, 999/s, Every(7ms), 1000/s
// with burst 1, 0.37/s), with RejectCost, clock steps back and SetBurst.
func TestAudit116StrictOptimisticChargeTwins(t *testing.T) {
	type cfg struct {
		rate  limit.Limit
		burst int
		rej   float64
		md    float64
	}
	cfgs := []cfg{{1e6, 1000, 1, 4000}, {999, 7, 0.5, 700}, {limit.Every(7 * time.Millisecond), 5, 1, 20}, {1000, 1, 0, 4}, {0.37, 2, 0.25, 10}, {12.5, 5, 0.5, 40}}
	seeds := testsize.Sample(6, 2, 1)
	for ci, c := range cfgs {
		for _, eng := range []limit.Engine{limit.Buckets, limit.CountMin} {
			for seed := range seeds {
				var ls [2]*limit.Limiter
				var clks [2]*limittest.FakeClock
				var trs [2]*limit.Tier
				for i := range ls {
					clks[i] = limittest.NewFakeClock()
					clks[i].Set(1 << 30)
					l, err := limit.New(c.rate, c.burst, limit.WithClock(clks[i]), limit.WithEngine(eng), limit.WithCapacity(16, 0.01),
						limit.WithSeed(uint64(seed)), limit.WithStrict(i == 0), limit.WithRejectCost(c.rej), limit.WithMaxDebt(c.md))
					if err != nil {
						break
					}
					ls[i] = l
					trs[i], _ = l.Tier("t", c.rate/2, max(c.burst/2, 1))
				}
				if ls[1] == nil {
					continue
				}
				rng := rand.New(rand.NewPCG(uint64(ci), uint64(seed)))
				for step := range testsize.Sample(400, 200, 100) {
					switch rng.IntN(10) {
					case 0, 1, 2:
						d := time.Duration(rng.Int64N(10)) * time.Millisecond
						if rng.IntN(6) == 0 {
							d = -d * 100
						}
						for _, k := range clks {
							k.Advance(d)
						}
						continue
					case 3:
						b := 1 + rng.IntN(c.burst)
						e0, e1 := ls[0].SetBurst(b), ls[1].SetBurst(b)
						if (e0 == nil) != (e1 == nil) {
							t.Fatalf("SetBurst twins: %v / %v", e0, e1)
						}
						continue
					}
					var got [2]bool
					op := rng.IntN(4)
					n := 1 + rng.IntN(ls[0].Burst()+1)
					for i, l := range ls {
						switch op {
						case 0:
							got[i] = l.Allow("k")
						case 1:
							got[i] = l.AllowN(clks[i].Now(), "k", 1)
						case 2:
							got[i] = l.AllowN(clks[i].Now(), "k", n)
						case 3:
							if trs[i] == nil {
								continue
							}
							got[i] = trs[i].Allow("k")
						}
					}
					if got[0] != got[1] {
						t.Fatalf("cfg %d %v seed %d step %d op %d n %d: strict %v, optimistic %v", ci, eng, seed, step, op, n, got[0], got[1])
					}
					if a, b := ls[0].TokensAt(clks[0].Now(), "k"), ls[1].TokensAt(clks[1].Now(), "k"); a != b {
						t.Fatalf("cfg %d %v seed %d step %d: tokens strict %v, optimistic %v", ci, eng, seed, step, a, b)
					}
				}
			}
		}
	}
}

// TestAudit116WaitCancelledGivesBack (passes; a regression test): WaitN
// "returns ctx.Err() when the context ends during the wait, after
// cancelling the reservation (Cancel's rule: all of it back unless
// another request touched the key's cells since)", as x/time/rate's
// WaitN does. Every(7ms) burst 2 after two admissions (14 ms of debt): a
// WaitN of 1 (a Tier's too) cancelled 3 ms into its 7 ms wait leaves
// the key as if it had never waited, drained 3 ms: 4 ms to the next token.
func TestAudit116WaitCancelledGivesBack(t *testing.T) {
	for _, eng := range []limit.Engine{limit.Buckets, limit.CountMin} {
		for _, tier := range []bool{false, true} {
			clk := a116RealClock()
			l, err := limit.New(limit.Every(7*time.Millisecond), 2, limit.WithClock(clk), limit.WithEngine(eng), limit.WithCapacity(16, 0.01))
			if err != nil {
				t.Fatal(err)
			}
			if !l.AllowN(clk.Now(), "k", 2) {
				t.Fatal("burst denied")
			}
			wait := func(ctx context.Context) error { return l.WaitN(ctx, "k", 1) }
			if tier {
				tr, err := l.Tier("t", limit.Every(7*time.Millisecond), 2)
				if err != nil {
					t.Fatal(err)
				}
				wait = func(ctx context.Context) error { return tr.WaitN(ctx, "k", 1) }
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- wait(ctx) }()
			clk.BlockUntilTimers(1)
			clk.Advance(3 * time.Millisecond)
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("%v tier %v: WaitN: %v, want context.Canceled", eng, tier, err)
			}
			d := l.PeekN(clk.Now(), "k", 1)
			if d.RetryAfter != 4*time.Millisecond || d.ResetAfter != 11*time.Millisecond {
				t.Fatalf("%v tier %v: after the cancelled wait %+v, want RetryAfter 4ms ResetAfter 11ms", eng, tier, d)
			}
		}
	}
}
