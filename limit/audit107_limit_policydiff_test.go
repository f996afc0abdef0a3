package limit_test

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

// a107Oracle is the rational token bucket the package documentation
// states for an exact policy, with a key's debt held as time to drain
// (seconds, a big.Rat): a request of n tokens under rate r costs n/r s
// against a burst of b/r s; a denial adds RejectCost/r s; the debt is
// clamped at MaxDebt/R s and drains one second a second.
type a107Oracle struct {
	debt   *big.Rat // seconds
	at     int64    // ms
	maxDeb *big.Rat // seconds
}

// a107Rat is f as the package reads a rate or a RejectCost: the short
// fraction it stands for (1/3 for float64(1.0/3)), as a decimal means
// what it says.
func a107Rat(f float64) *big.Rat {
	for den := int64(1); den <= 1<<20; den++ {
		r := new(big.Rat).SetFrac64(int64(f*float64(den)+0.5), den)
		if g, _ := r.Float64(); g == f && f*float64(den) < 1<<52 {
			return r
		}
	}
	return new(big.Rat).SetFloat64(f)
}

func (o *a107Oracle) advance(ms int64) {
	if ms <= o.at {
		return
	}
	d := new(big.Rat).SetFrac64(ms-o.at, 1000)
	o.at = ms
	o.debt.Sub(o.debt, d)
	if o.debt.Sign() < 0 {
		o.debt.SetInt64(0)
	}
}

func (o *a107Oracle) allow(ms int64, r float64, burst, n int, rej float64) bool {
	o.advance(ms)
	cost := new(big.Rat).Quo(new(big.Rat).SetInt64(int64(n)), a107Rat(r))
	b := new(big.Rat).Quo(new(big.Rat).SetInt64(int64(burst)), a107Rat(r))
	if n <= burst && new(big.Rat).Add(o.debt, cost).Cmp(b) <= 0 {
		o.debt.Add(o.debt, cost)
		return true
	}
	if rej > 0 {
		o.debt.Add(o.debt, new(big.Rat).Quo(a107Rat(rej), a107Rat(r)))
		if o.debt.Cmp(o.maxDeb) > 0 {
			o.debt.Set(o.maxDeb)
		}
	}
	return false
}

type a107Policy struct {
	rate  float64
	burst int
}

// TestAudit107LimitPolicyPathsAgree (audit 107; passes today: no test
// drove the Charges a policy carries through random SetLimit/SetBurst
// on the Buckets engine against the float paths and an oracle). Four
// twin limiters (one configuration, one clock schedule) take the same
// policy changes and requests: one decides with Allow (the policy's
// Charges), one with AllowN(t, k, 1) (floats), one with DecideN(t, k,
// 1), one with Allow of a Tier of the current policy (the Tier's own
// Charges). Every decision and TokensAt must agree, and, while Exact()
// has held throughout, match the rational bucket (a107Oracle). Configs
// the Buckets engine refuses are logged and skipped.
func TestAudit107LimitPolicyPathsAgree(t *testing.T) {
	type cfg struct {
		rate    float64
		burst   int
		maxDebt float64
		rej     float64
		strict  bool
	}
	cfgs := []cfg{
		{10, 20, 0, 0, true}, {10, 20, 200, 0.5, true}, {7, 3, 20, 1, true}, {3, 1, 50, 0, true},
		{1000, 1, 64, 1, true}, {0.37, 2, 10, 0.25, true}, {0.37, 2, 0, 0, true}, {1e6, 10000, 20000, 3, true},
		{12.5, 5, 40, 0.5, false}, {10, 20, 200, 0.5, false}, {2, 2, 8, 2, true},
		{1e6, 1 << 24, 1 << 24, 1, true}, {1e6, 1 << 23, 1 << 24, 1, true}, {999, 7, 700, 0.125, true}, {1024, 1, 4, 0.5, true},
	}
	rates := []float64{10, 3, 7, 1, 0.5, 0.37, 1e3, 1e4, 1e6, 2.5, 1.0 / 3, 100, 13, 0.1, 1e-3, 64, 6}
	bursts := []int{1, 2, 3, 5, 20, 100}
	seeds := testsize.Pick(30, 3)
	for ci, c := range cfgs {
		for seed := range seeds {
			rng := rand.New(rand.NewPCG(uint64(ci), uint64(seed)))
			opts := []limit.Option{limit.WithEngine(limit.Buckets), limit.WithCapacity(16, 0.01), limit.WithSeed(3),
				limit.WithRejectCost(c.rej), limit.WithStrict(c.strict)}
			if c.maxDebt > 0 {
				opts = append(opts, limit.WithMaxDebt(c.maxDebt))
			}
			var ls [4]*limit.Limiter
			var clks [4]*limittest.FakeClock
			skip := false
			for i := range ls {
				clks[i] = limittest.NewFakeClock()
				clks[i].Set(1 << 30)
				l, err := limit.New(limit.Limit(c.rate), c.burst, append(opts, limit.WithClock(clks[i]))...)
				if err != nil {
					t.Logf("cfg %+v: %v", c, err)
					skip = true
					break
				}
				ls[i] = l
			}
			if skip {
				break
			}
			pol := a107Policy{c.rate, c.burst}
			or := &a107Oracle{debt: new(big.Rat), at: 1 << 30,
				maxDeb: new(big.Rat).Quo(a107Rat(ls[0].MaxDebt()), a107Rat(c.rate))}
			exactSeen, noTier := true, true
			var hist []string
			for step := range testsize.Pick(300, 200) {
				switch rng.IntN(12) {
				case 0:
					r := rates[rng.IntN(len(rates))]
					var errs [4]error
					for i, l := range ls {
						errs[i] = l.SetLimit(limit.Limit(r))
					}
					if (errs[0] == nil) != (errs[1] == nil) || (errs[0] == nil) != (errs[2] == nil) {
						t.Fatalf("twins disagree on SetLimit(%v): %v", r, errs)
					}
					if errs[0] == nil {
						pol.rate = r
					}
					hist = append(hist, fmt.Sprintf("SetLimit(%v)=%v", r, errs[0] == nil))
					continue
				case 1:
					b := bursts[rng.IntN(len(bursts))]
					var errs [4]error
					for i, l := range ls {
						errs[i] = l.SetBurst(b)
					}
					if errs[0] == nil {
						pol.burst = b
					}
					hist = append(hist, fmt.Sprintf("SetBurst(%d)=%v", b, errs[0] == nil))
					continue
				}
				if rng.IntN(4) == 0 {
					// A Tier at a rate where the cost rounds: Allow (its
					// Charges), AllowN and DecideN of three twins' tiers.
					r, bu := rates[rng.IntN(len(rates))], bursts[rng.IntN(len(bursts))]
					var ts [4]*limit.Tier
					var errs [4]error
					for i := range ts {
						ts[i], errs[i] = ls[i].Tier("r", limit.Limit(r), bu)
					}
					if errs[0] != nil {
						continue
					}
					for _, ck := range clks {
						ck.Advance(time.Millisecond)
					}
					now := clks[0].Now()
					a, b, d := ts[0].Allow("k"), ts[1].AllowN(now, "k", 1), ts[2].DecideN(now, "k", 1).Allowed
					e := ts[3].PeekN(now, "k", 1).Allowed
					if e != ts[3].Allow("k") {
						t.Fatalf("tier %v/%d: PeekN and Allow disagree on one instant", r, bu)
					}
					hist = append(hist, fmt.Sprintf("Tier(%v,%d):%v/%v/%v", r, bu, a, b, d))
					if a != b || a != d || a != e {
						t.Fatalf("cfg %+v seed %d step %d tier %v/%d (Exact %v): Allow %v, AllowN %v, DecideN %v, PeekN %v\n%v", c, seed, step, r, bu, ts[0].Exact(), a, b, d, e, hist)
					}
					exactSeen, noTier = false, false // the oracle does not follow tiers
					continue
				}
				adv := time.Duration([]int{0, 0, 0, 1, 3, 17, 100, 1000, 5000}[rng.IntN(9)]) * time.Millisecond
				for _, ck := range clks {
					ck.Advance(adv)
				}
				now := clks[0].Now()
				tier, err := ls[3].Tier("", limit.Limit(pol.rate), pol.burst)
				if err != nil {
					t.Fatalf("Tier(%+v) of the current policy: %v", pol, err)
				}
				a := ls[0].Allow("k")
				tr := tier.Allow("k")
				b := ls[1].AllowN(now, "k", 1)
				d := ls[2].DecideN(now, "k", 1).Allowed
				hist = append(hist, fmt.Sprintf("+%v:%v/%v/%v", adv, a, b, d))
				if a != b || a != d || a != tr {
					t.Fatalf("cfg %+v seed %d step %d policy %+v: Allow %v, AllowN %v, DecideN %v, Tier.Allow %v\n%v", c, seed, step, pol, a, b, d, tr, hist)
				}
				ta, tb, td := ls[0].TokensAt(now, "k"), ls[1].TokensAt(now, "k"), ls[2].TokensAt(now, "k")
				if ta != tb || ta != td {
					t.Fatalf("cfg %+v seed %d step %d: TokensAt %v / %v / %v\n%v", c, seed, step, ta, tb, td, hist)
				}
				want := or.allow(now.UnixMilli(), pol.rate, pol.burst, 1, c.rej)
				exactSeen = exactSeen && ls[0].Exact()
				if noTier && a && !want {
					t.Fatalf("cfg %+v seed %d step %d policy %+v (Exact %v): Allow admitted early: the rational bucket denies (debt %v s)\n%v",
						c, seed, step, pol, ls[0].Exact(), or.debt.FloatString(6), hist)
				}
				if exactSeen && want != a {
					t.Fatalf("cfg %+v seed %d step %d policy %+v (Exact): Allow %v, rational bucket %v (debt %v s)\n%v",
						c, seed, step, pol, a, want, or.debt.FloatString(6), hist)
				}
			}
		}
	}
}
