package limit_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// a104Dec is what a Limiter and a Tier both answer.
type a104Dec interface {
	DecideN(time.Time, string, int) limit.Decision
	PeekN(time.Time, string, int) limit.Decision
	TokensAt(time.Time, string) float64
}

type a104Cfg struct {
	rate     limit.Limit
	burst    int
	eng      limit.Engine
	opts     []limit.Option
	tierRate limit.Limit // 0: no tier
	tierB    int
	rej      bool
}

type a104Step struct {
	adv  time.Duration
	who  int // 0 the limiter, 1 the second Tier, 2 the 1e22/s Tier (tiny debts)
	n    int
	peek bool // a step that only advances the clock
}

func (c a104Cfg) String() string {
	return fmt.Sprintf("rate %v burst %d eng %v nopts %d tier %v/%d", float64(c.rate), c.burst, c.eng, len(c.opts), float64(c.tierRate), c.tierB)
}

func (c a104Cfg) build() ([3]a104Dec, *limittest.FakeClock, error) {
	clk := limittest.NewFakeClock()
	clk.Set(1 << 30)
	o := append([]limit.Option{limit.WithClock(clk), limit.WithSeed(7), limit.WithEngine(c.eng), limit.WithCapacity(16, 0.01)}, c.opts...)
	l, err := limit.New(c.rate, c.burst, o...)
	if err != nil {
		return [3]a104Dec{}, nil, err
	}
	ds := [3]a104Dec{l, l, l}
	if f, err := l.Tier("fast", 1e22, 1); err == nil {
		ds[2] = f
	} else {
		panic(err)
	}
	if c.tierRate != 0 {
		tr, err := l.Tier("t", c.tierRate, c.tierB)
		if err != nil {
			return ds, nil, err
		}
		ds[1] = tr
	}
	return ds, clk, nil
}

func (c a104Cfg) replay(steps []a104Step) ([3]a104Dec, *limittest.FakeClock) {
	ds, clk, err := c.build()
	if err != nil {
		panic(err)
	}
	for _, s := range steps {
		clk.Advance(s.adv)
		if s.peek {
			continue
		}
		ds[s.who].DecideN(clk.Now(), "k", s.n)
	}
	return ds, clk
}

func (c a104Cfg) burstOf(who int) int {
	if who == 2 {
		return 1
	}
	if who == 1 && c.tierRate != 0 {
		return c.tierB
	}
	return c.burst
}

// a104Check runs the schedule and returns the problems found.
func a104Check(c a104Cfg, steps []a104Step, maxErr int) []string {
	var errs []string
	add := func(f string, a ...any) {
		if len(errs) < maxErr {
			errs = append(errs, c.String()+": "+fmt.Sprintf(f, a...))
		}
	}
	for i := range steps {
		s := steps[i]
		pre := steps[:i]
		// PeekN vs DecideN.
		dsP, clkP := c.replay(pre)
		clkP.Advance(s.adv)
		p := dsP[s.who].PeekN(clkP.Now(), "k", s.n)
		dsD, clkD := c.replay(pre)
		clkD.Advance(s.adv)
		d := dsD[s.who].DecideN(clkD.Now(), "k", s.n)
		tok := dsD[s.who].TokensAt(clkD.Now(), "k")
		name := fmt.Sprintf("step %d who %d n %d adv %v", i, s.who, s.n, s.adv)
		if p != d && !(c.rej && !d.Allowed) {
			add("%s: PeekN %+v, DecideN %+v", name, p, d)
		}
		done := append(append([]a104Step{}, pre...), a104Step{adv: s.adv, who: s.who, n: s.n})
		b := c.burstOf(s.who)
		// Remaining vs one-token admissions.
		ds, clk := c.replay(done)
		got := 0
		for got <= b && ds[s.who].DecideN(clk.Now(), "k", 1).Allowed {
			got++
		}
		if got != d.Remaining {
			add("%s: Remaining %d, %d one-token admitted (decision %+v)", name, d.Remaining, got, d)
		}
		_ = tok // floor(TokensAt) vs Remaining: TestAudit104LimitTinyDebtTokensSayBurst
		// RetryAfter.
		if !d.Allowed && !d.Never && d.RetryAfter < time.Hour*24*365 {
			ds, clk := c.replay(done)
			clk.Advance(d.RetryAfter)
			if !ds[s.who].DecideN(clk.Now(), "k", s.n).Allowed {
				add("%s: retry at RetryAfter %v denied", name, d.RetryAfter)
			}
			if d.RetryAfter > time.Millisecond {
				ds, clk := c.replay(done)
				clk.Advance(d.RetryAfter - time.Millisecond)
				if ds[s.who].DecideN(clk.Now(), "k", s.n).Allowed {
					add("%s: retry 1ms before RetryAfter %v admitted", name, d.RetryAfter)
				}
			}
		}
		// NextAfter, by counting one-token admissions.
		count := func(at time.Duration) int {
			ds, clk := c.replay(done)
			clk.Advance(at)
			n := 0
			for n <= b && ds[s.who].DecideN(clk.Now(), "k", 1).Allowed {
				n++
			}
			return n
		}
		if d.NextAfter > 0 && d.NextAfter < time.Hour*24*365 {
			if r := count(d.NextAfter); r <= d.Remaining {
				add("%s: NextAfter %v: then %d admitted, Remaining was %d", name, d.NextAfter, r, d.Remaining)
			}
			if r := count(d.NextAfter - time.Millisecond); r > d.Remaining {
				add("%s: NextAfter %v: 1ms earlier %d admitted, Remaining was %d", name, d.NextAfter, r, d.Remaining)
			}
		} else if d.NextAfter == 0 && d.Remaining < b {
			add("%s: NextAfter 0 with Remaining %d < burst %d", name, d.Remaining, b)
		}
	}
	return errs
}

func a104RandSteps(rng *rand.Rand, c a104Cfg, nsteps int) []a104Step {
	tokMs := 1000 / float64(c.rate)
	var steps []a104Step
	for range nsteps {
		who := 0
		if c.tierRate != 0 && rng.IntN(2) == 0 {
			who = 1
		}
		if rng.IntN(2) == 0 {
			who = 2
		}
		b := c.burstOf(who)
		n := 1 + rng.IntN(b)
		if rng.IntN(6) == 0 {
			n = b + 1
		}
		adv := time.Duration(rng.Float64()*tokMs*1.5) * time.Millisecond
		if rng.IntN(2) == 0 {
			adv = time.Duration(rng.IntN(2)) * time.Millisecond
		}
		steps = append(steps, a104Step{adv: adv, who: who, n: n})
	}
	return steps
}

// TestAudit104LimitRandomOracle (passing check): random schedules on
// both engines (Buckets where New takes it), exact and inexact rates
// (pi, 7.3, 0.944, Every(24h), 10, 3), bursts 2..50, at odd and
// fractional-token milliseconds, with MaxDebt = burst (held), RejectCost,
// conservative update, a second Tier and a 1e22/s Tier whose tokens
// leave debts far below a float64 step of the burst. Every Decision is
// checked against a replay of the schedule from scratch on a fresh
// limiter: PeekN at the same t equals DecideN (but for a RejectCost
// denial, whose penalty PeekN does not debit, as documented); Remaining
// one-token requests are admitted right after it and no more; a retry at
// t+RetryAfter is admitted and 1 ms earlier is not; NextAfter is when
// Remaining grows and 1 ms earlier it has not, 0 only at Burst.
func TestAudit104LimitRandomOracle(t *testing.T) { a104Child(t, a104RandomOracle) }

func a104RandomOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(104, 1))
	rates := []limit.Limit{math.Pi, 7.3, 0.944, limit.Every(24 * time.Hour), 10, 3}
	for iter := 0; iter < a104Iters; iter++ {
		c := a104Cfg{rate: rates[rng.IntN(len(rates))], burst: 2 + rng.IntN(49), eng: limit.CountMin}
		if rng.IntN(3) == 0 {
			c.eng = limit.Buckets
		}
		switch rng.IntN(6) {
		case 0:
			c.opts = append(c.opts, limit.WithMaxDebt(float64(c.burst)))
		case 1:
			c.opts = append(c.opts, limit.WithRejectCost(0.5))
			c.rej = true
		case 2:
			if c.eng == limit.CountMin {
				c.opts = append(c.opts, limit.WithConservativeUpdate(true))
			}
		case 3:
			c.tierRate = c.rate * limit.Limit(1+rng.IntN(3))
			c.tierB = 1 + rng.IntN(c.burst)
		}
		if _, _, err := c.build(); err != nil {
			continue
		}
		steps := a104RandSteps(rng, c, 8)
		for _, e := range a104Check(c, steps, 3) {
			t.Error(e)
		}
	}
}

const a104Iters = 16

// TestAudit104LimitMultiTinyDebtOracle (passing check): Multi(l, l) and
// Multi(l, l, l) (one key: each request takes k tokens) of count-min
// limiters (pi, 7.3, 0.944, 10, 3; bursts 2..30; conservative update;
// MaxDebt = burst), with a 1e22/s Tier of l leaving tiny debts between
// decisions: Remaining k-token requests are admitted right after each
// Decision and no more, RetryAfter is exact to the ms, and NextAfter is
// when Remaining grows (0 only where (Remaining+1) x k > burst).
func TestAudit104LimitMultiTinyDebtOracle(t *testing.T) { a104Child(t, a104MultiOracle) }

func a104MultiOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(104, 3))
	rates := []limit.Limit{math.Pi, 7.3, 0.944, 10, 3}
	for iter := 0; iter < 16; iter++ {
		rate := rates[rng.IntN(len(rates))]
		burst := 2 + rng.IntN(29)
		k := 2 + rng.IntN(2)
		var opts []limit.Option
		if rng.IntN(3) == 0 {
			opts = append(opts, limit.WithConservativeUpdate(true))
		}
		if rng.IntN(3) == 0 {
			opts = append(opts, limit.WithMaxDebt(float64(burst)))
		}
		type st struct {
			adv  time.Duration
			fast bool
			n    int
		}
		build := func() (*limit.Multi, *limit.Tier, *limittest.FakeClock) {
			clk := limittest.NewFakeClock()
			clk.Set(1 << 30)
			l := limit.MustNew(rate, burst, append([]limit.Option{limit.WithClock(clk), limit.WithEngine(limit.CountMin), limit.WithCapacity(16, 0.01)}, opts...)...)
			f, err := l.Tier("fast", 1e22, 1)
			if err != nil {
				panic(err)
			}
			ws := make([]*limit.Limiter, k)
			for i := range ws {
				ws[i] = l
			}
			m, _ := limit.NewMulti(ws...)
			return m, f, clk
		}
		replay := func(steps []st) (*limit.Multi, *limittest.FakeClock) {
			m, f, clk := build()
			for _, s := range steps {
				clk.Advance(s.adv)
				if s.fast {
					f.AllowN(clk.Now(), "k", 1)
				} else {
					m.DecideKeys(clk.Now(), s.n, "k")
				}
			}
			return m, clk
		}
		var steps []st
		tokMs := 1000 / float64(rate)
		for i := range 8 {
			s := st{adv: time.Duration(rng.Float64()*tokMs*float64(k)) * time.Millisecond, fast: rng.IntN(2) == 0, n: 1 + rng.IntN(burst/k+1)}
			if rng.IntN(2) == 0 {
				s.adv = time.Duration(rng.IntN(2)) * time.Millisecond
			}
			m, clk := replay(steps)
			clk.Advance(s.adv)
			steps = append(steps, s)
			if s.fast {
				continue
			}
			d := m.DecideKeys(clk.Now(), s.n, "k")
			name := fmt.Sprintf("rate %v burst %d k %d opts %d step %d n %d", float64(rate), burst, k, len(opts), i, s.n)
			count := func(at time.Duration) int {
				m, clk := replay(steps)
				clk.Advance(at)
				g := 0
				for g <= burst && m.DecideKeys(clk.Now(), 1, "k").Allowed {
					g++
				}
				return g
			}
			if g := count(0); g != d.Remaining {
				t.Errorf("%s: Remaining %d, %d admitted %+v", name, d.Remaining, g, d)
			}
			if !d.Allowed && !d.Never {
				m, clk := replay(steps)
				clk.Advance(d.RetryAfter)
				if !m.DecideKeys(clk.Now(), s.n, "k").Allowed {
					t.Errorf("%s: retry at %v denied", name, d.RetryAfter)
				}
				if d.RetryAfter > time.Millisecond {
					m, clk := replay(steps)
					clk.Advance(d.RetryAfter - time.Millisecond)
					if m.DecideKeys(clk.Now(), s.n, "k").Allowed {
						t.Errorf("%s: retry 1ms before %v admitted", name, d.RetryAfter)
					}
				}
			}
			if d.NextAfter > 0 {
				if g := count(d.NextAfter); g <= d.Remaining {
					t.Errorf("%s: NextAfter %v then %d, Remaining %d", name, d.NextAfter, g, d.Remaining)
				}
				if g := count(d.NextAfter - time.Millisecond); g > d.Remaining {
					t.Errorf("%s: NextAfter %v 1ms earlier %d, Remaining %d", name, d.NextAfter, g, d.Remaining)
				}
			} else if (d.Remaining+1)*k <= burst {
				t.Errorf("%s: NextAfter 0 Remaining %d", name, d.Remaining)
			}
		}
	}
}
