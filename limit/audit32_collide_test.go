package limit_test

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit32CollidingKeysLongDrainNeverEarly: several keys forced into
// shared cells (a count-min of 1 or 2 levels of 2 or 3 cells), long
// drains and idle gaps of up to three weeks across horizon sweeps: every
// key is never admitted before its own exact bucket, its RetryAfter and
// ResetAfter are never shorter than the exact bucket's and Remaining
// and TokensAt never above it (limit/doc.go, "Error side": "a collision
// can only deny a key early, never admit it past its own limit. The
// durations of a Decision ... only late, never early under collisions").
func TestAudit32CollidingKeysLongDrainNeverEarly(t *testing.T) {
	cases := []struct {
		lim   limit.Limit
		r     *big.Rat
		burst int
		opts  []limit.Option
	}{
		{5e-4, a32Rate(1, 2000), 1000, []limit.Option{limit.WithSize(1, 3)}},
		{3.0 / (1 << 20), a32Rate(3, 1<<20), 2, []limit.Option{limit.WithSize(1, 2), limit.WithMaxDebt(8)}},
		{limit.Limit(1.0 / 3000), a32Rate(1, 3000), 5, []limit.Option{limit.WithSize(2, 2), limit.WithRejectCost(1)}},
		{10, a32Rate(10, 1), 20, []limit.Option{limit.WithSize(2, 3)}},
		{limit.Every(3 * time.Second), a32Rate(1, 3), 7, []limit.Option{limit.WithSize(1, 2), limit.WithConservativeUpdate(true)}},
	}
	const keys = 6
	for ci, c := range cases {
		t.Run(fmt.Sprintf("%v/%d", float64(c.lim), c.burst), func(t *testing.T) {
			clk := limittest.NewFakeClock()
			clk.Set(a32Start)
			l, err := limit.New(c.lim, c.burst, append([]limit.Option{limit.WithClock(clk), limit.WithSeed(uint64(ci))}, c.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(34, uint64(ci)))
			rate, _ := c.r.Float64()
			tok := time.Duration(float64(time.Second) / rate)
			reject := big.NewRat(0, 1)
			if ci == 2 {
				reject = big.NewRat(1, 1)
			}
			m := make([]*a32Bucket, keys)
			for i := range m {
				m[i] = a32NewBucket(c.r, c.burst)
				m[i].at = clk.NowMillis()
			}
			maxDebt := new(big.Rat).SetFloat64(l.MaxDebt())
			for op := range 1500 {
				switch rng.IntN(12) {
				case 0:
					clk.Advance(time.Duration(rng.Int64N(int64(21 * a32Day))))
				case 1:
				default:
					clk.Advance(time.Duration(rng.Float64() * float64(tok) / 2).Truncate(time.Millisecond))
				}
				k := rng.IntN(keys)
				key := fmt.Sprint("key", k)
				b := m[k]
				b.advance(clk.NowMillis())
				if tokens := l.TokensAt(clk.Now(), key); tokens > a32Float(b.tokens())+float64(c.burst)*0x1p-48 {
					t.Fatalf("op %d: %s TokensAt %v above its exact bucket's %v", op, key, tokens, b.tokens().FloatString(9))
				}
				n := 1 + rng.IntN(c.burst)
				d := l.DecideN(clk.Now(), key, n)
				fits := b.fits(n)
				if d.Allowed && !fits {
					t.Fatalf("op %d: %s admitted n=%d before its exact bucket (debt %v)", op, key, n, b.debt.FloatString(6))
				}
				if d.Allowed {
					b.debt.Add(b.debt, big.NewRat(int64(n), 1))
				} else {
					if want := b.retryAfter(n); d.RetryAfter < want {
						t.Fatalf("op %d: %s RetryAfter %v before its exact bucket's %v", op, key, d.RetryAfter, want)
					}
					b.debt.Add(b.debt, reject)
					if b.debt.Cmp(maxDebt) > 0 {
						b.debt.Set(maxDebt)
					}
				}
				if want := time.Duration(b.msUntil(new(big.Rat))) * time.Millisecond; d.ResetAfter < want {
					t.Fatalf("op %d: %s ResetAfter %v before its exact bucket's %v", op, key, d.ResetAfter, want)
				}
				if d.Remaining > b.remaining() {
					t.Fatalf("op %d: %s Remaining %d above its exact bucket's %d", op, key, d.Remaining, b.remaining())
				}
			}
		})
	}
}

// a32TimeBucket is the exact bucket of the debt held as time (limit/doc.go,
// "Tiers and changing the limit"): a policy (r, b) admits n iff
// debt + n/r <= b/r (in seconds), and the debt drains 1 s a second.
type a32TimeBucket struct {
	debt *big.Rat // seconds
	at   int64
}

func (b *a32TimeBucket) advance(ms int64) {
	if ms > b.at {
		b.debt.Sub(b.debt, big.NewRat(ms-b.at, 1000))
		if b.debt.Sign() < 0 {
			b.debt.SetInt64(0)
		}
		b.at = ms
	}
}

func (b *a32TimeBucket) fits(r *big.Rat, burst, n int) bool {
	x := new(big.Rat).Add(b.debt, new(big.Rat).Quo(big.NewRat(int64(n), 1), r))
	return x.Cmp(new(big.Rat).Quo(big.NewRat(int64(burst), 1), r)) <= 0
}

func (b *a32TimeBucket) retryAfter(r *big.Rat, burst, n int) time.Duration {
	need := new(big.Rat).Sub(new(big.Rat).Add(b.debt, new(big.Rat).Quo(big.NewRat(int64(n), 1), r)), new(big.Rat).Quo(big.NewRat(int64(burst), 1), r))
	if need.Sign() <= 0 {
		return 0
	}
	need.Mul(need, big.NewRat(1000, 1))
	c := new(big.Int).Quo(need.Num(), need.Denom())
	if !need.IsInt() {
		c.Add(c, big.NewInt(1))
	}
	return time.Duration(c.Int64()) * time.Millisecond
}

// TestAudit32PoliciesLongDrain: an inexact long-drain limiter
// (limit.New(5e-4, 1000, WithMaxDebt(4000)): 92 days of MaxDebt, drain 1
// unit per ms) with a Tier at a quarter of its rate and SetLimit changes
// on the way, over weeks and horizon sweeps: the Tier is never admitted
// before its own bucket of the debt as time and its RetryAfter is never
// shorter; for every policy a retry at t+RetryAfter is admitted while one
// 1 ms earlier is not (limit/doc.go, "Exactness of a policy": "An inexact
// policy is never early against its own bucket, and its RetryAfter still
// predicts its own next decision to the millisecond").
func TestAudit32PoliciesLongDrain(t *testing.T) {
	testsize.Serial(t)
	clk := limittest.NewFakeClock()
	clk.Set(a32Start)
	l, err := limit.New(5e-4, 1000, limit.WithClock(clk), limit.WithMaxDebt(4000), limit.WithSeed(5), limit.WithSize(4, 2048))
	if err != nil {
		t.Fatal(err)
	}
	tier, err := l.Tier("quarter", 1.25e-4, 1000)
	if err != nil {
		t.Fatal(err)
	}
	type pol struct {
		d     a32Decider
		r     *big.Rat
		burst int
	}
	pols := []pol{{l, a32Rate(1, 2000), 1000}, {tier, a32Rate(1, 8000), 1000}}
	setLimits := []struct {
		lim limit.Limit
		r   *big.Rat
	}{{2.5e-4, a32Rate(1, 4000)}, {1e-3, a32Rate(1, 1000)}, {5e-4, a32Rate(1, 2000)}, {limit.Limit(1.0 / 3000), a32Rate(1, 3000)}}
	rng := rand.New(rand.NewPCG(35, 1))
	m := &a32TimeBucket{debt: new(big.Rat), at: clk.NowMillis()}
	lastTraffic := clk.NowMillis()
	step := func(to int64) {
		for lastTraffic+6*3600*1000 < to {
			lastTraffic += 6*3600*1000 + rng.Int64N(5)
			clk.Set(lastTraffic)
			l.AllowN(clk.Now(), "other", 1)
		}
		clk.Set(to)
	}
	for op := range 300 {
		if op%60 == 59 {
			s := setLimits[(op/60)%len(setLimits)]
			if err := l.SetLimit(s.lim); err != nil {
				t.Fatal(err)
			}
			pols[0].r = s.r
		}
		if rng.IntN(10) == 0 {
			step(clk.NowMillis() + rng.Int64N(int64(20*a32Day/time.Millisecond)))
		} else {
			step(clk.NowMillis() + rng.Int64N(4000*1000))
		}
		now := clk.NowMillis()
		m.advance(now)
		p := pols[rng.IntN(len(pols))]
		n := 1 + rng.IntN(p.burst)
		if rng.IntN(2) == 0 {
			n = 1 + rng.IntN(5)
		}
		d := p.d.DecideN(clk.Now(), "k", n)
		// The never-early checks are the Tier's only: New's policy,
		// whose unit is rounded up, is early against its bucket on a key
		// that holds the Tier's debt (TestAudit32FindingNewPolicyEarlyAfterTierDebt).
		oracle := p.d == a32Decider(tier)
		if d.Allowed {
			if oracle && !m.fits(p.r, p.burst, n) {
				t.Fatalf("op %d: %s admitted n=%d before its bucket (debt %v s)", op, d.Policy, n, m.debt.FloatString(3))
			}
			m.debt.Add(m.debt, new(big.Rat).Quo(big.NewRat(int64(n), 1), p.r))
			continue
		}
		if want := m.retryAfter(p.r, p.burst, n); oracle && d.RetryAfter < want {
			t.Fatalf("op %d: %s RetryAfter %v before its bucket's %v", op, d.Policy, d.RetryAfter, want)
		}
		retry := now + d.RetryAfter.Milliseconds()
		step(retry - 1)
		if p.d.PeekN(clk.Now(), "k", n).Allowed {
			t.Fatalf("op %d: %s admitted 1 ms before RetryAfter %v", op, d.Policy, d.RetryAfter)
		}
		step(retry)
		m.advance(retry)
		if !p.d.AllowN(clk.Now(), "k", n) {
			t.Fatalf("op %d: %s denied at RetryAfter %v (n=%d)", op, d.Policy, d.RetryAfter, n)
		}
		if oracle && !m.fits(p.r, p.burst, n) {
			t.Fatalf("op %d: %s admitted at RetryAfter before its bucket", op, d.Policy)
		}
		m.debt.Add(m.debt, new(big.Rat).Quo(big.NewRat(int64(n), 1), p.r))
	}
}

// TestAudit32ConcurrentLongDrainNoOverAdmit: strict decisions racing on
// one key of an inexact long-drain count-min limiter never admit past
// the burst (limit/doc.go: "Under contention on one key, strict
// decisions never admit past the burst on either engine"), at several
// GOMAXPROCS, at a fake time past a horizon sweep.
func TestAudit32ConcurrentLongDrainNoOverAdmit(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		for _, lim := range []limit.Limit{5e-4, 3.0 / (1 << 20), limit.Limit(3.0 / 64)} {
			clk := limittest.NewFakeClock()
			clk.Set(a32Start)
			const burst = 50
			l, err := limit.New(lim, burst, limit.WithClock(clk), limit.WithSize(4, 1024))
			if err != nil {
				t.Fatal(err)
			}
			for round := range 3 {
				clk.Set(a32Start + int64(round+1)*(a32SweepDue+7))
				tokens := l.TokensAt(clk.Now(), "hot")
				var admitted atomic.Int64
				var wg sync.WaitGroup
				workers := 2 * runtime.GOMAXPROCS(0)
				for range workers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for range 40 {
							if l.AllowN(clk.Now(), "hot", 1) {
								admitted.Add(1)
							}
						}
					}()
				}
				wg.Wait()
				if got := admitted.Load(); float64(got) > tokens {
					t.Fatalf("rate %v round %d: %d admitted with %v tokens", float64(lim), round, got, tokens)
				}
			}
		}
	})
}
