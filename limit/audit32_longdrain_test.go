package limit_test

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// a32Bucket is the exact rational token bucket in debt form: debt in
// tokens, drained at rate per second, at whole ms.
type a32Bucket struct {
	rate  *big.Rat // tokens per ms
	burst *big.Rat
	debt  *big.Rat
	at    int64
}

func a32NewBucket(rate *big.Rat, burst int) *a32Bucket {
	return &a32Bucket{rate: new(big.Rat).Quo(rate, big.NewRat(1000, 1)), burst: big.NewRat(int64(burst), 1), debt: new(big.Rat)}
}

func (b *a32Bucket) advance(ms int64) {
	if ms <= b.at {
		return
	}
	b.debt.Sub(b.debt, new(big.Rat).Mul(b.rate, big.NewRat(ms-b.at, 1)))
	if b.debt.Sign() < 0 {
		b.debt.SetInt64(0)
	}
	b.at = ms
}

func (b *a32Bucket) fits(n int) bool {
	return new(big.Rat).Add(b.debt, big.NewRat(int64(n), 1)).Cmp(b.burst) <= 0
}

// msUntil returns the least whole ms after which the debt is at most target.
func (b *a32Bucket) msUntil(target *big.Rat) int64 {
	need := new(big.Rat).Sub(b.debt, target)
	if need.Sign() <= 0 {
		return 0
	}
	q := new(big.Rat).Quo(need, b.rate)
	c := new(big.Int).Quo(q.Num(), q.Denom())
	if !q.IsInt() {
		c.Add(c, big.NewInt(1))
	}
	return c.Int64()
}

func (b *a32Bucket) retryAfter(n int) time.Duration {
	return time.Duration(b.msUntil(new(big.Rat).Sub(b.burst, big.NewRat(int64(n), 1)))) * time.Millisecond
}

func (b *a32Bucket) tokens() *big.Rat { return new(big.Rat).Sub(b.burst, b.debt) }

func (b *a32Bucket) remaining() int {
	t := b.tokens()
	if t.Sign() <= 0 {
		return 0
	}
	return int(new(big.Int).Quo(t.Num(), t.Denom()).Int64())
}

// a32Float is the float64 nearest x.
func a32Float(x *big.Rat) float64 { f, _ := x.Float64(); return f }

// a32Rate is the exact rate of a Limit written as p/q.
func a32Rate(p, q int64) *big.Rat { return big.NewRat(p, q) }

// a32Drive drives key "k" of l (on clk) through ops requests against the
// exact bucket m, with other keys' traffic every 6 h (so that horizon
// sweeps happen whenever due), gaps drawn from gap, and checks the
// promises that hold for any limiter (inexact included): never admitted
// before the exact bucket, RetryAfter never before the exact bucket's,
// TokensAt never above the truth, and a retry at t+RetryAfter admitted
// while one 1 ms earlier is not. exact: also every number equals the
// exact bucket's.
func a32Drive(t *testing.T, l *limit.Limiter, clk *limittest.FakeClock, m *a32Bucket, rng *rand.Rand, ops int, gap func() time.Duration, exact bool) {
	t.Helper()
	burst := l.Burst()
	lastTraffic := clk.NowMillis()
	step := func(to int64) { // move the clock to to, with the traffic on the way
		for lastTraffic+6*3600*1000 < to {
			lastTraffic += 6*3600*1000 + rng.Int64N(7)
			clk.Set(lastTraffic)
			l.AllowN(clk.Now(), fmt.Sprint("other", rng.IntN(4)), 1)
		}
		clk.Set(to)
	}
	m.at = clk.NowMillis()
	for i := range ops {
		step(clk.NowMillis() + gap().Milliseconds())
		now := clk.NowMillis()
		m.advance(now)
		// One-sided ("Error side": a key's read debt is at least its own
		// debt), up to the float64 rounding of burst - debt/unit (a few
		// ulps of the burst).
		if tok, truth := l.TokensAt(clk.Now(), "k"), m.tokens(); tok > a32Float(truth)+float64(burst)*0x1p-48 {
			t.Fatalf("op %d: TokensAt %v above the exact bucket's %v", i, tok, m.tokens().FloatString(9))
		}
		n := 1 + rng.IntN(burst)
		if rng.IntN(3) == 0 {
			n = 1
		}
		d := l.DecideN(clk.Now(), "k", n)
		fits := m.fits(n)
		if d.Allowed && !fits {
			t.Fatalf("op %d: admitted n=%d before the exact bucket (debt %v of %d)", i, n, m.debt.FloatString(6), burst)
		}
		if exact && d.Allowed != fits {
			t.Fatalf("op %d: Allowed %v, exact bucket %v (n=%d, debt %v)", i, d.Allowed, fits, n, m.debt.FloatString(6))
		}
		if d.Allowed {
			m.debt.Add(m.debt, big.NewRat(int64(n), 1))
		}
		if exact {
			want := a32Want(m, n, d.Allowed)
			got := [4]time.Duration{d.RetryAfter, d.ResetAfter, d.NextAfter, time.Duration(d.Remaining)}
			if got != want {
				t.Fatalf("op %d (n=%d allowed=%v): RetryAfter, ResetAfter, NextAfter, Remaining = %v, exact bucket %v", i, n, d.Allowed, got, want)
			}
		}
		if d.Allowed {
			continue
		}
		if want := m.retryAfter(n); d.RetryAfter < want {
			t.Fatalf("op %d: RetryAfter %v before the exact bucket's %v", i, d.RetryAfter, want)
		}
		if rng.IntN(2) == 0 {
			continue
		}
		retry := now + d.RetryAfter.Milliseconds()
		step(retry - 1)
		if l.PeekN(clk.Now(), "k", n).Allowed {
			t.Fatalf("op %d: admitted 1 ms before RetryAfter %v (n=%d)", i, d.RetryAfter, n)
		}
		step(retry)
		m.advance(retry)
		if !l.AllowN(clk.Now(), "k", n) {
			t.Fatalf("op %d: denied at RetryAfter %v (n=%d)", i, d.RetryAfter, n)
		}
		if !m.fits(n) {
			t.Fatalf("op %d: admitted at RetryAfter %v before the exact bucket", i, d.RetryAfter)
		}
		m.debt.Add(m.debt, big.NewRat(int64(n), 1))
	}
}

// a32Want is what an exact limiter's Decision says after a decision of n
// (allowed: debt already includes n): RetryAfter, ResetAfter, NextAfter,
// Remaining.
func a32Want(m *a32Bucket, n int, allowed bool) [4]time.Duration {
	var w [4]time.Duration
	if !allowed {
		w[0] = max(m.retryAfter(n), time.Millisecond)
	}
	w[1] = time.Duration(m.msUntil(new(big.Rat))) * time.Millisecond
	rem := m.remaining()
	w[3] = time.Duration(rem)
	if m.debt.Sign() > 0 {
		w[2] = time.Duration(m.msUntil(new(big.Rat).Sub(m.burst, big.NewRat(int64(rem+1), 1)))) * time.Millisecond
	}
	return w
}

// TestAudit32LongDrainInexactDrainOne: inexact count-min limiters whose
// drain is one unit per ms (limit.New(5e-4, 1000): a debt that takes 23
// days to drain; 1e-3 per second; 1/3000 per second, a short fraction
// beyond 2^24 units; a rate that is no short fraction), driven for weeks
// across many horizon sweeps: never early against the exact bucket, and
// RetryAfter predicts the next decision to the ms (limit/doc.go,
// "Exactness": "Otherwise decisions are never earlier than the exact
// bucket's ... a retry at t+RetryAfter is admitted and one 1 ms earlier
// is not").
func TestAudit32LongDrainInexactDrainOne(t *testing.T) {
	testsize.Serial(t)
	cases := []struct {
		lim   limit.Limit
		r     *big.Rat
		burst int
		opts  []limit.Option
	}{
		// Small sizes: the sweeps of the default size are slow, under
		// qemu as they were under -race before this test was Serial
		// (TestAudit32FindingRetryAfterEarlyAcrossSweep runs one).
		{5e-4, a32Rate(1, 2000), 1000, []limit.Option{limit.WithSize(4, 2048)}},
		{5e-4, a32Rate(1, 2000), 1000, []limit.Option{limit.WithEngine(limit.CountMin), limit.WithSize(4, 1024)}},
		{1e-3, a32Rate(1, 1000), 1000, []limit.Option{limit.WithRejectCost(3), limit.WithSize(4, 2048)}},
		{limit.Limit(1.0 / 3000), a32Rate(1, 3000), 5, nil},
		{limit.Limit(math.Pi * 1e-3), new(big.Rat).SetFloat64(math.Pi * 1e-3), 50, nil},
		{limit.Limit(math.Sqrt(2)), new(big.Rat).SetFloat64(math.Sqrt(2)), 70000, []limit.Option{limit.WithMaxDebt(1 << 20), limit.WithSize(4, 2048)}},
	}
	for ci, c := range cases {
		t.Run(fmt.Sprintf("%v/%d/%d", float64(c.lim), c.burst, ci), func(t *testing.T) {
			clk := limittest.NewFakeClock()
			clk.Set(a32Start)
			l, err := limit.New(c.lim, c.burst, append([]limit.Option{limit.WithClock(clk), limit.WithSeed(uint64(ci))}, c.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			if l.Exact() || l.Engine() != limit.CountMin {
				t.Fatalf("want an inexact count-min limiter; Exact %v, Engine %v", l.Exact(), l.Engine())
			}
			rng := rand.New(rand.NewPCG(32, uint64(ci)))
			rate, _ := c.r.Float64()
			tok := time.Duration(float64(time.Second) / rate)
			if c.burst > 1000 {
				tok *= time.Duration(c.burst / 1000)
			}
			m := a32NewBucket(c.r, c.burst)
			a32Drive(t, l, clk, m, rng, 300, func() time.Duration {
				switch rng.IntN(10) {
				case 0:
					return time.Duration(rng.Int64N(int64(21 * a32Day)))
				case 1:
					return time.Duration(rng.Int64N(1000)) * time.Millisecond
				}
				return time.Duration(rng.Float64() * 2 * float64(tok)).Truncate(time.Millisecond)
			}, false)
			t.Logf("simulated %.1f days", float64(clk.NowMillis()-a32Start)/864e5)
		})
	}
}

// TestAudit32ExactCountMinLongIdle: exact count-min limiters (every
// decision and duration the rational bucket's, limit/doc.go
// "Exactness") across idle gaps from ms to weeks, over many horizon
// sweeps and re-bases: Allowed, RetryAfter, ResetAfter, NextAfter and
// Remaining all equal the exact bucket's.
func TestAudit32ExactCountMinLongIdle(t *testing.T) {
	testsize.Serial(t)
	cases := []struct {
		lim   limit.Limit
		r     *big.Rat
		burst int
	}{
		{10, a32Rate(10, 1), 20},
		{limit.Every(3 * time.Second), a32Rate(1, 3), 5},
		{limit.Limit(1000.0 / 3600), a32Rate(1000, 3600), 100},
		{limit.Every(7 * time.Millisecond), a32Rate(1000, 7), 50},
		{3.7, a32Rate(37, 10), 10},
		{limit.Limit(1.0 / 60), a32Rate(1, 60), 139},
	}
	for ci, c := range cases {
		if !testsize.Keep(ci, testsize.Sample(1, 2, 4)) {
			continue
		}
		t.Run(fmt.Sprintf("%v/%d", float64(c.lim), c.burst), func(t *testing.T) {
			clk := limittest.NewFakeClock()
			clk.Set(a32Start + int64(ci)*12345)
			opts := []limit.Option{limit.WithClock(clk), limit.WithEngine(limit.CountMin), limit.WithSeed(uint64(ci))}
			if ci > 0 || testsize.Emulated() {
				opts = append(opts, limit.WithSize(4, 4096)) // the default size for the first only, natively: sweeps cost
			}
			l, err := limit.New(c.lim, c.burst, opts...)
			if err != nil {
				t.Fatal(err)
			}
			if !l.Exact() {
				t.Fatalf("want an exact limiter")
			}
			rng := rand.New(rand.NewPCG(33, uint64(ci)))
			rate, _ := c.r.Float64()
			tok := time.Duration(float64(time.Second) / rate)
			m := a32NewBucket(c.r, c.burst)
			a32Drive(t, l, clk, m, rng, 400, func() time.Duration {
				switch rng.IntN(8) {
				case 0:
					return time.Duration(rng.Int64N(int64(30 * a32Day)))
				case 1:
					return time.Duration(rng.Int64N(5)) * time.Millisecond
				}
				return time.Duration(rng.Float64() * 2 * float64(tok)).Truncate(time.Millisecond)
			}, true)
		})
	}
}
