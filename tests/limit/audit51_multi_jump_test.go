package limit_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// TestAudit51MultiClockJumpOracle: a Multi whose windows have seen
// different times (each window is a Limiter with its own latest time
// used; direct calls on one window move only its time) under a clock
// that steps back and forward by up to years, against one rational
// bucket per window. limit/multi.go, DecideKeys: "The Decision is the
// conjunction of the windows': Remaining is the least, ... RetryAfter
// (on a denial) the time when every window admits the request ...; Never
// if n exceeds any window's burst"; a denial takes nothing (precheck),
// and only the first window in order that denies charges its RejectCost.
func TestAudit51MultiClockJumpOracle(t *testing.T) {
	testsize.Serial(t)
	type win struct {
		pol    a51Pol
		eng    limit.Engine
		maxD   int
		reject int
		inf    bool
	}
	sets := map[string][]win{
		"buckets+countmin":     {{pol: a51Pol{10, 1, 20}, eng: limit.Buckets, maxD: 40, reject: 1}, {pol: a51Pol{1, 1, 5}, eng: limit.CountMin, maxD: 10}},
		"countmin+inf+buckets": {{pol: a51Pol{1, 1, 5}, eng: limit.CountMin, maxD: 10, reject: 2}, {inf: true}, {pol: a51Pol{1000, 7, 8}, eng: limit.Buckets, maxD: 16}},
	}
	for name, ws := range sets {
		t.Run(name, func(t *testing.T) {
			for seed := uint64(1); seed <= 3; seed++ {
				clk := limittest.NewFakeClock()
				clk.Set(1_700_000_000_000)
				var ls []*limit.Limiter
				var os []*a51Oracle
				var real []int // indexes of finite windows
				for i, w := range ws {
					if w.inf {
						ls = append(ls, limit.MustNew(limit.Inf, 1, limit.WithClock(clk)))
						os = append(os, nil)
						continue
					}
					opts := []limit.Option{limit.WithClock(clk), limit.WithEngine(w.eng), limit.WithSeed(seed), limit.WithMaxDebt(float64(w.maxD)), limit.WithRejectCost(float64(w.reject)), limit.WithName(fmt.Sprint("w", i))}
					if w.eng == limit.CountMin {
						opts = append(opts, limit.WithSize(4, 1024), limit.WithPeriod(100000*time.Hour))
					}
					l := limit.MustNew(w.pol.limit(), w.pol.b, opts...)
					if !l.Exact() {
						t.Fatalf("window %d inexact", i)
					}
					ls = append(ls, l)
					md := new(a51Oracle)
					md.maxDebt = a51Rat(int64(w.maxD))
					md.maxDebt.Mul(md.maxDebt, w.pol.cost())
					md.e, md.at, md.hw = a51Rat(0), clk.NowMillis(), clk.NowMillis()
					os = append(os, md)
					real = append(real, i)
				}
				m, err := limit.NewMulti(ls...)
				if err != nil {
					t.Fatal(err)
				}
				rng := rand.New(rand.NewPCG(seed, 5151))
				nbad, admitted, denied, direct := 0, 0, 0, 0
				for step := 0; step < 2000 && nbad < 5; step++ {
					hwMax := int64(0)
					for _, i := range real {
						hwMax = max(hwMax, os[i].hw)
					}
					if clk.NowMillis() < hwMax && rng.IntN(3) == 0 {
						clk.Set(hwMax + int64(rng.IntN(2500)) - 500) // back near the latest time used
					} else if rng.IntN(4) == 0 {
						clk.Set(clk.NowMillis() + a51Steps[rng.IntN(len(a51Steps)-4)])
					} else {
						clk.Set(clk.NowMillis() + int64(rng.IntN(400)))
					}
					c := clk.NowMillis()
					tms := c
					switch rng.IntN(4) {
					case 0:
						tms = c - int64(rng.IntN(4000))
					case 1:
						tms = c + int64(rng.IntN(4000))
					}
					tt := time.UnixMilli(tms)
					if rng.IntN(5) == 0 { // one window alone: its time moves, the others' do not
						i := real[rng.IntN(len(real))]
						n := 1 + rng.IntN(2)
						_, gap := os[i].advance(tms, c)
						want := os[i].decide(ws[i].pol, n, gap, true, ws[i].reject)
						if got := a51Got(ls[i].DecideN(tt, "k", n)); got != want {
							t.Errorf("seed %d step %d: window %d alone: got %+v want %+v", seed, step, i, got, want)
							nbad++
						}
						direct++
						continue
					}
					n := 1 + rng.IntN(4)
					if rng.IntN(10) == 0 {
						n = 6 + rng.IntN(20) // past a burst: Never
					}
					// every window reads the key at t in every decision
					gaps := map[int]int64{}
					for _, i := range real {
						_, gaps[i] = os[i].advance(tms, c)
					}
					// the oracle's decision: peek every window
					allow, never, firstDeny := true, false, -1
					for _, i := range real {
						w := os[i].decide(ws[i].pol, n, gaps[i], false, 0)
						if !w.allowed {
							allow = false
							if firstDeny < 0 {
								firstDeny = i
							}
						}
						never = never || w.never
					}
					var wantRetry time.Duration
					wantRem := 1 << 30
					if allow {
						for _, i := range real {
							w := os[i].decide(ws[i].pol, n, gaps[i], true, 0)
							wantRem = min(wantRem, w.remaining)
						}
					} else {
						os[firstDeny].decide(ws[firstDeny].pol, n, gaps[firstDeny], true, ws[firstDeny].reject) // charges RejectCost only
						for _, i := range real {
							w := os[i].decide(ws[i].pol, n, gaps[i], false, 0)
							if !w.allowed {
								wantRetry = max(wantRetry, w.retry)
							}
							a51Fill(&w, os[i].e, ws[i].pol, gaps[i])
							wantRem = min(wantRem, w.remaining)
						}
						if never {
							wantRetry = limit.InfDuration
						}
					}
					d := m.DecideKeys(tt, n, "k")
					if d.Allowed != allow || d.Never != never || d.Remaining != wantRem || (!allow && d.RetryAfter != wantRetry) {
						t.Errorf("seed %d step %d n=%d t-c=%d: got allowed %v never %v remaining %d retry %v; want %v %v %d %v",
							seed, step, n, tms-c, d.Allowed, d.Never, d.Remaining, d.RetryAfter, allow, never, wantRem, wantRetry)
						nbad++
					}
					if allow {
						admitted++
					} else {
						denied++
					}
					// all-or-nothing: every window's tokens are its oracle's
					for _, i := range real {
						got := ls[i].TokensAt(time.UnixMilli(os[i].hw), "k")
						wt, _ := a51Rat(int64(ws[i].pol.b)).Sub(a51Rat(int64(ws[i].pol.b)), a51Quo(os[i].e, ws[i].pol.cost())).Float64()
						if got-wt > 1e-6 || wt-got > 1e-6 {
							t.Errorf("seed %d step %d: window %d tokens %.6f want %.6f after a Multi decision (allowed %v)", seed, step, i, got, wt, d.Allowed)
							nbad++
						}
					}
				}
				t.Logf("seed %d: %d admitted, %d denied, %d direct", seed, admitted, denied, direct)
			}
		})
	}
}
