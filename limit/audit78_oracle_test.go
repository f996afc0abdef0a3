package limit_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// a78Pol is a policy: rate num/den per second, burst b.
type a78Pol struct {
	num, den int64
	b        int
}

func (p a78Pol) limit() limit.Limit {
	if p.num == 1000 && p.den > 1 || p.den > 1 && p.num == 1 {
		return limit.Every(time.Duration(p.den) * time.Second / time.Duration(p.num))
	}
	return limit.Limit(float64(p.num) / float64(p.den))
}
func (p a78Pol) c() *big.Rat       { return big.NewRat(1000*p.den, p.num) } // ms per token
func (p a78Pol) burstMs() *big.Rat { return new(big.Rat).Mul(p.c(), big.NewRat(int64(p.b), 1)) }
func (p a78Pol) String() string    { return fmt.Sprintf("%d/%ds b%d", p.num, p.den, p.b) }

func a78Ceil(x *big.Rat) int64 {
	q, m := new(big.Int).QuoRem(x.Num(), x.Denom(), new(big.Int))
	if m.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	return q.Int64()
}
func a78Floor(x *big.Rat) int64         { return new(big.Int).Div(x.Num(), x.Denom()).Int64() }
func a78ms(x int64) time.Duration       { return time.Duration(x) * time.Millisecond }
func a78add(a, b *big.Rat) *big.Rat     { return new(big.Rat).Add(a, b) }
func a78sub(a, b *big.Rat) *big.Rat     { return new(big.Rat).Sub(a, b) }
func a78mul(a *big.Rat, n int) *big.Rat { return new(big.Rat).Mul(a, big.NewRat(int64(n), 1)) }

// a78Key is one key's exact debt, in ms of drain.
type a78Key struct {
	d  *big.Rat
	at int64
}

func (k *a78Key) advance(ms int64) {
	if ms > k.at {
		k.d = a78sub(k.d, big.NewRat(ms-k.at, 1))
		if k.d.Sign() < 0 {
			k.d = new(big.Rat)
		}
		k.at = ms
	}
}

// want returns the Decision of the exact bucket for n under p on debt d,
// and the debt after (commit: debited if admitted; peek: as if).
func a78Want(p a78Pol, d *big.Rat, n int) (limit.Decision, *big.Rat) {
	c := p.c()
	w := limit.Decision{Limit: p.limit(), Burst: p.b}
	nc := a78mul(c, n)
	after := d
	switch {
	case n > p.b:
		w.Never, w.RetryAfter = true, limit.InfDuration
	case a78add(d, nc).Cmp(p.burstMs()) <= 0:
		w.Allowed = true
		after = a78add(d, nc)
	default:
		w.RetryAfter = a78ms(max(a78Ceil(a78sub(a78add(d, nc), p.burstMs())), 1))
	}
	rem := a78Floor(new(big.Rat).Quo(a78sub(p.burstMs(), after), c))
	w.Remaining = int(max(rem, 0))
	if after.Sign() > 0 {
		w.ResetAfter = a78ms(a78Ceil(after))
		x := a78sub(a78add(after, a78mul(c, w.Remaining+1)), p.burstMs())
		w.NextAfter = a78ms(max(a78Ceil(x), 0))
	}
	return w, after
}

// a78Ctx is a context whose deadline is on the fake clock and which is
// never done unless cancelled.
type a78Ctx struct {
	context.Context
	dl time.Time
}

func (c a78Ctx) Deadline() (time.Time, bool) { return c.dl, true }

type a78Cfg struct {
	name   string
	pol    a78Pol
	maxDbt int
	e      limit.Engine
	alts   []a78Pol // policies SetLimit/SetBurst/Tier pick from
}

func a78Configs() []a78Cfg {
	var out []a78Cfg
	for _, e := range []limit.Engine{limit.Buckets, limit.CountMin} {
		out = append(out,
			a78Cfg{name: "10/s", pol: a78Pol{10, 1, 20}, maxDbt: 80, e: e,
				alts: []a78Pol{{10, 1, 20}, {5, 1, 20}, {20, 1, 20}, {5, 2, 20}, {10, 1, 5}, {10, 1, 40}, {5, 1, 3}, {20, 1, 60}, {5, 2, 30}, {10, 3, 20}, {10, 7, 10}, {30, 1, 7}}},
			a78Cfg{name: "every300ms", pol: a78Pol{1000, 300, 10}, maxDbt: 40, e: e,
				alts: []a78Pol{{1000, 300, 10}, {1000, 600, 10}, {1000, 150, 10}, {1000, 1200, 10}, {1000, 300, 2}, {1000, 300, 40}, {1000, 1200, 11}, {1000, 900, 10}, {1000, 2100, 5}}},
		)
	}
	return out
}

// A random schedule of ReserveN (Limiter and Tier), Cancel of the latest
// reservation (nothing written since), DecideN, PeekN, TokensAt, WaitN
// (success, cancellation mid-wait, deadline at and 1 ms short of the
// wait), SetLimit and SetBurst while the key holds debt, against the
// exact bucket of the package doc's "Tiers and changing the limit" (debt
// held as time; a policy (r, b) charges 1000/r ms a token against b x
// 1000/r ms; MaxDebt x 1000/R ms at most), on both engines, key alone.
func TestAudit78OracleReserveCancelSetLimitWait(t *testing.T) {
	for _, cfg := range a78Configs() {
		t.Run(cfg.name+"/"+cfg.e.String(), func(t *testing.T) {
			for seed := uint64(0); seed < 8; seed++ {
				a78Run(t, cfg, seed)
			}
		})
	}
}

func a78Run(t *testing.T, cfg a78Cfg, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 78))
	clk := limittest.NewFakeClock()
	now := a78Start
	clk.Set(now)
	l, err := limit.New(cfg.pol.limit(), cfg.pol.b, limit.WithClock(clk), limit.WithEngine(cfg.e), limit.WithSeed(seed), limit.WithMaxDebt(float64(cfg.maxDbt)))
	if err != nil {
		t.Fatal(err)
	}
	if !l.Exact() {
		t.Fatalf("not exact")
	}
	maxMs := a78mul(cfg.pol.c(), cfg.maxDbt)
	cur := cfg.pol
	key := fmt.Sprintf("key%d", seed)
	k := &a78Key{d: new(big.Rat), at: now}
	tiers := map[int]*limit.Tier{}
	type resv struct {
		r      *limit.Reservation
		before *big.Rat // the debt before the take
		at     int64
		full   bool // filled to MaxDebt
	}
	var top *resv // the latest reservation, cancellable while nothing else wrote
	var ops [9]int
	defer func() {
		if sum := ops[0] + ops[1] + ops[2] + ops[3] + ops[4] + ops[5] + ops[6] + ops[7] + ops[8]; sum < 200 {
			t.Errorf("seed %d: only %d exact steps %v", seed, sum, ops)
		}
	}()
	var log []string
	fail := func(format string, args ...any) {
		t.Helper()
		tail := log
		if len(tail) > 10 {
			tail = tail[len(tail)-10:]
		}
		t.Fatalf("seed %d: "+format+"\nlast ops: %q", append([]any{seed}, append(args, tail)...)...)
	}
	for step := 0; step < 300; step++ {
		switch x := rng.IntN(10); {
		case x < 4:
			now += int64(rng.IntN(3))
		case x < 9:
			now += int64(rng.IntN(int(a78Ceil(cur.burstMs())) + 2))
		default:
			now += int64(rng.IntN(20000))
		}
		clk.Set(now)
		k.advance(now)
		tm := clk.Now()
		pol := cur
		var tier *limit.Tier
		exact := l.Exact()
		if rng.IntN(4) == 0 {
			i := rng.IntN(len(cfg.alts))
			if tiers[i] == nil {
				tr, err := l.Tier(fmt.Sprintf("t%d", i), cfg.alts[i].limit(), cfg.alts[i].b)
				if err == nil {
					tiers[i] = tr
				}
			}
			if tiers[i] != nil {
				tier, pol, exact = tiers[i], cfg.alts[i], tiers[i].Exact()
			}
		}
		n := 1 + rng.IntN(pol.b+1)
		op := rng.IntN(9)
		if !exact {
			// An inexact policy (30/s on 10/s) is not this oracle's:
			// only change the policy back.
			if tier != nil || rng.IntN(2) == 0 {
				continue
			}
			op = 6
		}
		ops[op]++
		log = append(log, fmt.Sprintf("t=%d op%d n=%d pol=%v tier=%v debt=%v", now-a78Start, op, n, pol, tier != nil, k.d.FloatString(3)))
		switch op {
		case 0, 1: // DecideN / PeekN
			commit := op == 0
			var got limit.Decision
			switch {
			case tier != nil && commit:
				got = tier.DecideN(tm, key, n)
			case tier != nil:
				got = tier.PeekN(tm, key, n)
			case commit:
				got = l.DecideN(tm, key, n)
			default:
				got = l.PeekN(tm, key, n)
			}
			want, after := a78Want(pol, k.d, n)
			got.Policy = ""
			if got != want {
				fail("commit=%v DecideN/PeekN(%d) under %v on debt %v ms:\n got %+v\nwant %+v", commit, n, pol, k.d.FloatString(3), got, want)
			}
			if commit && want.Allowed {
				k.d, top = after, nil
			}
		case 2, 3: // ReserveN
			var r *limit.Reservation
			if tier != nil {
				r = tier.ReserveN(tm, key, n)
			} else {
				r = l.ReserveN(tm, key, n)
			}
			after := a78add(k.d, a78mul(pol.c(), n))
			wok := n <= pol.b && after.Cmp(maxMs) <= 0
			wdelay := limit.InfDuration
			if wok {
				wdelay = a78ms(max(a78Ceil(a78sub(after, pol.burstMs())), 0))
			}
			if r.OK() != wok || r.DelayFrom(tm) != wdelay || r.Delay() != wdelay {
				fail("ReserveN(%d) under %v on debt %v: OK %v DelayFrom %v Delay %v; want %v %v", n, pol, k.d.FloatString(3), r.OK(), r.DelayFrom(tm), r.Delay(), wok, wdelay)
			}
			if wok {
				top = &resv{r: r, before: k.d, at: now, full: after.Cmp(maxMs) == 0}
				k.d = after
			} else {
				r.Cancel() // not OK: does nothing
			}
		case 4: // Cancel the latest reservation
			if top == nil {
				continue
			}
			top.r.Cancel()
			if !top.full {
				b := &a78Key{d: top.before, at: top.at}
				b.advance(now)
				k.d = b.d
			}
			top.r.Cancel() // idempotent
			top = nil
			fallthrough
		case 5: // TokensAt
			var got float64
			if tier != nil {
				got = tier.TokensAt(tm, key)
			} else {
				got = l.TokensAt(tm, key)
			}
			want, _ := new(big.Rat).Sub(big.NewRat(int64(pol.b), 1), new(big.Rat).Quo(k.d, pol.c())).Float64()
			if math.Abs(got-want) > 1e-6 {
				fail("TokensAt under %v = %v; want %v (debt %v ms)", pol, got, want, k.d.FloatString(3))
			}
		case 6: // SetLimit / SetBurst
			alt := cfg.alts[rng.IntN(len(cfg.alts))]
			var err error
			np := cur
			if rng.IntN(2) == 0 {
				np.num, np.den = alt.num, alt.den
				err = l.SetLimit(alt.limit())
			} else {
				np.b = alt.b
				err = l.SetBurst(alt.b)
			}
			wantErr := np.burstMs().Cmp(maxMs) > 0
			var mde *limit.MaxDebtError
			if wantErr != errors.As(err, &mde) || (!wantErr && err != nil) {
				fail("SetLimit/SetBurst to %v: err %v; want a MaxDebtError: %v", np, err, wantErr)
			}
			if err == nil {
				cur = np
				if l.Limit() != np.limit() || l.Burst() != np.b {
					fail("after Set: Limit %v Burst %d; want %v", l.Limit(), l.Burst(), np)
				}
			}
		case 7, 8: // WaitN (Limiter's or Tier's)
			after := a78add(k.d, a78mul(pol.c(), n))
			if n > pol.b || after.Cmp(maxMs) > 0 {
				continue // the refusals are not this test's subject
			}
			wait := max(a78Ceil(a78sub(after, pol.burstMs())), 0)
			mode := rng.IntN(4) // 0 run out, 1 cancel mid-wait, 2 deadline == wait, 3 deadline 1 ms short
			if wait == 0 {
				mode = 0
			}
			base, cancel := context.WithCancel(context.Background())
			var ctx context.Context = base
			if mode >= 2 {
				dl := now + wait
				if mode == 3 {
					dl--
				}
				ctx = a78Ctx{Context: base, dl: time.UnixMilli(dl)}
			}
			done := make(chan error, 1)
			go func() {
				if tier != nil {
					done <- tier.WaitN(ctx, key, n)
				} else {
					done <- l.WaitN(ctx, key, n)
				}
			}()
			var err error
			switch mode {
			case 3:
				err = <-done
				if !errors.Is(err, limit.ErrPastDeadline) || !errors.Is(err, context.DeadlineExceeded) {
					fail("WaitN(%d) with a deadline 1 ms short of its %d ms wait: %v; want ErrPastDeadline", n, wait, err)
				}
			case 1:
				clk.BlockUntilTimers(1)
				part := rng.Int64N(wait)
				now += part
				clk.Set(now)
				cancel()
				err = <-done
				if !errors.Is(err, context.Canceled) {
					fail("WaitN(%d) cancelled %d ms into its %d ms wait: %v; want context.Canceled", n, part, wait, err)
				}
				// All of it back: as if never taken.
				k.advance(now)
			default:
				if wait > 0 {
					clk.BlockUntilTimers(1)
					now += wait
					clk.Set(now)
				}
				err = <-done
				if err != nil {
					fail("WaitN(%d) (mode %d) after its %d ms wait: %v", n, mode, wait, err)
				}
				k.d = after
				k.advance(now)
			}
			cancel()
			top = nil
			log = append(log, fmt.Sprintf("  wait mode %d wait %d -> %v", mode, wait, err))
			got := l.TokensAt(clk.Now(), key)
			want, _ := new(big.Rat).Sub(big.NewRat(int64(cur.b), 1), new(big.Rat).Quo(k.d, cur.c())).Float64()
			if l.Exact() && math.Abs(got-want) > 1e-6 {
				fail("after WaitN (mode %d): TokensAt %v under %v; want %v", mode, got, cur, want)
			}
		}
	}
}

// The same schedule near the Buckets engine's limits: MaxDebt close to
// its 61,438-tick span (1000/s with MaxDebt 61,000; Every(2ms) with
// MaxDebt 30,700), several ticks to the millisecond (2000/s: a token of
// one tick, a millisecond of two; 16000/s), where a reservation is given
// back in many steps.
func TestAudit78OracleNearBucketLimits(t *testing.T) {
	cfgs := []a78Cfg{
		{name: "1000/s-span", pol: a78Pol{1000, 1, 30000}, maxDbt: 61000,
			alts: []a78Pol{{1000, 1, 30000}, {500, 1, 30000}, {1000, 1, 61000}, {250, 1, 15000}, {2000, 1, 100}}},
		{name: "every2ms-span", pol: a78Pol{1000, 2, 15000}, maxDbt: 30700,
			alts: []a78Pol{{1000, 2, 15000}, {1000, 4, 7000}, {1000, 1, 30000}, {1000, 2, 30700}}},
		{name: "2000/s", pol: a78Pol{2000, 1, 100}, maxDbt: 200,
			alts: []a78Pol{{2000, 1, 100}, {1000, 1, 100}, {4000, 1, 50}, {500, 1, 50}}},
		{name: "16000/s", pol: a78Pol{16000, 1, 400}, maxDbt: 1600,
			alts: []a78Pol{{16000, 1, 400}, {8000, 1, 400}, {4000, 1, 400}}},
	}
	for _, c := range cfgs {
		for _, e := range []limit.Engine{limit.Buckets, limit.CountMin} {
			c.e = e
			t.Run(c.name+"/"+e.String(), func(t *testing.T) {
				if _, err := limit.New(c.pol.limit(), c.pol.b, limit.WithEngine(e), limit.WithMaxDebt(float64(c.maxDbt))); err != nil {
					t.Skip(err)
				}
				for seed := uint64(0); seed < 4; seed++ {
					a78Run(t, c, seed)
				}
			})
		}
	}
}
