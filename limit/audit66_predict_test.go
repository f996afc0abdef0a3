package limit_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a66Op is one step of a replayable schedule on one key.
type a66Op struct {
	at   int64 // clock ms
	kind int   // 0 DecideN, 1 ReserveN, 2 SetLimit, 3 SetBurst
	pol  int   // -1: the limiter's own; else a tier index
	n    int
	lim  limit.Limit
	b    int
}

type a66PCfg struct {
	name  string
	lim   limit.Limit
	burst int
	opts  []limit.Option
	tiers []limit.Policy
	sets  []limit.Limit
	rc    float64
}

func a66Build(t *testing.T, c a66PCfg, seed uint64) (*limit.Limiter, []*limit.Tier, *sketchtest.FakeClock) {
	t.Helper()
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	opts := append([]limit.Option{limit.WithClock(clk), limit.WithSeed(seed)}, c.opts...)
	if c.rc > 0 {
		opts = append(opts, limit.WithRejectCost(c.rc))
	}
	l, err := limit.New(c.lim, c.burst, opts...)
	if err != nil {
		t.Fatal(err)
	}
	var ts []*limit.Tier
	for _, p := range c.tiers {
		tr, err := l.Tier(p.Name, p.Limit, p.Burst)
		if err != nil {
			t.Fatalf("Tier %v: %v", p, err)
		}
		ts = append(ts, tr)
	}
	return l, ts, clk
}

// a66Apply applies op and returns the Decision of a DecideN (zero
// otherwise).
func a66Apply(l *limit.Limiter, ts []*limit.Tier, clk *sketchtest.FakeClock, op a66Op) limit.Decision {
	clk.Set(op.at)
	tm := l.Now()
	switch op.kind {
	case 0:
		if op.pol < 0 {
			return l.DecideN(tm, "k", op.n)
		}
		return ts[op.pol].DecideN(tm, "k", op.n)
	case 1:
		if op.pol < 0 {
			l.ReserveN(tm, "k", op.n)
		} else {
			ts[op.pol].ReserveN(tm, "k", op.n)
		}
	case 2:
		_ = l.SetLimit(op.lim)
	case 3:
		_ = l.SetBurst(op.b)
	}
	return limit.Decision{}
}

func a66Peek(l *limit.Limiter, ts []*limit.Tier, pol, n int) limit.Decision {
	if pol < 0 {
		return l.PeekN(l.Now(), "k", n)
	}
	return ts[pol].PeekN(l.Now(), "k", n)
}

// TestAudit66PredictionsHoldInexact: "RetryAfter predicts the limiter's
// own next decision to the millisecond: a retry at t+RetryAfter is
// admitted and one 1 ms earlier is not" (doc.go, "Exactness"), also for
// rates that are not short fractions and inexact policies ("An inexact
// policy is never early against its own bucket, and its RetryAfter still
// predicts its own next decision to the millisecond"); NextAfter "is the
// time until Remaining grows by one" and ResetAfter "the time until the
// key's debt drains to zero" (decision.go). Each prediction is checked by
// replaying the schedule on a twin limiter and peeking at the predicted
// instant and 1 ms before it.
func TestAudit66PredictionsHoldInexact(t *testing.T) {
	testsize.Serial(t)
	cfgs := []a66PCfg{
		{name: "pi/cm", lim: math.Pi, burst: 7, opts: []limit.Option{limit.WithSize(2, 64), limit.WithMaxDebt(30)},
			tiers: []limit.Policy{{Name: "e", Limit: math.E / 3, Burst: 4}, {Name: "third", Limit: math.Pi / 3, Burst: 7}},
			sets:  []limit.Limit{math.Sqrt2, math.Pi, 0.3}},
		{name: "sqrt2/cm-bigdebt", lim: math.Sqrt2, burst: 100, opts: []limit.Option{limit.WithMaxDebt(1 << 24), limit.WithSize(2, 64)},
			tiers: []limit.Policy{{Name: "a", Limit: 0.1, Burst: 3}, {Name: "b", Limit: 1e-3, Burst: 2}},
			sets:  []limit.Limit{1, math.Sqrt2 / 7, 0.7}, rc: 0.5},
		{name: "0.3/cm-bigdebt", lim: 0.3, burst: 1000, opts: []limit.Option{limit.WithMaxDebt(5e6), limit.WithSize(2, 64)},
			tiers: []limit.Policy{{Name: "a", Limit: 0.07, Burst: 30}, {Name: "b", Limit: 3, Burst: 1000}},
			sets:  []limit.Limit{0.29, 1.0 / 3, 31}, rc: 2},
		{name: "7/13ms/buckets", lim: 7000.0 / 13, burst: 40, opts: []limit.Option{limit.WithEngine(limit.Buckets)},
			tiers: []limit.Policy{{Name: "a", Limit: 100, Burst: 10}, {Name: "b", Limit: 7000.0 / 39, Burst: 13}},
			sets:  []limit.Limit{500, 7000.0 / 26, 1000 / 3.0}},
		{name: "every3s/buckets", lim: limit.Every(3 * time.Second), burst: 9,
			tiers: []limit.Policy{{Name: "a", Limit: 0.2, Burst: 2}, {Name: "b", Limit: 0.31, Burst: 5}},
			sets:  []limit.Limit{0.25, limit.Every(7 * time.Second), 1.0 / 3}, rc: 1},
		{name: "5e-4/cm", lim: 5e-4, burst: 1000, opts: []limit.Option{limit.WithSize(2, 64)},
			tiers: []limit.Policy{{Name: "a", Limit: 1e-4, Burst: 200}},
			sets:  []limit.Limit{7e-4, 2.5e-4}},
	}
	for _, c := range cfgs {
		t.Run(c.name, func(t *testing.T) {
			checks := 0
			for seed := uint64(0); seed < uint64(testsize.Sample(4, 2, 1)); seed++ {
				rng := rand.New(rand.NewPCG(seed, 6666))
				l, ts, clk := a66Build(t, c, seed)
				now := int64(1_000_000)
				var ops []a66Op
				for step := 0; step < 60; step++ {
					switch x := rng.IntN(10); {
					case x < 5:
						now += int64(rng.IntN(3))
					case x < 8:
						now += int64(rng.IntN(5000))
					case x < 9:
						now += int64(rng.IntN(10_000_000))
					default:
						now += 86_400_000 * int64(1+rng.IntN(400))
					}
					op := a66Op{at: now, pol: -1}
					switch x := rng.IntN(20); {
					case x < 14:
						op.kind = 0
					case x < 17:
						op.kind = 1
					case x < 19:
						op.kind = 2
						op.lim = c.sets[rng.IntN(len(c.sets))]
					default:
						op.kind = 3
						op.b = 1 + rng.IntN(c.burst)
					}
					if op.kind <= 1 && rng.IntN(3) == 0 && len(ts) > 0 {
						op.pol = rng.IntN(len(ts))
					}
					b := l.Burst()
					if op.pol >= 0 {
						b = ts[op.pol].Burst()
					}
					op.n = 1 + rng.IntN(b)
					if rng.IntN(3) == 0 {
						op.n = 1
					}
					ops = append(ops, op)
					d := a66Apply(l, ts, clk, op)
					if op.kind != 0 {
						continue
					}
					twin := func(after time.Duration) (*limit.Limiter, []*limit.Tier) {
						l2, ts2, clk2 := a66Build(t, c, seed)
						for _, o := range ops {
							a66Apply(l2, ts2, clk2, o)
						}
						clk2.Set(now + after.Milliseconds())
						return l2, ts2
					}
					desc := func() string {
						return fmt.Sprintf("seed %d step %d (pol %d n %d at %d, limit %v burst %d) decision %+v", seed, step, op.pol, op.n, now, d.Limit, d.Burst, d)
					}
					if !d.Allowed && !d.Never {
						if d.NextAfter > d.RetryAfter {
							t.Errorf("%s: NextAfter %v > RetryAfter %v on a denial", desc(), d.NextAfter, d.RetryAfter)
						}
						if d.RetryAfter%time.Millisecond != 0 || d.RetryAfter <= 0 {
							t.Fatalf("%s: RetryAfter not whole positive ms", desc())
						}
						l2, ts2 := twin(d.RetryAfter)
						if p := a66Peek(l2, ts2, op.pol, op.n); !p.Allowed {
							t.Errorf("%s: a retry at t+RetryAfter is denied (%+v)", desc(), p)
						}
						l3, ts3 := twin(d.RetryAfter - time.Millisecond)
						if p := a66Peek(l3, ts3, op.pol, op.n); p.Allowed {
							t.Errorf("%s: a retry 1 ms before t+RetryAfter is admitted", desc())
						}
						checks++
					}
					if d.NextAfter > 0 {
						l2, ts2 := twin(d.NextAfter)
						p2 := a66Peek(l2, ts2, op.pol, 1)
						at := p2.Remaining
						if p2.Allowed {
							at++
						}
						if at < d.Remaining+1 {
							t.Errorf("%s: at t+NextAfter Remaining is %d (peek %+v), want >= %d", desc(), at, p2, d.Remaining+1)
						}
						l3, ts3 := twin(d.NextAfter - time.Millisecond)
						// Remaining before the peek's own token: peek with n=1
						// reports the state after admitting it.
						p := a66Peek(l3, ts3, op.pol, 1)
						before := p.Remaining
						if p.Allowed {
							before++
						}
						if before > d.Remaining {
							t.Errorf("%s: 1 ms before t+NextAfter Remaining is already %d > %d", desc(), before, d.Remaining)
						}
						checks++
					}
					if d.ResetAfter > 0 {
						l2, ts2 := twin(d.ResetAfter)
						pb := l2.Burst()
						var tk float64
						if op.pol >= 0 {
							pb = ts2[op.pol].Burst()
							tk = ts2[op.pol].TokensAt(l2.Now(), "k")
						} else {
							tk = l2.TokensAt(l2.Now(), "k")
						}
						if tk != float64(pb) {
							t.Errorf("%s: at t+ResetAfter tokens %v, want the full burst %d", desc(), tk, pb)
						}
						l3, ts3 := twin(d.ResetAfter - time.Millisecond)
						if op.pol >= 0 {
							tk = ts3[op.pol].TokensAt(l3.Now(), "k")
						} else {
							tk = l3.TokensAt(l3.Now(), "k")
						}
						if tk >= float64(pb) {
							t.Errorf("%s: 1 ms before t+ResetAfter tokens are already full (%v)", desc(), tk)
						}
						checks++
					}
					if t.Failed() {
						t.FailNow()
					}
				}
			}
			t.Logf("%d predictions checked", checks)
		})
	}
}
