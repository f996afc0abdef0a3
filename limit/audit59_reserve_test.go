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

const a59Start = 1_000_000 // ms

// a59Period is the shortest Period New accepts for New(10, 20)
// (MaxDebt 40, 4 s to drain) over g generations.
func a59Period(g uint32) time.Duration {
	ms := (4000 + int64(g-1) - 1) / int64(g-1)
	return time.Duration(ms) * time.Millisecond
}

func a59At(ms int64) time.Time { return time.UnixMilli(ms) }

// a59Same fails unless two Decisions agree on every field but Limit and
// Policy.
func a59Same(t *testing.T, what string, got, want limit.Decision) {
	t.Helper()
	got.Limit, want.Limit, got.Policy, want.Policy = 0, 0, "", ""
	if got != want {
		t.Errorf("%s: got %+v; want %+v", what, got, want)
	}
}

// Reservation.Cancel: "a cell of the key that no other request has
// written since the reservation gets its previous value back (the key
// reads as if the reservation had never been taken, the part drained
// since included)". A key alone on a count-min of G generations, a
// reservation, 0..G+1 promotions (fake clock past Period boundaries),
// Cancel: every later decision is that of a twin limiter that never took
// the reservation, and that of the rational bucket (package doc,
// "Exactness"). Before the Cancel, the reservation's Delay is the
// bucket's.
func TestAudit59CancelAcrossPromotions(t *testing.T) {
	testsize.Serial(t)
	for _, g := range []uint32{2, 3, 4, 8} {
		{
			for j := 0; j <= int(g)+1; j++ {
				for oi, offset := range []int64{-1, 0, 1, 37} {
					if !testsize.Keep(oi+j, testsize.Sample(1, 2, 4)) {
						continue
					}
					for _, t0 := range []int64{250, -1, 0, 1} { // -1, 0, 1: around the first deadline
						name := fmt.Sprintf("G=%d/promotions=%d/offset=%d/t0=%d", g, j, offset, t0)
						t.Run(name, func(t *testing.T) {
							a59CancelAcross(t, g, j, offset, t0)
						})
					}
				}
			}
		}
	}
}

func a59CancelAcross(t *testing.T, g uint32, j int, offset, t0off int64) {
	clk := limittest.NewFakeClock()
	clk.Set(a59Start)
	period := a59Period(g)
	opts := []limit.Option{limit.WithClock(clk), limit.WithSeed(7), limit.WithGenerations(g), limit.WithPeriod(period)}
	main := limit.MustNew(10, 20, opts...)
	twin := limit.MustNew(10, 20, opts...)
	if main.Engine() != limit.CountMin || !main.Exact() {
		t.Fatalf("engine %v exact %v", main.Engine(), main.Exact())
	}
	orc := newA59Bucket(big.NewRat(10, 1), 20, a59Start)
	// Some debt first, both.
	t0 := int64(a59Start + 250)
	if t0off != 250 {
		t0 = a59Start + period.Milliseconds() + t0off
	}
	clk.Set(t0)
	for _, l := range []*limit.Limiter{main, twin} {
		if !l.AllowN(a59At(t0), "k", 12) {
			t.Fatal("first AllowN denied")
		}
	}
	orc.advance(t0)
	orc.decision(12, true)
	// The reservation, on main only: 12 + 15 = 27 > 20, so it waits.
	r := main.ReserveN(a59At(t0), "k", 15)
	if !r.OK() {
		t.Fatal("ReserveN not OK")
	}
	withRes := orc.clone()
	withRes.debt.Add(withRes.debt, big.NewRat(15, 1))
	wantDelay := time.Duration(withRes.msUntil(withRes.burst)) * time.Millisecond
	if got := r.DelayFrom(a59At(t0)); got != wantDelay {
		t.Errorf("Delay: got %v; want %v (the rational bucket's)", got, wantDelay)
	}
	// j promotions later (a Period each), plus offset ms.
	t1 := max(t0, t0+int64(j)*period.Milliseconds()+offset)
	clk.Set(t1)
	// Both limiters read at t1 (a read may perform a due rotation).
	main.PeekN(a59At(t1), "k", 1)
	twin.PeekN(a59At(t1), "k", 1)
	r.Cancel()
	r.Cancel() // idempotent
	for _, dt := range []int64{0, 1, 99, 100, 101, 500, 1199, 1200, 1201, 3000} {
		at := t1 + dt
		clk.Set(at)
		o := orc.clone()
		o.advance(at)
		want := o.decision(1, false)
		a59Same(t, fmt.Sprintf("main PeekN at t1+%d", dt), main.PeekN(a59At(at), "k", 1), want)
		a59Same(t, fmt.Sprintf("twin PeekN at t1+%d", dt), twin.PeekN(a59At(at), "k", 1), want)
		got, tw := main.TokensAt(a59At(at), "k"), twin.TokensAt(a59At(at), "k")
		if w := o.tokens(); got != tw || got < w-1e-9 || got > w+1e-9 {
			t.Errorf("TokensAt t1+%d: main %v, twin %v; want both %v", dt, got, tw, w)
		}
	}
}

// Cancel after the key's own later request wrote its cells: the debit
// stays (on the safe side), so the key reads at least as the twin that
// never reserved and at most as the one that never cancelled; a second
// Cancel after more writes changes nothing (idempotent). Over 2..8
// generations, across promotions.
func TestAudit59CancelAfterOwnWriteBounded(t *testing.T) {
	for _, g := range []uint32{2, 3, 4, 8} {
		for j := 0; j <= int(g); j++ {
			t.Run(fmt.Sprintf("G=%d/promotions=%d", g, j), func(t *testing.T) {
				clk := limittest.NewFakeClock()
				clk.Set(a59Start)
				period := a59Period(g)
				opts := []limit.Option{limit.WithClock(clk), limit.WithSeed(3), limit.WithGenerations(g), limit.WithPeriod(period)}
				ls := [3]*limit.Limiter{}
				for i := range ls {
					ls[i] = limit.MustNew(10, 20, opts...)
				}
				main, never, kept := ls[0], ls[1], ls[2]
				t0 := int64(a59Start + 10)
				clk.Set(t0)
				r := main.ReserveN(a59At(t0), "k", 8)
				rk := kept.ReserveN(a59At(t0), "k", 8)
				if !r.OK() || !rk.OK() {
					t.Fatal("not OK")
				}
				t1 := t0 + int64(j)*period.Milliseconds() + 3
				clk.Set(t1 + 1)
				for _, l := range ls {
					l.AllowN(a59At(t1), "k", 2)
				}
				r.Cancel()
				for _, l := range ls {
					l.AllowN(a59At(t1+1), "k", 1)
				}
				r.Cancel()
				for _, dt := range []int64{1, 50, 400, 1000, 5000} {
					at := t1 + dt
					clk.Set(at)
					lo, got, hi := never.TokensAt(a59At(at), "k"), main.TokensAt(a59At(at), "k"), kept.TokensAt(a59At(at), "k")
					if got > lo || got < hi {
						t.Errorf("t1+%d: tokens %v; want within [%v (kept), %v (never reserved)]", dt, got, hi, lo)
					}
				}
			})
		}
	}
}

// Colliding keys (WithSize(1, 1): every key shares one cell per
// generation): reservations, other keys' writes, Cancels in a random
// order. "A key is never given back more than its own reservation, nor
// anything of another key's": every key reads at least its own exact
// debt (its admitted, never-cancelled requests, drained: a lower bound,
// since a Cancel may keep the debit), so no key is admitted past its own
// bucket. Time stays within one Period (no rotation, no amnesty).
func TestAudit59CollidingRefundsNeverUnderstate(t *testing.T) {
	testsize.Serial(t)
	type engine struct {
		name string
		opts []limit.Option
	}
	var engines []engine
	for _, g := range []uint32{2, 3, 8} {
		for _, size := range [][2]uint32{{1, 1}, {2, 3}} {
			engines = append(engines, engine{fmt.Sprintf("CM/G=%d/size=%v", g, size),
				[]limit.Option{limit.WithGenerations(g), limit.WithSize(size[0], size[1]), limit.WithPeriod(time.Hour)}})
		}
	}
	for _, c := range []int{1, 3, 20} {
		engines = append(engines, engine{fmt.Sprintf("B/capacity=%d", c),
			[]limit.Option{limit.WithEngine(limit.Buckets), limit.WithCapacity(c, 0.5)}})
	}
	for ei, e := range engines {
		if !testsize.Keep(ei, testsize.Sample(1, 2, 4)) {
			continue
		}
		{
			t.Run(e.name, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(ei), 59))
				clk := limittest.NewFakeClock()
				clk.Set(a59Start)
				l := limit.MustNew(10, 20, append([]limit.Option{limit.WithClock(clk), limit.WithSeed(5)}, e.opts...)...)
				keys := []string{"a", "b", "c", "d", "e"}
				if l.Engine() == limit.Buckets {
					keys = keys[:0]
					for i := range 60 {
						keys = append(keys, fmt.Sprintf("key%d", i))
					}
				}
				own := map[string]*a59Bucket{}
				for _, k := range keys {
					own[k] = newA59Bucket(big.NewRat(10, 1), 20, a59Start)
				}
				type held struct {
					key string
					n   int
					r   *limit.Reservation
				}
				var open []held
				now := int64(a59Start)
				for step := 0; step < 3000; step++ {
					now += int64(rng.IntN(40))
					k := keys[rng.IntN(len(keys))]
					n := 1 + rng.IntN(6)
					for _, b := range own {
						b.advance(now)
					}
					switch op := rng.IntN(10); {
					case op < 4:
						if l.AllowN(a59At(now), k, n) {
							if !own[k].fits(n) {
								t.Fatalf("step %d: %s admitted %d past its own bucket (debt %v, burst 20)", step, k, n, own[k].debt.FloatString(3))
							}
							own[k].debt.Add(own[k].debt, big.NewRat(int64(n), 1))
						}
					case op < 7:
						r := l.ReserveN(a59At(now), k, n)
						if r.OK() {
							open = append(open, held{k, n, r})
						}
					default:
						if len(open) == 0 {
							continue
						}
						i := rng.IntN(len(open))
						open[i].r.Cancel()
						if rng.IntN(3) == 0 {
							open[i].r.Cancel()
						}
						open = append(open[:i], open[i+1:]...)
					}
					for _, kk := range keys {
						lower := own[kk]
						if got, w := l.TokensAt(a59At(now), kk), lower.tokens(); got > w+1e-9 {
							t.Fatalf("step %d: %s reads %v tokens; its own admitted requests leave at most %v", step, kk, got, w)
						}
					}
				}
			})
		}
	}
}

// Reservation.Cancel on the Buckets engine, a key alone: "it is given
// back exactly when nothing has written it since", in steps for a
// reservation larger than one step, and the key then reads as if the
// reservation had never been taken (the part drained since included):
// every later decision is the rational bucket's without it. Cancels at
// several delays after the take, including after part and all of it
// drained.
func TestAudit59BucketsCancelExact(t *testing.T) {
	for _, pre := range []int{0, 5, 19} {
		for _, n := range []int{1, 3, 4, 15, 20} {
			for _, dt := range []int64{0, 1, 99, 700, 2500, 6000} {
				t.Run(fmt.Sprintf("pre=%d/n=%d/dt=%d", pre, n, dt), func(t *testing.T) {
					clk := limittest.NewFakeClock()
					clk.Set(a59Start)
					l := limit.MustNew(10, 20, limit.WithClock(clk), limit.WithSeed(4), limit.WithEngine(limit.Buckets))
					orc := newA59Bucket(big.NewRat(10, 1), 20, a59Start)
					t0 := int64(a59Start + 3)
					clk.Set(t0)
					if pre > 0 {
						l.AllowN(a59At(t0), "k", pre)
						orc.advance(t0)
						orc.decision(pre, true)
					}
					r := l.ReserveN(a59At(t0), "k", n)
					if !r.OK() {
						t.Fatal("not OK")
					}
					t1 := t0 + dt
					clk.Set(t1)
					r.Cancel()
					for _, d := range []int64{0, 1, 100, 1000, 4000} {
						at := t1 + d
						clk.Set(at)
						o := orc.clone()
						o.advance(at)
						a59Same(t, fmt.Sprintf("PeekN at t1+%d", d), l.PeekN(a59At(at), "k", 1), o.decision(1, false))
					}
				})
			}
		}
	}
}

// a59Policy is what the schedule below drives: a Limiter or a Tier.
type a59Policy interface {
	DecideN(time.Time, string, int) limit.Decision
	PeekN(time.Time, string, int) limit.Decision
	ReserveN(time.Time, string, int) *limit.Reservation
}

// Reservations, Cancels and decisions of a few keys alone in their cells
// against the rational bucket, on both engines and count-mins of 2, 3
// and 8 generations (Period boundaries crossed), for the limiter's own
// policy and for a Tier (package doc: "Tier.Exact ... then its decisions
// and durations are the rational bucket (r, b)'s, as New's are").
// Every key's debt drains to 0 at least once in every (G-1) x Period
// (pauses), which rules out the documented amnesty.
// Every Decision is the bucket's; a reservation's Delay is the bucket's
// (its debt drained back to the burst); a Cancel with no write of the
// key since its reservation leaves the key as if the reservation had
// never been taken ("the part drained since included").
func TestAudit59ReserveCancelScheduleMatchesBucket(t *testing.T) {
	testsize.Serial(t)
	type eng struct {
		name string
		opts []limit.Option
	}
	engs := []eng{
		{"B", []limit.Option{limit.WithEngine(limit.Buckets)}},
		{"CM2", []limit.Option{limit.WithGenerations(2)}},
		{"CM3", []limit.Option{limit.WithGenerations(3), limit.WithPeriod(12 * time.Second)}},
		{"CM8", []limit.Option{limit.WithGenerations(8), limit.WithPeriod(4 * time.Second), limit.WithPrefetch(false)}},
		{"CM8p", []limit.Option{limit.WithGenerations(8), limit.WithPeriod(4 * time.Second)}},
	}
	type law struct {
		lim      limit.Limit
		num, den int64 // the rate num/den per second
		burst    int
		step     int // ms, at most, between calls
	}
	laws := []law{
		{10, 10, 1, 20, 250},
		{3, 3, 1, 7, 500},
		{limit.Every(1500 * time.Millisecond), 2, 3, 5, 1500},
		{1000, 1000, 1, 50, 10},
	}
	for li, lw := range laws {
		for ei, e := range engs {
			if !testsize.Keep(li+ei, 2) {
				continue
			}
			for _, variant := range []string{"own", "tier", "reject"} {
				tier, reject := variant == "tier", 0.0
				if variant == "reject" {
					reject = 1
				}
				t.Run(fmt.Sprintf("law%d/%s/%s", li, e.name, variant), func(t *testing.T) {
					clk := limittest.NewFakeClock()
					clk.Set(a59Start)
					// MaxDebt 8 bursts: a tier of a quarter of the rate, same burst,
					// costs 4 tokens a token, so it can queue a burst past its own.
					maxD := int64(8 * lw.burst)
					drainMs := maxD * 1000 * lw.den / lw.num // MaxDebt's drain time
					eo := e.opts
					if e.name != "B" && e.name != "CM2" {
						// Periods of at least the drain time over (G-1): scale them.
						eo = append(append([]limit.Option(nil), e.opts...), limit.WithPeriod(time.Duration(drainMs)*time.Millisecond))
					}
					l, err := limit.New(lw.lim, lw.burst, append([]limit.Option{limit.WithClock(clk), limit.WithSeed(8), limit.WithMaxDebt(float64(maxD)), limit.WithRejectCost(reject)}, eo...)...)
					if err != nil {
						t.Skipf("%v", err)
					}
					var p a59Policy = l
					rate := big.NewRat(lw.num, lw.den)
					if tier {
						tr, err := l.Tier("slow", lw.lim/4, lw.burst)
						if err != nil {
							t.Fatal(err)
						}
						if !tr.Exact() {
							t.Fatal("tier not exact")
						}
						p, rate = tr, big.NewRat(lw.num, 4*lw.den)
					}
					if !l.Exact() {
						t.Fatal("limiter not exact")
					}
					keys := []string{"x", "y", "z"}
					orc := map[string]*a59Bucket{}
					type last struct {
						r      *limit.Reservation
						before *a59Bucket
					}
					lasts := map[string]*last{}
					for _, k := range keys {
						orc[k] = newA59Bucket(rate, lw.burst, a59Start)
					}
					rng := rand.New(rand.NewPCG(uint64(ei), 5))
					now := int64(a59Start)
					for step := range 1500 {
						now += int64(rng.IntN(lw.step))
						if step%30 == 29 {
							// A pause every key's debt drains in (MaxDebt: 16 s), so
							// that each drains to 0 once in every (G-1) x Period:
							// no generation then misses a debt that is still owed
							// (package doc, "Rotation and amnesty": a key kept in debt
							// throughout may be amnestied, by design).
							now += drainMs + 100
						}
						clk.Set(now)
						k := keys[rng.IntN(len(keys))]
						o := orc[k]
						o.advance(now)
						n := 1 + rng.IntN(lw.burst*2/5+1)
						what := fmt.Sprintf("step %d key %s n=%d", step, k, n)
						switch op := rng.IntN(10); {
						case op < 4:
							want := o.decision(n, true)
							if !want.Allowed && reject > 0 {
								// "debits c tokens of debt on every denial ... Debt never
								// exceeds MaxDebt"; RetryAfter includes the penalty.
								o.debt.Add(o.debt, big.NewRat(int64(reject), 1))
								if m := big.NewRat(maxD, 1); o.debt.Cmp(m) > 0 {
									o.debt.Set(m)
								}
								want = o.decision(n, false)
							}
							a59Same(t, what+" DecideN", p.DecideN(a59At(now), k, n), want)
							lasts[k] = nil
						case op < 6:
							a59Same(t, what+" PeekN", p.PeekN(a59At(now), k, n), o.decision(n, false))
						case op < 8:
							before := o.clone()
							r := p.ReserveN(a59At(now), k, n)
							after := o.clone()
							after.debt.Add(after.debt, big.NewRat(int64(n), 1))
							// OK iff within MaxDebt: 160 tokens of 10/s, 40 of the tier.
							maxDebt := big.NewRat(maxD, 1)
							if tier {
								maxDebt = big.NewRat(maxD/4, 1)
							}
							if ok := after.debt.Cmp(maxDebt) <= 0; r.OK() != ok {
								t.Fatalf("%s ReserveN: OK %v; want %v (debt after %v, MaxDebt %v)", what, r.OK(), ok, after.debt.FloatString(3), maxDebt)
							}
							if !r.OK() {
								continue
							}
							want := time.Duration(after.msUntil(after.burst)) * time.Millisecond
							if got := r.DelayFrom(a59At(now)); got != want {
								t.Errorf("%s Delay %v; want %v", what, got, want)
							}
							o.debt.Set(after.debt)
							lasts[k] = &last{r, before}
						default:
							if lk := lasts[k]; lk != nil {
								lk.r.Cancel()
								b := lk.before
								b.advance(now)
								orc[k] = b
								lasts[k] = nil
							}
						}
						if t.Failed() {
							return
						}
					}
				})
			}
		}
	}
}

// Colliding keys (WithSize(1, 1): one cell a generation, shared), one
// reservation of a, then a write of b to the same cells, then a's
// Cancel. Reservation.Cancel: "with the count-min so does one written
// since only within the same millisecond, below MaxDebt" get its
// previous value back; "any other cell keeps the debit". In the same
// millisecond the cells then hold exactly b's write (both keys read the
// debt of a limiter that saw only b's); a millisecond later the cells
// keep a's debit (both keys read the debt of a limiter where a never
// cancelled). For 2, 3, 4 and 8 generations, across 0 and 1 promotions
// between the reservation and b's write.
func TestAudit59CollidingCancelSameMillisecond(t *testing.T) {
	for _, g := range []uint32{2, 3, 4, 8} {
		for _, later := range []int64{0, 1} {
			for _, j := range []int{0, 1} {
				t.Run(fmt.Sprintf("G=%d/bLater=%dms/promotions=%d", g, later, j), func(t *testing.T) {
					clk := limittest.NewFakeClock()
					clk.Set(a59Start)
					period := a59Period(g)
					opts := []limit.Option{limit.WithClock(clk), limit.WithSeed(1), limit.WithGenerations(g),
						limit.WithPeriod(period), limit.WithSize(1, 1)}
					l := limit.MustNew(10, 20, opts...)
					onlyB := limit.MustNew(10, 20, opts...)
					kept := limit.MustNew(10, 20, opts...)
					// a's reservation; with j = 1, 1 ms before the first deadline,
					// and b's write 1 ms after it (a promotion in between).
					ta := int64(a59Start + 3)
					tb := ta + later
					if j > 0 {
						ta = a59Start + period.Milliseconds() - 1
						tb = ta + 2 + later
					}
					clk.Set(ta)
					r := l.ReserveN(a59At(ta), "a", 6)
					kept.ReserveN(a59At(ta), "a", 6)
					onlyB.PeekN(a59At(ta), "a", 1)
					clk.Set(tb)
					for _, x := range []*limit.Limiter{l, onlyB, kept} {
						if !x.AllowN(a59At(tb), "b", 4) {
							t.Fatal("b denied")
						}
					}
					r.Cancel()
					sameMs := tb == ta
					for _, dt := range []int64{0, 1, 250} {
						at := tb + dt
						clk.Set(at)
						want := kept
						if sameMs {
							want = onlyB
						}
						for _, k := range []string{"a", "b"} {
							if got, w := l.TokensAt(a59At(at), k), want.TokensAt(a59At(at), k); got != w {
								t.Errorf("%s at +%d ms (b's write in a's millisecond: %v): tokens %v; want %v", k, dt, sameMs, got, w)
							}
						}
					}
				})
			}
		}
	}
}

// Reservation.Cancel on the count-min: a reservation is not given back
// "once the limiter's time has moved 2^31 ms (24.8 days) or more past the
// reservation's (any call moves it, Delay and calls on other keys
// included)"; before that, with nothing written since, it is given back
// whole. Every(24h), burst 30 (a debt outlasting 24.8 days), 2 and 3
// generations: a Cancel 2^31 - 1 ms after the reservation leaves the key
// as a twin that never reserved; one 2^31 ms after, as a twin that kept
// it (the time moved by a read of another key).
func TestAudit59CountMinCancelAt2To31(t *testing.T) {
	for _, g := range []uint32{2, 3} {
		for _, dt := range []int64{1<<31 - 1, 1 << 31, 1<<31 + 1} {
			t.Run(fmt.Sprintf("G=%d/dt=%d", g, dt), func(t *testing.T) {
				clk := limittest.NewFakeClock()
				clk.Set(a59Start)
				opts := []limit.Option{limit.WithClock(clk), limit.WithSeed(2), limit.WithGenerations(g)}
				mk := func() *limit.Limiter { return limit.MustNew(limit.Every(24*time.Hour), 30, opts...) }
				l, never, kept := mk(), mk(), mk()
				if l.Engine() != limit.CountMin {
					t.Fatalf("engine %v", l.Engine())
				}
				for _, x := range []*limit.Limiter{l, never, kept} {
					x.AllowN(clk.Now(), "k", 20)
				}
				r := l.ReserveN(clk.Now(), "k", 25)
				kept.ReserveN(clk.Now(), "k", 25)
				if !r.OK() {
					t.Fatal("not OK")
				}
				clk.Set(a59Start + dt)
				l.PeekN(clk.Now(), "other", 1) // moves the limiter's time
				r.Cancel()
				want, rule := never, "given back"
				if dt >= 1<<31 {
					want, rule = kept, "kept"
				}
				if got, w := l.TokensAt(clk.Now(), "k"), want.TokensAt(clk.Now(), "k"); got != w {
					t.Errorf("Cancel %d ms after: tokens %v; want %v (the reservation %s)", dt, got, w, rule)
				}
			})
		}
	}
}
