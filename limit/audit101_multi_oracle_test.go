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

// a101Win is the rational model of one window: its debt held as time to
// drain (ms, exact), as the package doc's "Tiers and changing the
// limit" describes it, under the current policy (rate, burst), with
// RejectCost c tokens of the current policy and MaxDebt as time.
type a101Win struct {
	rate   *big.Rat // tokens per second, current policy
	burst  int
	reject *big.Rat // tokens of the current policy
	maxT   *big.Rat // MaxDebt, as ms to drain
	debt   *big.Rat // ms to drain
}

func (w *a101Win) tok() *big.Rat { // ms a token costs
	return new(big.Rat).Quo(big.NewRat(1000, 1), w.rate)
}

func (w *a101Win) costMs(n int) *big.Rat { return new(big.Rat).Mul(big.NewRat(int64(n), 1), w.tok()) }

func (w *a101Win) fits(n int) bool {
	if n > w.burst {
		return false
	}
	s := new(big.Rat).Add(w.debt, w.costMs(n))
	return s.Cmp(w.costMs(w.burst)) <= 0
}

func a101Ceil(x *big.Rat) int64 {
	if x.Sign() <= 0 {
		return 0
	}
	q, r := new(big.Int).QuoRem(x.Num(), x.Denom(), new(big.Int))
	if r.Sign() != 0 {
		q.Add(q, big.NewInt(1))
	}
	return q.Int64()
}

// msUntil returns the least whole ms after which n more fit.
func (w *a101Win) msUntil(n int) int64 {
	x := new(big.Rat).Add(w.debt, w.costMs(n))
	x.Sub(x, w.costMs(w.burst))
	return a101Ceil(x)
}

func (w *a101Win) remaining() int {
	// floor(burst - debt/tok)
	x := new(big.Rat).Quo(w.debt, w.tok())
	x.Sub(big.NewRat(int64(w.burst), 1), x)
	if x.Sign() <= 0 {
		return 0
	}
	return int(new(big.Int).Quo(x.Num(), x.Denom()).Int64())
}

func (w *a101Win) state(n int) limit.Decision {
	var d limit.Decision
	d.Remaining = w.remaining()
	switch {
	case n > w.burst:
		d.Never, d.RetryAfter = true, limit.InfDuration
	case w.fits(n):
		d.Allowed = true
	default:
		d.RetryAfter = time.Duration(max(w.msUntil(n), 1)) * time.Millisecond
	}
	if w.debt.Sign() > 0 {
		d.ResetAfter = time.Duration(a101Ceil(w.debt)) * time.Millisecond
		d.NextAfter = time.Duration(w.msUntil(d.Remaining+1)) * time.Millisecond
	}
	return d
}

var a101Changes int

// a101Spec is a limiter configuration whose policy is exact on both
// engines.
type a101Spec struct {
	num, den int64 // rate num/den per second
	burst    int
	reject   *big.Rat
}

func (s a101Spec) limit() limit.Limit {
	if s.num == 1 {
		return limit.Every(time.Duration(s.den) * time.Second)
	}
	return limit.Limit(float64(s.num) / float64(s.den))
}

// TestAudit101MultiOracleRejectSetLimit: Multi's Decision against three
// rational buckets over random schedules, with the parts earlier oracles
// left out together: RejectCost (whole and half tokens) charged by the
// first window in order that denies ("NewMulti ... checked in order (the
// first that denies is the one that charges its RejectCost)"), clamped
// at MaxDebt; SetLimit (to R/2, R/4 and back) and SetBurst on windows
// between decisions ("A key in debt keeps its debt as time"; "A Multi's
// windows are Limiters: SetLimit on a window works"), and
// fractional rates (Every(3s), 2.5/s), on both engines. Every field of
// the Decision but the naming is checked: Allowed, Never, Remaining
// (the least), RetryAfter (when every window admits; 1 ms when each
// fits now), ResetAfter (the later) and NextAfter (combine's rule).
// Policies whose Exact is false are not applied.
func TestAudit101MultiOracleRejectSetLimit(t *testing.T) {
	a101Changes = 0
	defer func() {
		if a101Changes == 0 {
			t.Error("no policy change was applied: the schedule does not test SetLimit")
		}
	}()
	specs := []a101Spec{
		{10, 1, 20, big.NewRat(1, 1)},
		{4, 1, 6, big.NewRat(1, 2)},
		{1, 3, 5, big.NewRat(1, 1)},
		{5, 2, 8, big.NewRat(0, 1)},
		{1000, 1, 50, big.NewRat(3, 1)},
	}
	runs, steps := 12, 200
	if testing.Short() {
		runs, steps = 6, 120
	}
	for run := range runs {
		rng := rand.New(rand.NewPCG(101, uint64(run)))
		t.Run(fmt.Sprint(run), func(t *testing.T) {
			clk := limittest.NewFakeClock()
			clk.Set(1 << 33)
			nw := 2 + rng.IntN(2)
			ls := make([]*limit.Limiter, nw)
			ws := make([]*a101Win, nw)
			desc := ""
			for i := range nw {
				s := specs[rng.IntN(len(specs))]
				e := a101Engines[rng.IntN(2)]
				rc, _ := s.reject.Float64()
				l, err := limit.New(s.limit(), s.burst, limit.WithClock(clk), limit.WithEngine(e),
					limit.WithRejectCost(rc), limit.WithSeed(uint64(run*7+i)),
					limit.WithMaxDebt(float64(4*s.burst)), limit.WithName(fmt.Sprint("w", i)))
				if err != nil {
					t.Fatalf("window %d %+v on %v: %v", i, s, e, err)
				}
				if !l.Exact() {
					t.Fatalf("window %d %+v on %v: not Exact", i, s, e)
				}
				ls[i] = l
				rate := big.NewRat(s.num, s.den)
				ws[i] = &a101Win{rate: rate, burst: s.burst, reject: s.reject,
					maxT: new(big.Rat).Quo(big.NewRat(int64(4*s.burst)*1000, 1), rate),
					debt: new(big.Rat)}
				desc += fmt.Sprintf("[%v %d/%d b%d rc%v] ", e, s.num, s.den, s.burst, s.reject)
			}
			newRates := make([]*big.Rat, nw)
			for i := range nw {
				newRates[i] = new(big.Rat).Set(ws[i].rate)
			}
			m, err := limit.NewMulti(ls...)
			if err != nil {
				t.Fatal(err)
			}
			prev := clk.NowMillis()
			for step := range steps {
				// Advance time.
				dt := int64(0)
				switch rng.IntN(4) {
				case 0:
				case 1:
					dt = rng.Int64N(5)
				case 2:
					dt = rng.Int64N(400)
				default:
					dt = rng.Int64N(5000)
				}
				clk.Set(prev + dt)
				prev += dt
				for _, w := range ws {
					w.debt.Sub(w.debt, big.NewRat(dt, 1))
					if w.debt.Sign() < 0 {
						w.debt.SetInt64(0)
					}
				}
				// Sometimes change a window's policy.
				if rng.IntN(12) == 0 {
					i := rng.IntN(nw)
					l, w := ls[i], ws[i]
					if rng.IntN(2) == 0 {
						k := []int64{1, 2, 4}[rng.IntN(3)]
						r0 := newRates[i]
						nr := new(big.Rat).Quo(r0, big.NewRat(k, 1))
						f, _ := nr.Float64()
						lim := limit.Limit(f)
						if nr.Num().Int64() == 1 && nr.Denom().Int64() > 1 {
							// Every(d) holds 1/d exactly where d is whole ms.
							lim = limit.Every(time.Duration(nr.Denom().Int64()) * time.Second)
						}
						old := l.Limit()
						if err := l.SetLimit(lim); err == nil {
							if l.Exact() {
								w.rate = nr
								a101Changes++
							} else if err := l.SetLimit(old); err != nil {
								t.Fatal(err)
							}
						}
					} else {
						b := 1 + rng.IntN(2*w.burst)
						old := l.Burst()
						if err := l.SetBurst(b); err == nil {
							if l.Exact() {
								w.burst = b
								a101Changes++
							} else if err := l.SetBurst(old); err != nil {
								t.Fatal(err)
							}
						}
					}
				}
				maxB := 0
				for _, w := range ws {
					maxB = max(maxB, w.burst)
				}
				n := 1 + rng.IntN(maxB+1)
				if rng.IntN(3) == 0 {
					n = 1
				}
				// The model.
				admit := true
				for _, w := range ws {
					admit = admit && w.fits(n)
				}
				if admit {
					for _, w := range ws {
						w.debt.Add(w.debt, w.costMs(n))
					}
				} else {
					for _, w := range ws {
						if !w.fits(n) {
							pen := new(big.Rat).Mul(w.reject, w.tok())
							if pen.Sign() > 0 {
								w.debt.Add(w.debt, pen)
								if w.debt.Cmp(w.maxT) > 0 {
									w.debt.Set(w.maxT)
								}
							}
							break
						}
					}
				}
				want := limit.Decision{Allowed: admit, Remaining: int(^uint(0) >> 1)}
				for _, w := range ws {
					s := w.state(n)
					if !admit {
						switch {
						case s.Never:
							want.Never, want.RetryAfter = true, limit.InfDuration
						case !want.Never && s.RetryAfter > want.RetryAfter:
							want.RetryAfter = s.RetryAfter
						}
					}
					want.ResetAfter = max(want.ResetAfter, s.ResetAfter)
					switch {
					case s.Remaining < want.Remaining:
						want.Remaining, want.NextAfter = s.Remaining, s.NextAfter
					case s.Remaining > want.Remaining:
					case s.NextAfter == 0 || want.NextAfter == 0:
						want.NextAfter = 0
					default:
						want.NextAfter = max(want.NextAfter, s.NextAfter)
					}
				}
				if !admit && want.RetryAfter == 0 {
					want.RetryAfter = time.Millisecond
				}
				got := m.DecideKeys(clk.Now(), n, "k")
				g := got
				g.Limit, g.Burst, g.Policy = 0, 0, ""
				if g != want {
					t.Fatalf("%s\nstep %d n=%d: got %+v\nwant %+v", desc, step, n, got, want)
				}
			}
		})
	}
}
