package limit_test

// audit51: package limit under clock anomalies and mid-flight
// reconfiguration against a rational token-bucket oracle (math/big.Rat).
//
// The oracle keeps a key's debt as milliseconds of drain at the
// limiter's rate R (limit/doc.go, "Tiers and changing the limit": "a
// key's debt is held as time to drain, and every policy of the limiter
// sees the same debt"). A policy (r, b) costs c = 1000/r ms a token.
// Time follows limit/doc.go, "Keys and time": a t after the clock's
// reading counts as that reading, a t before a time already used counts
// as that time, and durations are measured from t (or from the reading
// when t is ahead of it) with the lag to the time decided at included.

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// a51Pol is an exact policy (r, b), r a rational per second.
type a51Pol struct {
	num, den int64 // r = num/den per second
	b        int
}

func (p a51Pol) limit() limit.Limit { return limit.Limit(float64(p.num) / float64(p.den)) }

// cost is the ms of drain at R of one token of p: 1000/r.
func (p a51Pol) cost() *big.Rat { return big.NewRat(1000*p.den, p.num) }

// a51Oracle is one key's exact bucket on the shared time scale.
type a51Oracle struct {
	e       *big.Rat // debt, in ms of drain
	at      int64    // the time e is as of
	hw      int64    // the latest time used
	maxDebt *big.Rat // in ms
}

func a51Ceil(x *big.Rat) int64 {
	n, d := new(big.Int).Set(x.Num()), x.Denom()
	q, m := new(big.Int).QuoRem(n, d, new(big.Int))
	if m.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	return q.Int64()
}

func a51Floor(x *big.Rat) int64 {
	q := new(big.Int)
	q.Div(x.Num(), x.Denom()) // Euclidean: floor for a positive denominator
	return q.Int64()
}

// advance moves the oracle to the time the limiter decides at for a t of
// tms with the clock reading c, and returns that time and the gap.
func (o *a51Oracle) advance(tms, c int64) (dt, gap int64) {
	base := min(tms, c)
	dt = max(o.hw, base)
	o.hw = dt
	if dt > o.at {
		o.e.Sub(o.e, new(big.Rat).SetInt64(dt-o.at))
		if o.e.Sign() < 0 {
			o.e.SetInt64(0)
		}
		o.at = dt
	}
	return dt, dt - base
}

type a51Want struct {
	allowed            bool
	never              bool
	remaining          int
	retry, reset, next time.Duration
}

func a51ms(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }

// fill computes Remaining, ResetAfter and NextAfter for a debt e.
func a51Fill(w *a51Want, e *big.Rat, p a51Pol, gap int64) {
	c := p.cost()
	bc := new(big.Rat).Mul(new(big.Rat).SetInt64(int64(p.b)), c)
	room := new(big.Rat).Sub(bc, e)
	rem := a51Floor(new(big.Rat).Quo(room, c))
	if rem < 0 {
		rem = 0
	}
	w.remaining = int(rem)
	if e.Sign() > 0 {
		w.reset = a51ms(gap + a51Ceil(e))
		// drain until e <= (b - rem - 1) c
		target := new(big.Rat).Mul(new(big.Rat).SetInt64(int64(p.b)-rem-1), c)
		x := a51Ceil(new(big.Rat).Sub(e, target))
		w.next = a51ms(gap + max(x, 0))
	}
}

// decide applies a committed (or peeked) decision of n tokens under p.
func (o *a51Oracle) decide(p a51Pol, n int, gap int64, commit bool, rejectCost int) a51Want {
	c := p.cost()
	nc := new(big.Rat).Mul(new(big.Rat).SetInt64(int64(n)), c)
	bc := new(big.Rat).Mul(new(big.Rat).SetInt64(int64(p.b)), c)
	var w a51Want
	addReject := func() {
		if commit && rejectCost > 0 {
			o.e.Add(o.e, new(big.Rat).Mul(new(big.Rat).SetInt64(int64(rejectCost)), c))
			if o.e.Cmp(o.maxDebt) > 0 {
				o.e.Set(o.maxDebt)
			}
		}
	}
	if n > p.b {
		w.never, w.retry = true, limit.InfDuration
		addReject()
		a51Fill(&w, o.e, p, gap)
		return w
	}
	after := new(big.Rat).Add(o.e, nc)
	if after.Cmp(bc) <= 0 {
		w.allowed = true
		if commit {
			o.e.Set(after)
			a51Fill(&w, o.e, p, gap)
		} else {
			a51Fill(&w, after, p, gap)
		}
		return w
	}
	addReject()
	wait := a51Ceil(new(big.Rat).Sub(new(big.Rat).Add(o.e, nc), bc))
	w.retry = a51ms(gap + max(wait, 1))
	a51Fill(&w, o.e, p, gap)
	return w
}

func a51Got(d limit.Decision) a51Want {
	return a51Want{allowed: d.Allowed, never: d.Never, remaining: d.Remaining, retry: d.RetryAfter, reset: d.ResetAfter, next: d.NextAfter}
}

// a51Steps are the clock moves: small and large steps back, forward
// again, and huge forward jumps (the horizon's 2^29, 2^30, 2^31 and
// 2^32 ms, days, years).
var a51Steps = []int64{
	0, 1, 7, 50, 99, 100, 101, 333, 2000, 4369, 4370, 65536,
	-1, -7, -50, -100, -2000, -65536, -3_600_000, -3 * 86_400_000, -400 * 86_400_000,
	1 << 29, 1<<29 + 1, 1 << 30, 1<<30 - 1, 1 << 31, 1<<31 - 1, 1<<31 + 1, 1 << 32, 1<<32 + 1,
	86_400_000, 40 * 86_400_000, 365 * 86_400_000, 10 * 365 * 86_400_000,
}

type a51Case struct {
	name       string
	eng        limit.Engine
	base       a51Pol
	maxDebt    int // tokens of base
	reject     int
	policies   []a51Pol // SetLimit/SetBurst targets (exact)
	tiers      []a51Pol
	countMinPd time.Duration
}

func a51Cases() []a51Case {
	return []a51Case{
		{name: "buckets-10/20", eng: limit.Buckets, base: a51Pol{10, 1, 20}, maxDebt: 80,
			policies: []a51Pol{{10, 1, 20}, {5, 1, 20}, {5, 1, 10}, {10, 1, 40}, {20, 1, 20}, {10, 1, 100}, {5, 2, 20}, {5, 2, 8}},
			tiers:    []a51Pol{{5, 2, 20}, {5, 1, 7}}},
		{name: "buckets-10/20-reject", eng: limit.Buckets, base: a51Pol{10, 1, 20}, maxDebt: 40, reject: 1,
			policies: []a51Pol{{10, 1, 20}, {5, 1, 10}, {10, 1, 30}}, tiers: []a51Pol{{5, 2, 7}, {20, 1, 20}}},
		{name: "buckets-every7ms/5", eng: limit.Buckets, base: a51Pol{1000, 7, 5}, maxDebt: 30,
			policies: []a51Pol{{1000, 7, 5}, {500, 7, 5}, {1000, 7, 15}}, tiers: []a51Pol{{1000, 21, 10}}},
		{name: "countmin-3/7", eng: limit.CountMin, base: a51Pol{3, 1, 7}, maxDebt: 28, countMinPd: 1000 * time.Hour,
			policies: []a51Pol{{3, 1, 7}, {1, 1, 7}, {3, 1, 28}, {3, 2, 3}}, tiers: []a51Pol{{1, 1, 5}}},
		{name: "countmin-3/7-reject", eng: limit.CountMin, base: a51Pol{3, 1, 7}, maxDebt: 21, reject: 2, countMinPd: 1000 * time.Hour,
			policies: []a51Pol{{3, 1, 7}, {3, 1, 10}}, tiers: []a51Pol{{1, 1, 4}}},
		{name: "countmin-1/min-139", eng: limit.CountMin, base: a51Pol{1, 60, 139}, maxDebt: 278, countMinPd: 100000 * time.Hour,
			policies: []a51Pol{{1, 60, 139}, {1, 120, 139}, {1, 60, 50}}},
	}
}

type a51Res struct {
	r      *limit.Reservation
	e0     *big.Rat // the debt before it
	at0    int64    // as of this time
	clean  bool     // no write to the key since
	filled bool     // it filled the key to MaxDebt
	when   int64    // the time decided at
}

// a51Run drives one case for steps operations and returns the
// mismatches (at most 10).
func a51Run(t *testing.T, cs a51Case, seed uint64, steps int) (bad []string, stats map[string]int) {
	clk := limittest.NewFakeClock()
	clk.Set(a51Start + int64(seed)*7919)
	opts := []limit.Option{limit.WithClock(clk), limit.WithEngine(cs.eng), limit.WithSeed(seed), limit.WithMaxDebt(float64(cs.maxDebt)), limit.WithRejectCost(float64(cs.reject))}
	if cs.countMinPd > 0 {
		opts = append(opts, limit.WithPeriod(cs.countMinPd), limit.WithSize(4, 1024))
	}
	l, err := limit.New(cs.base.limit(), cs.base.b, opts...)
	if err != nil {
		t.Fatalf("%s: %v", cs.name, err)
	}
	if !l.Exact() {
		t.Fatalf("%s: not exact", cs.name)
	}
	tiers := make([]*limit.Tier, len(cs.tiers))
	for i, tp := range cs.tiers {
		tiers[i], err = l.Tier(fmt.Sprintf("t%d", i), tp.limit(), tp.b)
		if err != nil || !tiers[i].Exact() {
			t.Fatalf("%s: tier %v: %v exact %v", cs.name, tp, err, err == nil && tiers[i].Exact())
		}
	}
	baseCost := cs.base.cost()
	o := &a51Oracle{e: new(big.Rat), at: clk.NowMillis(), hw: clk.NowMillis(),
		maxDebt: new(big.Rat).Mul(new(big.Rat).SetInt64(int64(cs.maxDebt)), baseCost)}
	cur := cs.base
	rng := rand.New(rand.NewPCG(seed, 51))
	var res []*a51Res
	stats = map[string]int{}
	const key = "k"
	var trace []string
	tr := func(format string, args ...any) {
		trace = append(trace, fmt.Sprintf("c=%d hw=%d e=%s: ", clk.NowMillis()-1_700_000_000_000, o.hw-1_700_000_000_000, o.e.FloatString(3))+fmt.Sprintf(format, args...))
		if len(trace) > 12 {
			trace = trace[1:]
		}
	}
	fail := func(op string, format string, args ...any) {
		if len(bad) == 0 && a51Trace {
			for _, s := range trace {
				t.Log(s)
			}
		}
		if len(bad) < 10 {
			bad = append(bad, fmt.Sprintf("step op %s clock %d hw %d debt %s ms: ", op, clk.NowMillis(), o.hw, o.e.FloatString(3))+fmt.Sprintf(format, args...))
		}
	}
	dirty := func() {
		for _, r := range res {
			r.clean = false
		}
	}
	for i := 0; i < steps && len(bad) == 0; i++ {
		// the clock
		if clk.NowMillis() < o.hw && rng.IntN(3) == 0 {
			clk.Set(o.hw + int64(rng.IntN(2500)) - 500) // back near the latest time used
		} else if rng.IntN(4) == 0 {
			st := a51Steps[rng.IntN(len(a51Steps))]
			clk.Set(clk.NowMillis() + st)
			stats["step"]++
		} else {
			clk.Set(clk.NowMillis() + int64(rng.IntN(300)))
		}
		c := clk.NowMillis()
		// the request's t
		tms := c
		switch rng.IntN(6) {
		case 0:
			tms = c - int64(rng.IntN(5000)) // stale
		case 1:
			tms = c + int64(rng.IntN(5000)) // future
		case 2:
			tms = o.hw - int64(rng.IntN(3)) // around the latest time used
		}
		tt := time.UnixMilli(tms)
		// the policy
		p, dec := cur, any(l)
		pname := "limiter"
		if len(tiers) > 0 && rng.IntN(4) == 0 {
			j := rng.IntN(len(tiers))
			p, dec, pname = cs.tiers[j], tiers[j], fmt.Sprintf("tier%d", j)
		}
		n := 1 + rng.IntN(p.b+1)
		if rng.IntN(3) > 0 {
			n = 1 + rng.IntN(min(p.b, 3))
		}
		switch op := rng.IntN(20); {
		case op < 7: // DecideN
			var d limit.Decision
			short := rng.IntN(3) == 0 && pname == "limiter"
			if short {
				tms, n = c, 1
			}
			_, gap := o.advance(tms, c)
			if short {
				d = l.Decide(key)
			} else if pname == "limiter" {
				d = l.DecideN(tt, key, n)
			} else {
				d = dec.(*limit.Tier).DecideN(tt, key, n)
			}
			want := o.decide(p, n, gap, true, cs.reject)
			if want.allowed || (cs.reject > 0) {
				dirty()
			}
			if got := a51Got(d); got != want {
				fail("DecideN", "%s n=%d t-c=%d gap=%d: got %+v want %+v", pname, n, tms-c, gap, got, want)
			}
			if d.Limit != p.limit() || d.Burst != p.b {
				fail("DecideN", "%s policy %v/%d, want %v/%d", pname, d.Limit, d.Burst, p.limit(), p.b)
			}
			stats["decide"]++
			if want.allowed {
				stats["admitted"]++
			}
			tr("decide pol=%v n=%d t-c=%d", p, n, tms-clk.NowMillis())
		case op < 10: // PeekN
			_, gap := o.advance(tms, c)
			var d limit.Decision
			if pname == "limiter" {
				d = l.PeekN(tt, key, n)
			} else {
				d = dec.(*limit.Tier).PeekN(tt, key, n)
			}
			want := o.decide(p, n, gap, false, cs.reject)
			if got := a51Got(d); got != want {
				fail("PeekN", "%s n=%d t-c=%d gap=%d: got %+v want %+v", pname, n, tms-c, gap, got, want)
			}
			stats["peek"]++
			tr("peek pol=%v n=%d t-c=%d", p, n, tms-clk.NowMillis())
		case op < 11: // TokensAt
			o.advance(tms, c)
			var got float64
			if pname == "limiter" {
				got = l.TokensAt(tt, key)
			} else {
				got = dec.(*limit.Tier).TokensAt(tt, key)
			}
			w, _ := new(big.Rat).Sub(new(big.Rat).SetInt64(int64(p.b)), new(big.Rat).Quo(o.e, p.cost())).Float64()
			if d := got - w; d > 1e-6 || d < -1e-6 {
				fail("TokensAt", "%s: got %.9f want %.9f", pname, got, w)
			}
			stats["tokens"]++
			tr("tokens pol=%v n=%d t-c=%d", p, n, tms-clk.NowMillis())
		case op < 15: // ReserveN
			// n > burst is refused before the engine is read: no time used
			dt := o.hw
			if n <= p.b {
				dt, _ = o.advance(tms, c)
			}
			var r *limit.Reservation
			if pname == "limiter" {
				r = l.ReserveN(tt, key, n)
			} else {
				r = dec.(*limit.Tier).ReserveN(tt, key, n)
			}
			nc := new(big.Rat).Mul(new(big.Rat).SetInt64(int64(n)), p.cost())
			after := new(big.Rat).Add(o.e, nc)
			wantOK := n <= p.b && after.Cmp(o.maxDebt) <= 0
			if r.OK() != wantOK {
				fail("ReserveN", "%s n=%d: OK %v want %v", pname, n, r.OK(), wantOK)
				break
			}
			if !wantOK {
				stats["reserve-refused"]++
				tr("reserve-refused pol=%v n=%d t-c=%d", p, n, tms-clk.NowMillis())
				break
			}
			bc := new(big.Rat).Mul(new(big.Rat).SetInt64(int64(p.b)), p.cost())
			wait := max(a51Ceil(new(big.Rat).Sub(after, bc)), 0)
			if got := r.DelayFrom(time.UnixMilli(dt)); got != a51ms(wait) {
				fail("ReserveN", "%s n=%d t-c=%d: DelayFrom(decided at) %v want %v", pname, n, tms-c, got, a51ms(wait))
			}
			dirty()
			res = append(res, &a51Res{r: r, e0: new(big.Rat).Set(o.e), at0: dt, clean: true, filled: after.Cmp(o.maxDebt) == 0, when: dt})
			o.e.Set(after)
			stats["reserve"]++
			tr("reserve pol=%v n=%d t-c=%d", p, n, tms-clk.NowMillis())
		case op < 17: // Cancel the latest reservation (exact when nothing wrote since)
			if len(res) == 0 {
				break
			}
			r := res[len(res)-1]
			res = res[:len(res)-1]
			// Cancel takes no t: the oracle reads at the latest time used.
			if r.clean && !r.filled && o.hw-r.when < 1<<31 {
				dt := o.hw
				e := new(big.Rat).Sub(r.e0, new(big.Rat).SetInt64(dt-r.at0))
				if e.Sign() < 0 {
					e.SetInt64(0)
				}
				o.e, o.at = e, dt
				r.r.Cancel()
				stats["cancel-exact"]++
				tr("cancel-exact pol=%v n=%d t-c=%d", p, n, tms-clk.NowMillis())
				// the next reservation down is clean again only if it was before this one's write; keep it dirty (safe)
			} else if !r.clean || r.filled {
				// gives back nothing or part: resync the oracle by a read
				// at the latest time used, checking it is never below the truth
				r.r.Cancel()
				// it may give back all, part or nothing: resync the oracle
				// from a read at the latest time used (debts here are
				// multiples of 1/3 ms)
				got := l.TokensAt(time.UnixMilli(o.hw), key)
				e := new(big.Rat).SetFloat64(float64(cur.b) - got)
				e.Mul(e, cur.cost())
				f, _ := e.Float64()
				e = big.NewRat(int64(f*3+0.5*sign(f)), 3)
				if e.Cmp(o.e) > 0 {
					fail("Cancel", "a cancel raised the debt: %s ms, was %s", e.FloatString(3), o.e.FloatString(3))
				}
				o.e = e
				o.at = o.hw
				stats["cancel-dirty"]++
				tr("cancel-dirty pol=%v n=%d t-c=%d", p, n, tms-clk.NowMillis())
				res = res[:0]
			}
		case op < 18: // SetLimit / SetBurst
			np := cs.policies[rng.IntN(len(cs.policies))]
			need := new(big.Rat).Mul(new(big.Rat).SetInt64(int64(np.b)), np.cost())
			fits := need.Cmp(o.maxDebt) <= 0
			var err error
			if np.num*cur.den == cur.num*np.den {
				err = l.SetBurst(np.b)
			} else {
				err = l.SetLimit(np.limit())
				if err == nil && np.b != cur.b {
					err = l.SetBurst(np.b)
				}
			}
			if (err == nil) != fits && np.num*cur.den == cur.num*np.den {
				fail("SetBurst", "%v: err %v, fits %v", np, err, fits)
			}
			if err != nil {
				// put the old policy back whole
				_ = l.SetLimit(cur.limit())
				if e2 := l.SetBurst(cur.b); e2 != nil {
					fail("Set", "cannot restore %v: %v", cur, e2)
				}
				stats["set-refused"]++
				tr("set-refused pol=%v n=%d t-c=%d", p, n, tms-clk.NowMillis())
				break
			}
			if !l.Exact() {
				_ = l.SetLimit(cur.limit())
				_ = l.SetBurst(cur.b)
				stats["set-inexact"]++
				tr("set-inexact pol=%v n=%d t-c=%d", p, n, tms-clk.NowMillis())
				break
			}
			cur = np
			stats["set"]++
			tr("set pol=%v n=%d t-c=%d", p, n, tms-clk.NowMillis())
		default: // a huge jump, forward then back then forward
			clk.Set(clk.NowMillis() + a51Steps[len(a51Steps)-5+rng.IntN(5)])
			stats["jump"]++
			tr("jump pol=%v n=%d t-c=%d", p, n, tms-clk.NowMillis())
		}
	}
	return bad, stats
}

var a51Trace = false

// a51Start is where the fake clock starts (ms since 1970).
var a51Start int64 = 1_700_000_000_000

func sign(f float64) float64 {
	if f < 0 {
		return -1
	}
	return 1
}

func TestAudit51ClockJumpOracle(t *testing.T) {
	testsize.Serial(t)
	for _, cs := range a51Cases() {
		t.Run(cs.name, func(t *testing.T) {
			total := map[string]int{}
			seeds := uint64(6)
			if cs.eng == limit.CountMin {
				seeds = 3 // slower: each jump over a Period allocates generations
			}
			for seed := uint64(1); seed <= uint64(testsize.Pick(int(seeds), 2)); seed++ {
				steps := 3000
				if cs.base.den == 60 {
					steps = 1200 // the slowest (a debt of days: many rotations' allocations)
				}
				bad, st := a51Run(t, cs, seed, steps)
				for k, v := range st {
					total[k] += v
				}
				for _, b := range bad {
					t.Errorf("seed %d: %s", seed, b)
				}
			}
			t.Logf("%v", total)
		})
	}
}

func a51Rat(x int64) *big.Rat { return new(big.Rat).SetInt64(x) }

func a51Quo(a, b *big.Rat) *big.Rat { return new(big.Rat).Quo(a, b) }
