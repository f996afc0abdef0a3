package limit_test

// Audit 84: a Decision at the edges, against the exact oracle of
// audit84_exact_mixed_test.go: many keys colliding in a tiny engine (never
// an admission, a RetryAfter, a ResetAfter or a Remaining on the wrong
// side of the key's own bucket), a rate of one per day with debts that
// outlast the count-min's 2^31 ms stamps, a huge n on every entry point,
// and idle gaps of centuries.

import (
	"context"
	"errors"
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

// TestAudit84ExactCrowdOneSided: 400 keys hammer a tiny engine (Buckets
// of the least capacity; count-min of 1 x 16 and 2 x 32 cells). Each key
// has its own rational bucket; the limiter may deny a key early
// (collisions), but every admission must be one the key's own bucket
// admits, every RetryAfter, ResetAfter and NextAfter at least its
// bucket's, Remaining at most its bucket's, and a reservation's delay at
// least its bucket's ("a collision can only deny a key early, never admit
// it past its own limit"; "only late, never early, under collisions").
func TestAudit84ExactCrowdOneSided(t *testing.T) {
	type cfg struct {
		name string
		opts []limit.Option
	}
	for _, c := range []cfg{
		{"buckets", []limit.Option{limit.WithEngine(limit.Buckets), limit.WithCapacity(1, 0.5)}},
		{"cm1x16", []limit.Option{limit.WithSize(1, 16), limit.WithPeriod(1000 * time.Hour)}},
		{"cm2x32", []limit.Option{limit.WithSize(2, 32), limit.WithPeriod(1000 * time.Hour)}},
		{"cm2x32-cu", []limit.Option{limit.WithSize(2, 32), limit.WithPeriod(1000 * time.Hour), limit.WithConservativeUpdate(true)}},
		{"buckets-reject", []limit.Option{limit.WithEngine(limit.Buckets), limit.WithCapacity(1, 0.5), limit.WithRejectCost(1)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(84, 7))
			clk := limittest.NewFakeClock()
			clk.Set(1_700_000_000_000)
			const burst = 5
			l, err := limit.New(10, burst, append(c.opts, limit.WithClock(clk), limit.WithSeed(11), limit.WithMaxDebt(20))...)
			if err != nil {
				t.Fatal(err)
			}
			tok := big.NewRat(100, 1) // ms per token
			capMs := big.NewRat(100*burst, 1)
			type own struct {
				d  *big.Rat
				at int64
			}
			const nkeys = 400
			owns := make([]own, nkeys)
			for i := range owns {
				owns[i] = own{d: new(big.Rat), at: clk.NowMillis()}
			}
			val := func(i int, now int64) *big.Rat {
				v := new(big.Rat).Sub(owns[i].d, big.NewRat(now-owns[i].at, 1))
				if v.Sign() < 0 {
					v.SetInt64(0)
				}
				return v
			}
			admitted, denied := 0, 0
			for step := range testsize.Pick(20000, 3000) {
				if rng.IntN(4) == 0 {
					clk.Advance(time.Duration(rng.IntN(60)) * time.Millisecond)
				}
				now := clk.NowMillis()
				i := rng.IntN(nkeys)
				if rng.IntN(3) == 0 {
					i = rng.IntN(20) // a few hot keys
				}
				key := fmt.Sprintf("key-%d", i)
				n := 1 + rng.IntN(burst)
				v := val(i, now)
				cost := new(big.Rat).Mul(tok, big.NewRat(int64(n), 1))
				after := new(big.Rat).Add(v, cost)
				where := fmt.Sprintf("step %d %s n %d own debt %s ms", step, key, n, v.FloatString(2))
				if rng.IntN(5) == 0 {
					r := l.ReserveN(clk.Now(), key, n)
					if !r.OK() {
						continue
					}
					if after.Cmp(big.NewRat(2000, 1)) > 0 {
						t.Fatalf("%s: reservation OK past the key's own MaxDebt", where)
					}
					ex := new(big.Rat).Sub(after, capMs)
					if want := audit84exactMs(audit84exactCeil(ex)); r.Delay() < want {
						t.Fatalf("%s: reservation delay %v before the key's own %v", where, r.Delay(), want)
					}
					if rng.IntN(2) == 0 {
						r.Cancel() // the key's own debt is at least what it was without it
						owns[i] = own{d: v, at: now}
					} else {
						owns[i] = own{d: after, at: now}
					}
					continue
				}
				d := l.DecideN(clk.Now(), key, n)
				if d.Allowed {
					admitted++
					if after.Cmp(capMs) > 0 {
						t.Fatalf("%s: admitted past the key's own bucket", where)
					}
					owns[i] = own{d: after, at: now}
				} else {
					denied++
					// The key's own bucket after the denial (with the penalty
					// a denial pays, if any, in its own debt too).
					own := v
					if after.Cmp(capMs) <= 0 {
						// A false denial: the key's own bucket would admit. No
						// write (unless RejectCost), so its own debt stays.
						if c.name == "buckets-reject" {
							own = new(big.Rat).Add(v, tok)
							if own.Cmp(big.NewRat(2000, 1)) > 0 {
								own = big.NewRat(2000, 1)
							}
							owns[i] = struct {
								d  *big.Rat
								at int64
							}{own, now}
						}
						continue
					}
					if c.name == "buckets-reject" {
						own = new(big.Rat).Add(v, tok)
						if own.Cmp(big.NewRat(2000, 1)) > 0 {
							own = big.NewRat(2000, 1)
						}
						owns[i] = struct {
							d  *big.Rat
							at int64
						}{own, now}
					}
					ex := new(big.Rat).Add(own, cost)
					ex.Sub(ex, capMs)
					if want := audit84exactMs(audit84exactCeil(ex)); d.RetryAfter < want {
						t.Fatalf("%s: RetryAfter %v before the key's own %v", where, d.RetryAfter, want)
					}
				}
				ownAfter := owns[i].d
				if owns[i].at != now {
					ownAfter = val(i, now)
				}
				if want := audit84exactMs(audit84exactCeil(ownAfter)); d.ResetAfter < want {
					t.Fatalf("%s: ResetAfter %v before the key's own %v (%+v)", where, d.ResetAfter, want, d)
				}
				room := new(big.Rat).Sub(capMs, ownAfter)
				if rem := audit84exactFloor(new(big.Rat).Quo(room, tok)); int64(d.Remaining) > max(rem, 0) {
					t.Fatalf("%s: Remaining %d above the key's own %d", where, d.Remaining, rem)
				}
			}
			if admitted < 300 || denied < 300 {
				t.Fatalf("admitted %d, denied %d: the crowd did not collide", admitted, denied)
			}
			if s := l.Stats(); s.Saturation < 0 || s.Saturation > 1 || math.IsNaN(s.Saturation) {
				t.Fatalf("Saturation %v", s.Saturation)
			}
		})
	}
}

// TestAudit84ExactOnePerDay: Every(24h) (one per day: the count-min,
// inexact units) with a burst of 30 and MaxDebt 60, so debts last up to
// 60 days, past the count-min's 2^31 ms (24.8 days) stamps. A key alone:
// every admission is one the rational bucket admits (never early), and
// RetryAfter predicts the limiter's own next decision to the millisecond
// (a retry at t+RetryAfter admitted, 1 ms earlier not), over days of
// clock steps of random sizes. (How late it may be is
// TestAudit84ExactOnePerDayLateAccumulates.) The Period is long: with the
// default one (960 days) the run crosses rotations, and a key kept in
// debt across them is amnestied a token, admitted 50 minutes before its
// exact bucket and 1 ms before its RetryAfter, which "Rotation and
// amnesty" documents.
func TestAudit84ExactOnePerDay(t *testing.T) {
	for _, burst := range []int{1, 30} {
		t.Run(fmt.Sprint(burst), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(burst), 84))
			clk := limittest.NewFakeClock()
			clk.Set(1_700_000_000_000)
			l, err := limit.New(limit.Every(24*time.Hour), burst, limit.WithClock(clk), limit.WithSeed(3), limit.WithPeriod(100*365*24*time.Hour), limit.WithSize(2, 4096))
			if err != nil {
				t.Fatal(err)
			}
			const day = int64(86_400_000)
			tok := big.NewRat(day, 1)
			capMs := new(big.Rat).Mul(tok, big.NewRat(int64(burst), 1))
			mx := new(big.Rat).Mul(tok, new(big.Rat).SetFloat64(l.MaxDebt()))
			d0, at := new(big.Rat), clk.NowMillis()
			val := func(now int64) *big.Rat {
				v := new(big.Rat).Sub(d0, big.NewRat(now-at, 1))
				if v.Sign() < 0 {
					v.SetInt64(0)
				}
				return v
			}
			checks := 0
			for step := range testsize.Pick(4000, 800) {
				switch rng.IntN(6) {
				case 0:
					clk.Advance(time.Duration(rng.Int64N(day)) * time.Millisecond)
				case 1:
					clk.Advance(time.Duration(rng.Int64N(3600_000)) * time.Millisecond)
				case 2:
					clk.Advance(time.Duration(rng.Int64N(5*day)) * time.Millisecond)
				}
				now := clk.NowMillis()
				n := 1 + rng.IntN(burst)
				v := val(now)
				after := new(big.Rat).Add(v, new(big.Rat).Mul(tok, big.NewRat(int64(n), 1)))
				where := fmt.Sprintf("step %d at +%d ms: n %d, exact debt %s ms", step, now-1_700_000_000_000, n, v.FloatString(1))
				if rng.IntN(4) == 0 {
					r := l.ReserveN(clk.Now(), "k", n)
					if r.OK() {
						if after.Cmp(mx) > 0 {
							t.Fatalf("%s: reservation past MaxDebt", where)
						}
						ex := new(big.Rat).Sub(after, capMs)
						if want := audit84exactMs(audit84exactCeil(ex)); r.Delay() < want {
							t.Fatalf("%s: reservation delay %v before the exact %v", where, r.Delay(), want)
						}
						d0, at = after, now
					}
					continue
				}
				d := l.DecideN(clk.Now(), "k", n)
				if d.Allowed {
					if after.Cmp(capMs) > 0 {
						t.Fatalf("%s: admitted before the exact bucket", where)
					}
					d0, at = after, now
					continue
				}
				ex := new(big.Rat).Sub(after, capMs)
				if want := audit84exactMs(audit84exactCeil(ex)); d.RetryAfter < want {
					t.Fatalf("%s: RetryAfter %v before the exact %v", where, d.RetryAfter, want)
				}
				if rng.IntN(2) == 0 {
					continue
				}
				checks++
				clk.Set(now + d.RetryAfter.Milliseconds() - 1)
				if p := l.PeekN(clk.Now(), "k", n); p.Allowed {
					t.Fatalf("%s: admitted 1 ms before RetryAfter %v", where, d.RetryAfter)
				}
				clk.Set(now + d.RetryAfter.Milliseconds())
				if !l.AllowN(clk.Now(), "k", n) {
					t.Fatalf("%s: denied at RetryAfter %v (a %v wait)", where, d.RetryAfter, d.RetryAfter.Hours())
				}
				d0, at = new(big.Rat).Add(val(clk.NowMillis()), new(big.Rat).Mul(tok, big.NewRat(int64(n), 1))), clk.NowMillis()
			}
			if checks < testsize.Pick(100, 20) {
				t.Fatalf("only %d retries checked", checks)
			}
		})
	}
}

// TestAudit84ExactHugeN: n far above the burst (1<<62, math.MaxInt) on
// every entry point of a Limiter and a Tier: never admitted, Never with
// RetryAfter InfDuration, a Reservation that is not OK with Delay
// InfDuration, WaitN's ErrAboveBurst, and the key's state untouched (no
// RejectCost here).
func TestAudit84ExactHugeN(t *testing.T) {
	for _, eng := range []limit.Engine{limit.Buckets, limit.CountMin} {
		t.Run(eng.String(), func(t *testing.T) {
			clk := limittest.NewFakeClock()
			clk.Set(1_700_000_000_000)
			l, err := limit.New(10, 20, limit.WithClock(clk), limit.WithEngine(eng), limit.WithSeed(1), limit.WithMaxDebt(80))
			if err != nil {
				t.Fatal(err)
			}
			tr, err := l.Tier("slow", 2.5, 20)
			if err != nil {
				t.Fatal(err)
			}
			for _, tg := range []audit84exactTarget{l, tr} {
				if !tg.AllowN(clk.Now(), "k", 3) {
					t.Fatal("first request denied")
				}
				for _, n := range []int{21, 1 << 31, 1 << 53, 1<<53 + 1, 1 << 62, math.MaxInt} {
					if tg.AllowN(clk.Now(), "k", n) {
						t.Fatalf("AllowN(%d) admitted", n)
					}
					for _, d := range []limit.Decision{tg.DecideN(clk.Now(), "k", n), tg.PeekN(clk.Now(), "k", n)} {
						if d.Allowed || !d.Never || d.RetryAfter != limit.InfDuration || d.Remaining != 17 {
							t.Fatalf("n %d: %+v", n, d)
						}
					}
					r := tg.ReserveN(clk.Now(), "k", n)
					if r.OK() || r.Delay() != limit.InfDuration || r.DelayFrom(clk.Now()) != limit.InfDuration {
						t.Fatalf("ReserveN(%d): OK %v Delay %v", n, r.OK(), r.Delay())
					}
					r.Cancel()
					err := tg.WaitN(context.Background(), "k", n)
					var we *limit.WaitError
					if !errors.Is(err, limit.ErrAboveBurst) || !errors.As(err, &we) || we.N != n {
						t.Fatalf("WaitN(%d): %v", n, err)
					}
					if got := tg.TokensAt(clk.Now(), "k"); got != 17 {
						t.Fatalf("n %d: tokens %v, want 17", n, got)
					}
				}
				clk.Advance(time.Hour)
			}
		})
	}
}

// TestAudit84ExactCenturies: a key at its limit, then the clock jumps by
// a century, 1000 years and 4000 years (and a Reservation queued before
// the jump): the key is empty after it (its full burst admitted at once,
// not one more), on both engines, and the Decision's numbers are the
// exact bucket's from there.
func TestAudit84ExactCenturies(t *testing.T) {
	const year = int64(365 * 86_400_000)
	for _, eng := range []limit.Engine{limit.Buckets, limit.CountMin} {
		for _, jump := range []int64{100 * year, 1000 * year, 4000 * year} {
			t.Run(fmt.Sprintf("%v/%d", eng, jump/year), func(t *testing.T) {
				clk := limittest.NewFakeClock()
				clk.Set(1_700_000_000_000)
				l, err := limit.New(10, 20, limit.WithClock(clk), limit.WithEngine(eng), limit.WithSeed(2), limit.WithMaxDebt(40))
				if err != nil {
					t.Fatal(err)
				}
				for range 2 {
					if !l.AllowN(clk.Now(), "k", 20) {
						t.Fatal("burst denied")
					}
					if r := l.ReserveN(clk.Now(), "k", 20); !r.OK() || r.Delay() != 2*time.Second {
						t.Fatalf("reservation OK %v delay %v", r.OK(), r.Delay())
					}
					if d := l.DecideN(clk.Now(), "k", 1); d.Allowed || d.RetryAfter != 2100*time.Millisecond || d.ResetAfter != 4*time.Second {
						t.Fatalf("before the jump: %+v", d)
					}
					clk.Set(clk.NowMillis() + jump)
					d := l.DecideN(clk.Now(), "k", 20)
					want := limit.Decision{Allowed: true, Limit: 10, Burst: 20, Policy: "default", Remaining: 0, ResetAfter: 2 * time.Second, NextAfter: 100 * time.Millisecond}
					if d != want {
						t.Fatalf("after %d years:\n got  %+v\n want %+v", jump/year, d, want)
					}
					if d := l.DecideN(clk.Now(), "k", 1); d.Allowed || d.RetryAfter != 100*time.Millisecond {
						t.Fatalf("after %d years, one more: %+v", jump/year, d)
					}
					clk.Advance(2 * time.Second)
				}
			})
		}
	}
}

// TestAudit84ExactOnePerDayLateAccumulates: limit.Every(24h) with a burst
// of 30 runs on the count-min in a short fraction's units beyond 2^24
// (a token is 86,400,000 units of a ms's drain; MaxDebt 60 tokens). At
// 30 days of debt a float32 step is 256 units (256 ms). A key kept at
// its burst, one request a day plus 255 ms, stores 30 days each time
// (the exact 30 days less 255 ms rounds up to it), so the limiter's debt
// never drains while the exact bucket's drains 255 ms a day: after 40
// requests the limiter is 10.2 s late. Audit 84 found the package doc
// promising "at most the float32 rounding of a stored value" (one step);
// the doc ("Exactness") now says the steps of the key's writes add up
// until its debt drains to 0. Asserted: never early, late by at most one
// step per write, and RetryAfter still the limiter's own next decision.
func TestAudit84ExactOnePerDayLateAccumulates(t *testing.T) {
	clk := limittest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	l, err := limit.New(limit.Every(24*time.Hour), 30, limit.WithClock(clk), limit.WithSeed(3), limit.WithSize(2, 4096))
	if err != nil {
		t.Fatal(err)
	}
	if l.Engine() != limit.CountMin || l.Exact() {
		t.Fatalf("engine %v exact %v", l.Engine(), l.Exact())
	}
	const day = int64(86_400_000)
	const step = 256 * time.Millisecond // a float32 step at 30 days of debt, up to 32 days
	if !l.AllowN(clk.Now(), "k", 30) {
		t.Fatal("burst denied")
	}
	exact := 30 * day // the exact bucket's debt, ms to drain
	const writes = 40
	for i := range writes {
		clk.Advance(time.Duration(day+255) * time.Millisecond)
		exact -= day + 255
		if !l.AllowN(clk.Now(), "k", 1) {
			t.Fatalf("request %d denied (exact debt %d ms before it)", i, exact)
		}
		exact += day
	}
	d := l.DecideN(clk.Now(), "k", 1)
	want := time.Duration(exact+day-30*day) * time.Millisecond // 1 day less 10.2 s
	t.Logf("exact debt %d ms (30 days less %d ms); RetryAfter %v, exact %v", exact, 30*day-exact, d.RetryAfter, want)
	if d.Allowed || d.RetryAfter < want {
		t.Fatalf("early: %+v, exact RetryAfter %v", d, want)
	}
	if late := d.RetryAfter - want; late > (writes+1)*step {
		t.Errorf("RetryAfter %v is %v later than the exact bucket's %v: more than one float32 step (256 ms) per write (%d writes)", d.RetryAfter, late, want, writes+1)
	}
	// RetryAfter is the limiter's own next decision, to the millisecond.
	clk.Advance(d.RetryAfter - time.Millisecond)
	if l.PeekN(clk.Now(), "k", 1).Allowed {
		t.Errorf("admitted 1 ms before RetryAfter %v", d.RetryAfter)
	}
	clk.Advance(time.Millisecond)
	if !l.PeekN(clk.Now(), "k", 1).Allowed {
		t.Errorf("denied at RetryAfter %v", d.RetryAfter)
	}
}
