package limit_test

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// a103Cfg is a Multi whose windows are one limiter (k of them with one
// key), possibly with an Inf window or another limiter between them.
type a103Cfg struct {
	rate  limit.Limit
	burst int
	eng   limit.Engine
	shape string // "ll", "lll", "l-inf-l", "l-o-l"
	opts  []limit.Option
	rej   bool // opts hold a RejectCost
}

// k is how many windows are the limiter with the key.
func (c a103Cfg) k() int {
	if c.shape == "lll" {
		return 3
	}
	return 2
}

type a103Step struct {
	adv time.Duration
	n   int
}

func (c a103Cfg) build() (*limit.Multi, *limittest.FakeClock, error) {
	clk := limittest.NewFakeClock()
	clk.Set(1 << 30)
	o := append([]limit.Option{limit.WithClock(clk), limit.WithSeed(7), limit.WithEngine(c.eng), limit.WithCapacity(16, 0.01)}, c.opts...)
	l, err := limit.New(c.rate, c.burst, o...)
	if err != nil {
		return nil, nil, err
	}
	var ws []*limit.Limiter
	switch c.shape {
	case "ll":
		ws = []*limit.Limiter{l, l}
	case "lll":
		ws = []*limit.Limiter{l, l, l}
	case "l-inf-l":
		ws = []*limit.Limiter{l, limit.MustNew(limit.Inf, 1), l}
	case "l-o-l":
		ws = []*limit.Limiter{l, limit.MustNew(c.rate*4, c.burst, limit.WithClock(clk)), l}
	}
	m, err := limit.NewMulti(ws...)
	return m, clk, err
}

func (c a103Cfg) replay(steps []a103Step, at time.Duration, n int) limit.Decision {
	m, clk, _ := c.build()
	for _, s := range steps {
		clk.Advance(s.adv)
		m.DecideKeys(clk.Now(), s.n, "k")
	}
	clk.Advance(at)
	return m.DecideKeys(clk.Now(), n, "k")
}

// TestAudit103LimitSharedMultiSelfConsistent (passing check): a Multi
// holding one limiter as k windows with one key, on both engines, exact
// and inexact rates (pi, 7.3, 0.944: count-min units rounded to m
// bits), odd bursts, with an Inf window or another limiter between, with
// RejectCost, with MaxDebt = burst and under conservative update: every Decision predicts the
// Multi's own next decisions. Never iff n x k > burst; on a denial a
// retry at t+RetryAfter is admitted and one 1 ms earlier is not;
// Remaining requests of k tokens are admitted right after it and no
// more; NextAfter (without RejectCost, whose Never probe would charge
// it) is when Remaining grows, 0 only where (Remaining+1) x k > burst.
func TestAudit103LimitSharedMultiSelfConsistent(t *testing.T) {
	rng := rand.New(rand.NewPCG(103, 1))
	cfgs := []a103Cfg{
		{rate: math.Pi, burst: 7, eng: limit.CountMin, shape: "ll"},
		{rate: 7.3, burst: 5, eng: limit.CountMin, shape: "lll"},
		{rate: 0.944, burst: 3, eng: limit.CountMin, shape: "l-o-l", opts: []limit.Option{limit.WithMaxDebt(3)}},
		{rate: 3, burst: 5, eng: limit.Buckets, shape: "l-inf-l"},
		{rate: 2.5, burst: 3, eng: limit.Buckets, shape: "ll", opts: []limit.Option{limit.WithRejectCost(1)}, rej: true},
		{rate: limit.Every(3 * time.Second), burst: 7, eng: limit.CountMin, shape: "lll", opts: []limit.Option{limit.WithRejectCost(0.5)}, rej: true},
		{rate: 7.3, burst: 5, eng: limit.CountMin, shape: "ll", opts: []limit.Option{limit.WithConservativeUpdate(true)}},
	}
	for _, c := range cfgs {
		if _, _, err := c.build(); err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		k, b := c.k(), c.burst
		reject := c.rej
		tok := time.Duration(float64(time.Second) / float64(c.rate))
		var steps []a103Step
		for i := range 7 {
			s := a103Step{adv: time.Duration(rng.Int64N(int64(tok)*int64(k)+1)) / time.Millisecond * time.Millisecond, n: 1 + rng.IntN(b/k+1)}
			d := c.replay(steps, s.adv, s.n)
			steps = append(steps, s)
			name := fmt.Sprintf("%v x %d %v %s %d opts, step %d n %d", float64(c.rate), b, c.eng, c.shape, len(c.opts), i, s.n)
			if d.Never != (s.n*k > b) {
				t.Errorf("%s: Never %v", name, d.Never)
			}
			if !d.Allowed && !d.Never {
				if !c.replay(steps, d.RetryAfter, s.n).Allowed {
					t.Errorf("%s: a retry at RetryAfter %v is denied", name, d.RetryAfter)
				}
				if d.RetryAfter > time.Millisecond && c.replay(steps, d.RetryAfter-time.Millisecond, s.n).Allowed {
					t.Errorf("%s: a retry 1 ms before RetryAfter %v is admitted", name, d.RetryAfter)
				}
			}
			m, clk, _ := c.build()
			for _, s := range steps {
				clk.Advance(s.adv)
				m.DecideKeys(clk.Now(), s.n, "k")
			}
			got := 0
			for got <= b && m.DecideKeys(clk.Now(), 1, "k").Allowed {
				got++
			}
			if got != d.Remaining {
				t.Errorf("%s: Remaining %d, %d admitted right after", name, d.Remaining, got)
			}
			if reject {
				continue
			}
			if d.NextAfter > 0 {
				if r := c.replay(steps, d.NextAfter, b+1).Remaining; r <= d.Remaining {
					t.Errorf("%s: Remaining %d, NextAfter %v: then %d", name, d.Remaining, d.NextAfter, r)
				}
				if r := c.replay(steps, d.NextAfter-time.Millisecond, b+1).Remaining; r != d.Remaining {
					t.Errorf("%s: Remaining %d, NextAfter %v: 1 ms earlier %d", name, d.Remaining, d.NextAfter, r)
				}
			} else if (d.Remaining+1)*k <= b {
				t.Errorf("%s: NextAfter 0 with Remaining %d", name, d.Remaining)
			}
		}
	}
}

// TestAudit103LimitSharedMultiRationalOracle (passing check): Multi(l,
// l) and Multi(l, l, l) on exact policies (New(1, 2), New(3, 5) on
// Buckets, Every(3s) x 7 on CountMin) against the rational token bucket
// (math/big): a request of n takes n x k tokens; Allowed, Never,
// Remaining (requests of k tokens: floor((burst - debt)/k)), RetryAfter,
// ResetAfter and NextAfter (the next k-token request) are the bucket's.
func TestAudit103LimitSharedMultiRationalOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(103, 2))
	for _, c := range []struct {
		num, den int64
		burst    int
		eng      limit.Engine
		k        int
	}{{1, 1, 2, limit.CountMin, 2}, {3, 1, 5, limit.Buckets, 2}, {1, 3, 7, limit.CountMin, 3}, {5, 2, 3, limit.Buckets, 3}, {10, 1, 7, limit.Buckets, 2}} {
		clk := limittest.NewFakeClock()
		clk.Set(1 << 30)
		lim := limit.Limit(float64(c.num) / float64(c.den))
		if c.num == 1 && c.den > 1 {
			lim = limit.Every(time.Duration(c.den) * time.Second)
		}
		l := limit.MustNew(lim, c.burst, limit.WithClock(clk), limit.WithEngine(c.eng), limit.WithCapacity(16, 0.01))
		if !l.Exact() {
			t.Fatalf("setup: %v/%v not exact", c.num, c.den)
		}
		ws := make([]*limit.Limiter, c.k)
		for i := range ws {
			ws[i] = l
		}
		m, _ := limit.NewMulti(ws...)
		tok := new(big.Rat).SetFrac64(1000*c.den, c.num) // ms per token
		burstMs := new(big.Rat).Mul(tok, big.NewRat(int64(c.burst), 1))
		debt := new(big.Rat)
		ceil := func(x *big.Rat) time.Duration {
			if x.Sign() <= 0 {
				return 0
			}
			q, r := new(big.Int).QuoRem(x.Num(), x.Denom(), new(big.Int))
			if r.Sign() != 0 {
				q.Add(q, big.NewInt(1))
			}
			return time.Duration(q.Int64()) * time.Millisecond
		}
		// wait returns the ms until debt + n tokens fit.
		wait := func(n int) time.Duration {
			x := new(big.Rat).Add(debt, new(big.Rat).Mul(tok, big.NewRat(int64(n), 1)))
			return ceil(x.Sub(x, burstMs))
		}
		for i := range 40 {
			adv := time.Duration(rng.Int64N(int64(float64(time.Second)*float64(c.den)/float64(c.num))*int64(c.k)+1)) / time.Millisecond * time.Millisecond
			clk.Advance(adv)
			debt.Sub(debt, new(big.Rat).SetInt64(adv.Milliseconds()))
			if debt.Sign() < 0 {
				debt.SetInt64(0)
			}
			n := 1 + rng.IntN(c.burst/c.k+1)
			d := m.DecideKeys(clk.Now(), n, "k")
			var want limit.Decision
			switch {
			case n*c.k > c.burst:
				want.Never, want.RetryAfter = true, limit.InfDuration
			case wait(n*c.k) == 0 && new(big.Rat).Add(debt, new(big.Rat).Mul(tok, big.NewRat(int64(n*c.k), 1))).Cmp(burstMs) <= 0:
				want.Allowed = true
				debt.Add(debt, new(big.Rat).Mul(tok, big.NewRat(int64(n*c.k), 1)))
			default:
				want.RetryAfter = max(wait(n*c.k), time.Millisecond)
			}
			rem := new(big.Rat).Sub(burstMs, debt)
			rem.Quo(rem, tok)
			want.Remaining = int(new(big.Int).Quo(rem.Num(), rem.Denom()).Int64()) / c.k
			want.ResetAfter = ceil(debt)
			if debt.Sign() > 0 && (want.Remaining+1)*c.k <= c.burst {
				want.NextAfter = wait((want.Remaining + 1) * c.k)
			}
			if d.Allowed != want.Allowed || d.Never != want.Never || d.Remaining != want.Remaining || d.RetryAfter != want.RetryAfter || d.ResetAfter != want.ResetAfter || d.NextAfter != want.NextAfter {
				t.Errorf("%d/%d x %d %v k %d step %d n %d: got %+v, the rational bucket %+v", c.num, c.den, c.burst, c.eng, c.k, i, n, d, want)
			}
		}
	}
}

// TestAudit103LimitSharedMultiKeysAndOddBurst (passing check): one
// limiter twice under different keys counts each window alone (k = 1:
// n = burst is admitted for both keys); under one key n x k > burst is
// Never (New(1, 3): n = 2 twice is 4) and n = 1 admitted with Remaining
// 0 (floor(1/2)), NextAfter 1 s; three times, New(1, 7): n = 3 Never,
// n = 1 admitted with Remaining 1 (floor(4/3)), NextAfter 2 s.
func TestAudit103LimitSharedMultiKeysAndOddBurst(t *testing.T) {
	clk := limittest.NewFakeClock()
	clk.Set(1 << 30)
	now := clk.Now()
	l := limit.MustNew(1, 3, limit.WithClock(clk))
	m, _ := limit.NewMulti(l, l)
	if d := m.DecideKeys(now, 3, "a", "b"); !d.Allowed || d.Never || d.Remaining != 0 {
		t.Errorf("Multi(l, l) keys a, b, n = burst: %+v, want admitted with Remaining 0", d)
	}
	if d := m.DecideKeys(now, 2, "c"); d.Allowed || !d.Never {
		t.Errorf("Multi(l, l) one key, n = 2 on burst 3: %+v, want Never", d)
	}
	if d := m.DecideKeys(now, 1, "c"); !d.Allowed || d.Remaining != 0 || d.NextAfter != time.Second || d.ResetAfter != 2*time.Second {
		t.Errorf("Multi(l, l) one key, n = 1 on burst 3: %+v, want admitted, Remaining 0, NextAfter 1s (2 tokens fit at debt 1), ResetAfter 2s", d)
	}
	l7 := limit.MustNew(1, 7, limit.WithClock(clk))
	m3, _ := limit.NewMulti(l7, l7, l7)
	if d := m3.DecideKeys(now, 3, "k"); d.Allowed || !d.Never {
		t.Errorf("Multi(l, l, l) n = 3 on burst 7: %+v, want Never", d)
	}
	if d := m3.DecideKeys(now, 1, "k"); !d.Allowed || d.Remaining != 1 || d.NextAfter != 2*time.Second {
		t.Errorf("Multi(l, l, l) n = 1 on burst 7: %+v, want admitted, Remaining 1 (4 tokens left), NextAfter 2s (two 3-token requests fit at debt 1)", d)
	}
}
