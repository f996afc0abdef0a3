package limit_test

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// a59Window describes one window's engine for the mixes below.
type a59Window struct {
	engine limit.Engine
	gens   uint32 // count-min only
}

func (w a59Window) String() string {
	if w.engine == limit.Buckets {
		return "B"
	}
	return fmt.Sprintf("CM%d", w.gens)
}

func (w a59Window) opts(clk *limittest.FakeClock, extra ...limit.Option) []limit.Option {
	o := []limit.Option{limit.WithClock(clk), limit.WithSeed(11)}
	if w.engine == limit.Buckets {
		o = append(o, limit.WithEngine(limit.Buckets))
	} else {
		o = append(o, limit.WithEngine(limit.CountMin), limit.WithGenerations(w.gens))
	}
	return append(o, extra...)
}

var a59Mixes = [][3]a59Window{
	{{limit.CountMin, 2}, {limit.CountMin, 3}, {limit.CountMin, 8}},
	{{limit.CountMin, 8}, {limit.Buckets, 0}, {limit.CountMin, 4}},
	{{limit.Buckets, 0}, {limit.CountMin, 2}, {limit.Buckets, 0}},
	{{limit.CountMin, 4}, {limit.CountMin, 8}, {limit.Buckets, 0}},
}

// Multi's doc: "Every window after the first is read before anything is
// taken, and a request one of them denies takes nothing (the first
// window in order that denies on that read is the one that denies, and
// charges its RejectCost)"; "Each window's RejectCost is charged only by
// the window that denies." Three windows over mixed engines and
// generation counts, one or two of them full for the key: the windows
// that do not deny keep exactly their tokens, the first denying window
// pays exactly its RejectCost, a later denying one nothing. MaxDebt =
// burst + RejectCost, so a take that empties a window could never come
// back.
func TestAudit59MultiDenialTakesNothingChargesFirstDenier(t *testing.T) {
	for _, mix := range a59Mixes {
		for _, full := range [][]int{{0}, {1}, {2}, {1, 2}, {0, 2}, {0, 1, 2}} {
			t.Run(fmt.Sprintf("%v/full=%v", mix, full), func(t *testing.T) {
				clk := limittest.NewFakeClock()
				clk.Set(a59Start)
				var ws [3]*limit.Limiter
				bursts := [3]int{20, 10, 30}
				costs := [3]float64{2, 3, 4}
				for i, w := range mix {
					ws[i] = limit.MustNew(10, bursts[i], w.opts(clk, limit.WithRejectCost(costs[i]),
						limit.WithMaxDebt(float64(bursts[i])+costs[i]))...)
				}
				m, err := limit.NewMulti(ws[:]...)
				if err != nil {
					t.Fatal(err)
				}
				at := a59At(a59Start)
				// Every window owes 5; the full ones owe their burst - 1.
				for i, w := range ws {
					n := 5
					for _, f := range full {
						if f == i {
							n = bursts[i] - 1
						}
					}
					if !w.AllowN(at, "k", n) {
						t.Fatalf("window %d: AllowN(%d) denied", i, n)
					}
				}
				var before [3]float64
				for i, w := range ws {
					before[i] = w.TokensAt(at, "k")
				}
				d := m.DecideKeys(at, 2, "k")
				if d.Allowed {
					t.Fatalf("admitted with windows %v full", full)
				}
				first := full[0]
				for i, w := range ws {
					want := before[i]
					if i == first {
						want -= costs[i]
					}
					if got := w.TokensAt(at, "k"); got != want {
						t.Errorf("window %d (%v): tokens %v after the denial; want %v (before %v; first denier %d, RejectCost %v)",
							i, mix[i], got, want, before[i], first, costs[i])
					}
				}
				if d.Burst != bursts[first] && len(full) == 1 {
					t.Errorf("Decision.Burst %d; want the denying window's %d", d.Burst, bursts[first])
				}
			})
		}
	}
}

// One limiter as two windows (per-user and per-tenant keys on one
// limiter, or the same key twice): a take by the first window makes the
// second deny, so the first is refunded; nothing wrote the cells in
// between, so it comes back exactly (Multi's doc: "a denial by any
// window gives back what the windows before it took (all of it, unless
// a concurrent request touched the same cells)"). On count-min limiters
// of 2..8 generations (the refund walks the inline receipts and the
// rest), and across promotions, the limiter's tokens after the denial
// are those of a twin that never saw the request.
func TestAudit59MultiSameLimiterRefundsExactly(t *testing.T) {
	for _, g := range []uint32{2, 3, 4, 8} {
		for j := 0; j <= int(g); j++ {
			for _, keys := range [][]string{{"k"}, {"k", "k"}, {"u", "k"}} {
				t.Run(fmt.Sprintf("G=%d/promotions=%d/keys=%v", g, j, keys), func(t *testing.T) {
					clk := limittest.NewFakeClock()
					clk.Set(a59Start)
					period := a59Period(g)
					opts := []limit.Option{limit.WithClock(clk), limit.WithSeed(9), limit.WithGenerations(g),
						limit.WithPeriod(period), limit.WithSize(1, 1)} // every key collides
					a := limit.MustNew(10, 20, opts...)
					twin := limit.MustNew(10, 20, opts...)
					m, err := limit.NewMulti(a, a)
					if err != nil {
						t.Fatal(err)
					}
					t0 := int64(a59Start + 5)
					t1 := t0 + int64(j)*period.Milliseconds() + 1
					for _, l := range []*limit.Limiter{a, twin} {
						clk.Set(t0)
						l.AllowN(a59At(t0), "k", 7)
						clk.Set(t1)
						for l.TokensAt(a59At(t1), "k") > 4.5 {
							l.AllowN(a59At(t1), "k", 1)
						}
					}
					// Tokens in (3.5, 4.5]: the first take of 3 fits, the
					// second does not.
					if !a.PeekN(a59At(t1), "k", 3).Allowed || a.PeekN(a59At(t1), "k", 6).Allowed {
						t.Fatalf("setup: tokens %v", a.TokensAt(a59At(t1), "k"))
					}
					d := m.DecideKeys(a59At(t1), 3, keys...)
					if d.Allowed {
						t.Fatal("admitted 2 x 3 against a debt of 16 in one limiter")
					}
					for _, dt := range []int64{0, 1, 300, 2000} {
						clk.Set(t1 + dt)
						at := a59At(t1 + dt)
						if got, want := a.TokensAt(at, "k"), twin.TokensAt(at, "k"); got != want {
							t.Errorf("t1+%d: tokens %v after the refunded take; want the twin's %v", dt, got, want)
						}
					}
				})
			}
		}
	}
}

// Multi's Decision against two rational buckets (each window a key
// alone, exact limiters, no RejectCost), over random schedules on mixed
// engines and generation counts: Allowed iff both buckets fit;
// Remaining the least; ResetAfter the later; NextAfter by combine's
// rule; RetryAfter the time every window admits (a retry then is
// admitted, one 1 ms earlier is not); Never above a burst.
func TestAudit59MultiDecisionMatchesRationalBuckets(t *testing.T) {
	type spec struct {
		num, den int64 // rate num/den per second
	}
	specs := [][2]spec{
		{{10, 1}, {1, 1}},
		{{5, 1}, {1, 3}},
		{{1000, 1}, {20, 1}},
	}
	bursts := [][2]int{{20, 5}, {8, 3}, {50, 40}}
	for si, sp := range specs {
		for _, mix := range a59Mixes {
			w := [2]a59Window{mix[0], mix[1]}
			t.Run(fmt.Sprintf("spec%d/%v", si, w), func(t *testing.T) {
				clk := limittest.NewFakeClock()
				clk.Set(a59Start)
				var ls [2]*limit.Limiter
				var os [2]*a59Bucket
				for i := range ls {
					rate := limit.Limit(float64(sp[i].num) / float64(sp[i].den))
					if sp[i].den != 1 {
						rate = limit.Every(time.Duration(sp[i].den) * time.Second / time.Duration(sp[i].num))
					}
					l, err := limit.New(rate, bursts[si][i], w[i].opts(clk)...)
					if err != nil {
						t.Skipf("window %d: %v", i, err)
					}
					if !l.Exact() {
						t.Skipf("window %d not exact", i)
					}
					ls[i] = l
					os[i] = newA59Bucket(big.NewRat(sp[i].num, sp[i].den), bursts[si][i], a59Start)
				}
				m, err := limit.NewMulti(ls[:]...)
				if err != nil {
					t.Fatal(err)
				}
				rng := rand.New(rand.NewPCG(uint64(si), 1))
				now := int64(a59Start)
				maxB := max(bursts[si][0], bursts[si][1])
				for step := 0; step < 400; step++ {
					now += int64(rng.IntN(300))
					clk.Set(now)
					n := 1 + rng.IntN(maxB+1)
					if rng.IntN(3) > 0 {
						n = 1 + rng.IntN(3)
					}
					var ds [2]limit.Decision
					fit := true
					for i, o := range os {
						o.advance(now)
						ds[i] = o.decision(n, false)
						fit = fit && ds[i].Allowed
					}
					for i, o := range os {
						if fit {
							ds[i] = o.decision(n, true)
						} else {
							ds[i] = o.state(n)
						}
					}
					want := a59Combine(ds, fit)
					got := m.DecideKeys(a59At(now), n, "k")
					a59Same(t, fmt.Sprintf("step %d (n=%d)", step, n), a59Strip(got), a59Strip(want))
					if t.Failed() {
						return
					}
				}
			})
		}
	}
}

// a59Strip zeroes the fields a59Combine does not model (Limit, Policy;
// Burst names the binding window, which ties leave open).
func a59Strip(d limit.Decision) limit.Decision {
	d.Burst = 0
	return d
}

func a59Combine(ds [2]limit.Decision, fit bool) limit.Decision {
	d := limit.Decision{Allowed: fit, Remaining: min(ds[0].Remaining, ds[1].Remaining)}
	d.ResetAfter = max(ds[0].ResetAfter, ds[1].ResetAfter)
	switch {
	case ds[0].Remaining < ds[1].Remaining:
		d.NextAfter = ds[0].NextAfter
	case ds[1].Remaining < ds[0].Remaining:
		d.NextAfter = ds[1].NextAfter
	case ds[0].NextAfter == 0 || ds[1].NextAfter == 0:
		d.NextAfter = 0
	default:
		d.NextAfter = max(ds[0].NextAfter, ds[1].NextAfter)
	}
	if !fit {
		if ds[0].Never || ds[1].Never {
			d.Never, d.RetryAfter = true, limit.InfDuration
		} else {
			d.RetryAfter = max(ds[0].RetryAfter, ds[1].RetryAfter)
		}
	}
	return d
}

// Multi's DecideKeys doc on a denial: "RetryAfter ... the time when
// every window admits the request, so a retry at t+RetryAfter is
// admitted by all of them (if nothing else happens to the keys) and one
// 1 ms earlier is not"; and Decision's "NextAfter ... On a denial it is
// at most RetryAfter". Mixed engines and generation counts, RejectCost
// on every window, random traffic: after each denial, the windows are
// peeked (no write) at t+RetryAfter-1ms and t+RetryAfter.
func TestAudit59MultiRetryAfterPredictsAllWindows(t *testing.T) {
	for mi, mix := range a59Mixes {
		t.Run(fmt.Sprintf("%v", mix), func(t *testing.T) {
			clk := limittest.NewFakeClock()
			clk.Set(a59Start)
			rates := [3]limit.Limit{10, 3, limit.Every(7 * time.Millisecond)}
			bursts := [3]int{12, 5, 30}
			var ws [3]*limit.Limiter
			for i, w := range mix {
				ws[i] = limit.MustNew(rates[i], bursts[i], w.opts(clk, limit.WithRejectCost(float64(i)+0.5))...)
			}
			m, _ := limit.NewMulti(ws[:]...)
			rng := rand.New(rand.NewPCG(uint64(mi), 2))
			now := int64(a59Start)
			checked := 0
			for step := 0; step < 1500; step++ {
				now += int64(rng.IntN(120))
				clk.Set(now)
				k := fmt.Sprintf("k%d", rng.IntN(2))
				n := 1 + rng.IntN(4)
				d := m.DecideKeys(a59At(now), n, k)
				if d.Allowed || d.Never {
					continue
				}
				if d.NextAfter > d.RetryAfter {
					t.Errorf("step %d: NextAfter %v > RetryAfter %v", step, d.NextAfter, d.RetryAfter)
				}
				at := now + d.RetryAfter.Milliseconds()
				clk.Set(at - 1)
				early := true
				for _, w := range ws {
					early = early && w.PeekN(a59At(at-1), k, n).Allowed
				}
				clk.Set(at)
				for i, w := range ws {
					if !w.PeekN(a59At(at), k, n).Allowed {
						t.Errorf("step %d: window %d (%v) denies %d at t+RetryAfter (%v)", step, i, mix[i], n, d.RetryAfter)
					}
				}
				if early {
					t.Errorf("step %d: every window admits %d at t+RetryAfter-1ms (RetryAfter %v)", step, n, d.RetryAfter)
				}
				now = at // the peeks moved the limiters' time there
				checked++
				if t.Failed() {
					return
				}
			}
			if checked < 50 {
				t.Fatalf("only %d denials checked", checked)
			}
		})
	}
}

// The same prediction after the shared clock steps back, with the
// windows' times apart (a window decided at a later reading than the
// other): the package doc's durations "are measured so that they are
// never early ... with the lag to the time the limiter decided at
// included", and DecideKeys' RetryAfter is still the time when every
// window admits (a retry then is admitted, one 1 ms earlier is not).
func TestAudit59MultiRetryAfterAfterClockStepBack(t *testing.T) {
	for mi, mix := range a59Mixes {
		t.Run(fmt.Sprintf("%v", mix), func(t *testing.T) {
			clk := limittest.NewFakeClock()
			clk.Set(a59Start)
			rates := [2]limit.Limit{10, 4}
			bursts := [2]int{8, 6}
			var ws [2]*limit.Limiter
			for i := range ws {
				ws[i] = limit.MustNew(rates[i], bursts[i], mix[i].opts(clk)...)
			}
			m, _ := limit.NewMulti(ws[:]...)
			rng := rand.New(rand.NewPCG(uint64(mi), 3))
			now := int64(a59Start)
			checked := 0
			for step := 0; step < 1500; step++ {
				now += int64(rng.IntN(150))
				clk.Set(now)
				k := fmt.Sprintf("k%d", rng.IntN(2))
				if rng.IntN(4) == 0 {
					// One window decides a little later, then the clock steps back.
					w := ws[rng.IntN(2)]
					clk.Set(now + int64(rng.IntN(80)))
					w.AllowN(clk.Now(), k, 1)
					clk.Set(now)
				}
				n := 1 + rng.IntN(3)
				d := m.DecideKeys(clk.Now(), n, k)
				if d.Allowed || d.Never {
					continue
				}
				at := now + d.RetryAfter.Milliseconds()
				clk.Set(at - 1)
				early := true
				for _, w := range ws {
					early = early && w.PeekN(clk.Now(), k, n).Allowed
				}
				clk.Set(at)
				for i, w := range ws {
					if !w.PeekN(clk.Now(), k, n).Allowed {
						t.Errorf("step %d: window %d (%v) denies %d at t+RetryAfter (%v)", step, i, mix[i], n, d.RetryAfter)
					}
				}
				if early {
					t.Errorf("step %d: every window admits %d at t+RetryAfter-1ms (RetryAfter %v)", step, n, d.RetryAfter)
				}
				now = at
				checked++
				if t.Failed() {
					return
				}
			}
			if checked < 50 {
				t.Fatalf("only %d denials checked", checked)
			}
		})
	}
}

// The same on the Buckets engine: one limiter as both windows for one
// key, a take that the second window's take then finds too much, given
// back: the limiter reads as a twin that never saw the request (Multi's
// doc: "all of it, unless a concurrent request touched the same
// cells"; Reservation.Cancel: the Buckets entry "is given back exactly
// when nothing has written it since"), for takes of 1 to 6 tokens
// (larger than one refund step: 3 tokens for New(10, 20)).
func TestAudit59MultiSameLimiterRefundsExactlyBuckets(t *testing.T) {
	for n := 1; n <= 6; n++ {
		for _, keys := range [][]string{{"k"}, {"k", "k"}} {
			t.Run(fmt.Sprintf("n=%d/keys=%v", n, keys), func(t *testing.T) {
				clk := limittest.NewFakeClock()
				clk.Set(a59Start)
				opts := []limit.Option{limit.WithClock(clk), limit.WithSeed(9), limit.WithEngine(limit.Buckets)}
				a := limit.MustNew(10, 20, opts...)
				twin := limit.MustNew(10, 20, opts...)
				m, _ := limit.NewMulti(a, a)
				t1 := int64(a59Start + 850) // 0.5 of the 9 still owed
				for _, l := range []*limit.Limiter{a, twin} {
					clk.Set(a59Start)
					l.AllowN(clk.Now(), "k", 9)
					clk.Set(t1)
					l.AllowN(clk.Now(), "k", 20-2*n) // 2n - 0.5 tokens left: fits n, not 2n
				}
				tok := a.TokensAt(clk.Now(), "k")
				if tok < float64(n) || tok >= float64(2*n) {
					t.Fatalf("setup: tokens %v for n=%d", tok, n)
				}
				if d := m.DecideKeys(clk.Now(), n, keys...); d.Allowed {
					t.Fatal("admitted 2n")
				}
				for _, dt := range []int64{0, 1, 300, 2000} {
					clk.Set(t1 + dt)
					if got, want := a.TokensAt(clk.Now(), "k"), twin.TokensAt(clk.Now(), "k"); got != want {
						t.Errorf("t1+%d: tokens %v after the refunded take; want the twin's %v", dt, got, want)
					}
				}
			})
		}
	}
}

// Multi with an Inf window and a conservative count-min window: "An Inf
// window never binds" (it is skipped for Remaining and names the
// Decision only when every window is Inf), and a conservative window's
// take never comes back, so a request a later window denies must take
// nothing from it (Multi's doc: "a request one of them denies takes
// nothing").
func TestAudit59MultiInfAndConservative(t *testing.T) {
	clk := limittest.NewFakeClock()
	clk.Set(a59Start)
	inf := limit.MustNew(limit.Inf, 1, limit.WithClock(clk), limit.WithName("inf"))
	cu := limit.MustNew(10, 20, limit.WithClock(clk), limit.WithConservativeUpdate(true), limit.WithGenerations(3), limit.WithName("cu"))
	b := limit.MustNew(5, 6, limit.WithClock(clk), limit.WithEngine(limit.Buckets), limit.WithName("b"))
	m, _ := limit.NewMulti(inf, cu, b)
	d := m.DecideKeys(clk.Now(), 4, "k")
	if !d.Allowed || d.Remaining != 2 || d.Policy != "b" {
		t.Fatalf("first decision %+v; want admitted, Remaining 2 (b's), Policy b", d)
	}
	before := cu.TokensAt(clk.Now(), "k")
	for range 3 {
		if d := m.DecideKeys(clk.Now(), 3, "k"); d.Allowed || d.Policy != "b" || d.RetryAfter != 200*time.Millisecond {
			t.Fatalf("denial %+v; want denied by b, RetryAfter 200ms", d)
		}
	}
	if got := cu.TokensAt(clk.Now(), "k"); got != before {
		t.Errorf("conservative window: tokens %v after three denials by the later window; want %v (nothing taken)", got, before)
	}
	mi, _ := limit.NewMulti(inf, inf)
	if d := mi.DecideKeys(clk.Now(), 1000, "k"); !d.Allowed || d.Policy != "inf" {
		t.Errorf("all-Inf Multi: %+v; want admitted, named inf", d)
	}
}

// Multi.Stats: "Admitted and Denied count the Multi's own decisions ...
// one per call, admitted only if every window admitted), which its
// windows do not count"; Engine is Auto for mixed engines. Over mixed
// engines, with admissions, denials by each window and the refund path
// (one limiter as two windows).
func TestAudit59MultiStatsCountOnce(t *testing.T) {
	clk := limittest.NewFakeClock()
	clk.Set(a59Start)
	a := limit.MustNew(10, 5, limit.WithClock(clk), limit.WithGenerations(3))
	b := limit.MustNew(10, 3, limit.WithClock(clk), limit.WithEngine(limit.Buckets))
	m, _ := limit.NewMulti(a, b, a)
	var adm, den uint64
	for i := range 12 {
		if m.DecideKeys(clk.Now(), 1+i%2, "k", "k", "j").Allowed {
			adm++
		} else {
			den++
		}
	}
	st := m.Stats()
	if st.Admitted != adm || st.Denied != den || adm == 0 || den == 0 {
		t.Errorf("Multi Stats: %d admitted, %d denied; the calls: %d, %d", st.Admitted, st.Denied, adm, den)
	}
	for i, w := range []*limit.Limiter{a, b} {
		if s := w.Stats(); s.Admitted != 0 || s.Denied != 0 {
			t.Errorf("window %d counted the Multi's decisions: %d admitted, %d denied", i, s.Admitted, s.Denied)
		}
	}
	if st.Engine != limit.Auto {
		t.Errorf("Engine %v for mixed windows; want Auto", st.Engine)
	}
}
