package limit_test

// Audit 2: acceptance tests of package limit against its documentation
// (limit/doc.go, the exported doc comments, docs/capacity.md), aimed at
// what the other suites do not cover: RejectCost on requests above the
// burst, bursts near 2^24, a Multi with an Inf window, exact Decisions at
// the largest bursts the docs name, PeekN against DecideN, Cancel of a
// reservation that filled MaxDebt, and a limiter sized by WithCapacity
// holding its keys and saying when it is full.

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit2AllowNAboveBurstRejectCost: WithRejectCost "debits c tokens
// of debt on every denial", and DecideN "is AllowN returning the full
// Decision". A request of n > burst is a denial: DecideN debits the
// penalty for it, so AllowN (the Limiter's and a Tier's) must too.
func TestAudit2AllowNAboveBurstRejectCost(t *testing.T) {
	for _, e := range engines {
		t.Run(e.String(), func(t *testing.T) {
			l, clk := newFake(t, 10, 5, limit.WithEngine(e), limit.WithRejectCost(2))
			tier, err := l.Tier("t", 10, 5)
			if err != nil {
				t.Fatal(err)
			}
			if d := l.DecideN(clk.Now(), "decide", 6); d.Allowed || !d.Never {
				t.Fatalf("DecideN(6) on burst 5: %+v", d)
			}
			want := l.Tokens("decide") // 3: the penalty was debited
			if want != 3 {
				t.Fatalf("DecideN(6) denial left %v tokens, want 3 (RejectCost 2)", want)
			}
			for name, allow := range map[string]func(time.Time, string, int) bool{
				"Limiter.AllowN": l.AllowN, "Tier.AllowN": tier.AllowN,
			} {
				key := "allow-" + name
				if allow(clk.Now(), key, 6) {
					t.Fatalf("%s(6) on burst 5 admitted", name)
				}
				if got := l.Tokens(key); got != want {
					t.Errorf("%s(n > burst) denial left %v tokens; DecideN's left %v: RejectCost is debited on every denial", name, got, want)
				}
			}
		})
	}
}

// TestAudit2NewBurstUpTo2p24: New refuses "a burst < 1 or above 2^24";
// a burst in (2^23, 2^24] with no option at all is none of New's listed
// errors, yet the default MaxDebt (2 x burst) is then above its own
// 2^24 bound and New refuses the limiter, naming MaxDebt, an option the
// caller never gave.
func TestAudit2NewBurstUpTo2p24(t *testing.T) {
	for _, burst := range []int{1<<23 + 1, 1 << 24} {
		l, err := limit.New(10, burst, limit.WithSeed(1))
		if err != nil {
			t.Errorf("New(10, %d) with no options: %v (the doc refuses only a burst above 2^24)", burst, err)
			continue
		}
		now := l.Now()
		if !l.AllowN(now, "k", burst) || l.AllowN(now, "k", 1) {
			t.Errorf("New(10, %d): the full burst at once is not exactly admitted", burst)
		}
	}
}

// TestAudit2MultiInfWindow: a Multi may hold an Inf window (NewMulti
// accepts it; "Inf admits everything"). Decision.Remaining is "how many
// one-token requests the key could make right after this decision": the
// Inf window never limits, so a Multi of Inf (burst 1) and 10/s (burst
// 20) leaves 19 after one request, bound by the finite window, not 1 in
// the name of the Inf window.
func TestAudit2MultiInfWindow(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	inf := limit.MustNew(limit.Inf, 1, limit.WithName("inf"), limit.WithClock(clk))
	fin := limit.MustNew(10, 20, limit.WithName("fin"), limit.WithClock(clk), limit.WithSeed(1))
	m, err := limit.NewMulti(inf, fin)
	if err != nil {
		t.Fatal(err)
	}
	d := m.DecideKeys(clk.Now(), 1, "k")
	if !d.Allowed {
		t.Fatalf("first request denied: %+v", d)
	}
	for i := 2; i <= 20; i++ { // the 19 the key has left are all admitted
		if !m.DecideKeys(clk.Now(), 1, "k").Allowed {
			t.Fatalf("request %d denied", i)
		}
	}
	if d.Remaining != 19 || d.Policy != "fin" || d.Burst != 20 {
		t.Errorf("Multi(Inf burst 1, 10/s burst 20) after one request: Remaining %d, Policy %q, Burst %d; want 19, \"fin\", 20 (the Inf window never limits)", d.Remaining, d.Policy, d.Burst)
	}
}

// TestAudit2ExactLargeBursts: "every decision, and every RetryAfter,
// ResetAfter, NextAfter and Remaining, is that of the rational bucket"
// when Exact reports true, at the largest bursts the docs name for the
// count-min ("bursts up to 2330 at 1000/h, 139 at 1/minute, 83886 at
// 10/s"; Every(3s) is "exactly 1/3 per second") and for the Buckets
// engine (MaxDebt draining in up to 61.4 s), with requests of 1 to
// burst+1 tokens, and a retry at RetryAfter admitted, 1 ms before not.
func TestAudit2ExactLargeBursts(t *testing.T) {
	for _, c := range []struct {
		lim   limit.Limit
		r     *big.Rat
		burst int
		eng   limit.Engine
	}{
		{10, big.NewRat(10, 1), 83886, limit.CountMin},
		{limit.Limit(1) / 60, big.NewRat(1, 60), 139, limit.CountMin},
		{limit.Limit(1000) / 3600, big.NewRat(1000, 3600), 2330, limit.CountMin},
		{limit.Every(3 * time.Second), big.NewRat(1, 3), 2796, limit.CountMin},
		{1000, big.NewRat(1000, 1), 30000, limit.Buckets},
		{limit.Every(3 * time.Millisecond), big.NewRat(1000, 3), 10000, limit.Buckets},
		{limit.Every(time.Second), big.NewRat(1, 1), 30, limit.Buckets},
	} {
		t.Run(fmt.Sprintf("%v/%d/%v", float64(c.lim), c.burst, c.eng), func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			clk.Set(123_456_789)
			l, err := limit.New(c.lim, c.burst, limit.WithClock(clk), limit.WithSeed(5), limit.WithEngine(c.eng))
			if err != nil {
				t.Fatal(err)
			}
			if !l.Exact() || l.Engine() != c.eng {
				t.Fatalf("Exact %v, engine %v", l.Exact(), l.Engine())
			}
			rng := rand.New(rand.NewPCG(uint64(c.burst), 7))
			m := newBucket(c.r, c.burst)
			m.at = clk.NowMillis()
			tokMs, _ := new(big.Rat).Quo(rat(1000), c.r).Float64()
			ms := func(x int64) time.Duration { return time.Duration(x) * time.Millisecond }
			for i := range 400 {
				var n int
				switch rng.IntN(4) {
				case 0:
					n = 1
				case 1:
					n = 1 + rng.IntN(3)
				case 2:
					n = c.burst - rng.IntN(3)
				default:
					n = 1 + rng.IntN(c.burst+1)
				}
				n = max(n, 1)
				gap := rng.Float64() * tokMs * float64(min(n, 50))
				if rng.IntN(5) == 0 {
					gap = rng.Float64() * 3 // sub-token gaps
				}
				clk.Advance(time.Duration(gap) * time.Millisecond)
				m.advance(clk.NowMillis())
				want := n <= c.burst && m.fits(n)
				d := l.DecideN(clk.Now(), "k", n)
				if d.Allowed != want {
					t.Fatalf("op %d n=%d: Allowed %v, exact %v (debt %v)", i, n, d.Allowed, want, m.debt.FloatString(6))
				}
				if want {
					m.debt.Add(m.debt, rat(int64(n)))
				}
				switch {
				case d.Never != (n > c.burst):
					t.Fatalf("op %d n=%d: Never %v", i, n, d.Never)
				case d.Never && d.RetryAfter != limit.InfDuration:
					t.Fatalf("op %d: Never with RetryAfter %v", i, d.RetryAfter)
				case !d.Never && !d.Allowed && d.RetryAfter != ms(m.retryAfter(n)):
					t.Fatalf("op %d n=%d: RetryAfter %v, exact %v", i, n, d.RetryAfter, ms(m.retryAfter(n)))
				case d.Allowed && d.RetryAfter != 0:
					t.Fatalf("op %d: admitted with RetryAfter %v", i, d.RetryAfter)
				}
				if d.ResetAfter != ms(m.resetAfter()) || d.Remaining != m.remaining() || d.NextAfter != ms(m.nextAfter()) {
					t.Fatalf("op %d n=%d: ResetAfter %v Remaining %d NextAfter %v; exact %v %d %v", i, n,
						d.ResetAfter, d.Remaining, d.NextAfter, ms(m.resetAfter()), m.remaining(), ms(m.nextAfter()))
				}
				if d.Allowed || d.Never || rng.IntN(2) == 0 {
					continue
				}
				at := clk.Now()
				clk.SetTime(at.Add(d.RetryAfter - time.Millisecond))
				if l.PeekN(clk.Now(), "k", n).Allowed {
					t.Fatalf("op %d: admitted 1 ms before RetryAfter %v", i, d.RetryAfter)
				}
				clk.SetTime(at.Add(d.RetryAfter))
				m.advance(clk.NowMillis())
				if !l.AllowN(clk.Now(), "k", n) {
					t.Fatalf("op %d: denied at RetryAfter %v", i, d.RetryAfter)
				}
				m.debt.Add(m.debt, rat(int64(n)))
			}
		})
	}
}

// TestAudit2PeekIsDecide: PeekN "says what DecideN would answer at t
// (Remaining and ResetAfter as if the request were admitted, when it
// would be), and debits nothing": with no RejectCost, a PeekN followed
// by a DecideN at the same t returns the same Decision, and a second
// PeekN sees the key unchanged when the request was denied. Random
// schedules of n in [1, burst+1], stale and future t, both engines, an
// inexact rate and a Tier included.
func TestAudit2PeekIsDecide(t *testing.T) {
	type decider interface {
		DecideN(time.Time, string, int) limit.Decision
		PeekN(time.Time, string, int) limit.Decision
	}
	for _, c := range []struct {
		name  string
		lim   limit.Limit
		burst int
		opts  []limit.Option
		tier  bool
	}{
		{"buckets", 10, 7, []limit.Option{limit.WithEngine(limit.Buckets)}, false},
		{"count-min", limit.Every(3 * time.Second), 5, []limit.Option{limit.WithEngine(limit.CountMin)}, false},
		{"inexact", 7.3, 9, []limit.Option{limit.WithMaxDebt(40)}, false},
		{"tier", 10, 20, []limit.Option{limit.WithMaxDebt(80)}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, clk := newFake(t, c.lim, c.burst, c.opts...)
			var x decider = l
			burst := c.burst
			if c.tier {
				tr, err := l.Tier("free", 2.5, 20)
				if err != nil {
					t.Fatal(err)
				}
				x, burst = tr, 20
			}
			rng := rand.New(rand.NewPCG(3, uint64(burst)))
			for i := range 600 {
				clk.Advance(time.Duration(rng.IntN(400)) * time.Millisecond)
				at := clk.Now()
				switch rng.IntN(4) {
				case 0:
					at = at.Add(-time.Duration(rng.IntN(300)) * time.Millisecond) // stale
				case 1:
					at = at.Add(time.Duration(rng.IntN(300)) * time.Millisecond) // future
				}
				k := fmt.Sprint("k", rng.IntN(3))
				n := 1 + rng.IntN(burst+1)
				p := x.PeekN(at, k, n)
				d := x.DecideN(at, k, n)
				if p != d {
					t.Fatalf("op %d %s n=%d: PeekN %+v, then DecideN %+v", i, k, n, p, d)
				}
				if !d.Allowed {
					if again := x.DecideN(at, k, n); again != d {
						t.Fatalf("op %d: a denial (no RejectCost) changed the key: %+v then %+v", i, d, again)
					}
				}
			}
		})
	}
}

// TestAudit2CancelMaxDebtFilled: Reservation.Cancel: "A reservation that
// filled the key to MaxDebt is never given back (either engine)", while
// one that did not is given back exactly, "the part drained since
// included", even when it queued past the burst.
func TestAudit2CancelMaxDebtFilled(t *testing.T) {
	forEngines(t, func(t *testing.T, eng limit.Option) {
		l, clk := newFake(t, 10, 2, eng) // MaxDebt 4
		r1 := l.ReserveN(clk.Now(), "k", 2)
		r2 := l.ReserveN(clk.Now(), "k", 2) // debt 4 = MaxDebt
		if !r1.OK() || !r2.OK() || r1.Delay() != 0 || r2.Delay() != 200*time.Millisecond {
			t.Fatalf("reservations: %v %v, delays %v %v", r1.OK(), r2.OK(), r1.Delay(), r2.Delay())
		}
		if r3 := l.ReserveN(clk.Now(), "k", 1); r3.OK() || r3.Delay() != limit.InfDuration {
			t.Fatal("a reservation past MaxDebt was taken")
		}
		r2.Cancel()
		if got := l.Tokens("k"); got != -2 {
			t.Fatalf("Cancel of the reservation that filled MaxDebt gave back: %v tokens, want -2", got)
		}
		// Debt 3 of burst 5 (MaxDebt 10), a queued reservation of 5 (debt
		// 8), 250 ms: cancelled, the key reads as if never reserved: 0.5.
		l2, clk2 := newFake(t, 10, 5, eng)
		l2.AllowN(clk2.Now(), "q", 3)
		r := l2.ReserveN(clk2.Now(), "q", 5)
		if !r.OK() || r.Delay() != 300*time.Millisecond {
			t.Fatalf("reservation: %v, delay %v", r.OK(), r.Delay())
		}
		clk2.Advance(250 * time.Millisecond)
		if d := r.Delay(); d != 50*time.Millisecond {
			t.Fatalf("Delay after 250 ms: %v", d)
		}
		r.Cancel()
		r.Cancel() // idempotent
		if got := l2.Tokens("q"); got != 4.5 {
			t.Fatalf("after Cancel: %v tokens, want 4.5 (the debt of 3 drained 250 ms)", got)
		}
	})
}

// TestAudit2CapacityHolds: WithCapacity(keys, deny) "sizes either engine
// for a number of keys at their limit and a rate of fresh-key denials":
// keys keys at full debt get their burst (docs/capacity.md: 99.9% and
// more at these sizes), fresh keys are denied at most about deny
// (measured by PeekN), Limiter.Capacity(deny) is at least keys, and
// Stats().Saturation reads the denial rate; past capacity (3 x keys)
// Saturation says the limiter is full (well above deny) and agrees
// with the measured rate within docs/capacity.md's 20% relative.
func TestAudit2CapacityHolds(t *testing.T) {
	testsize.Serial(t)
	const keys, deny, fresh = 10000, 0.01, 40000
	for _, e := range engines {
		t.Run(e.String(), func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			clk.Set(5_000_000)
			l, err := limit.New(10, 20, limit.WithClock(clk), limit.WithSeed(11), limit.WithEngine(e), limit.WithCapacity(keys, deny))
			if err != nil {
				t.Fatal(err)
			}
			if c := l.Capacity(deny); c < keys {
				t.Fatalf("Capacity(%v) = %d < the %d keys WithCapacity asked for", deny, c, keys)
			}
			now := clk.Now() // frozen: nothing drains
			fill := func(from, to int) (got int) {
				for i := from; i < to; i++ {
					if l.AllowN(now, fmt.Sprint("user-", i), 20) {
						got++
					}
				}
				return got
			}
			denied := func() float64 {
				n := 0
				for i := range fresh {
					if !l.PeekN(now, fmt.Sprint("fresh-", i), 1).Allowed {
						n++
					}
				}
				return float64(n) / fresh
			}
			if got := fill(0, keys); got < keys*99/100 {
				t.Fatalf("%d of %d keys got their burst", got, keys)
			}
			rate0 := denied()
			t.Logf("at capacity: measured %.5f Saturation %.5f", rate0, l.Stats().Saturation)
			if rate := rate0; rate > 1.5*deny {
				t.Fatalf("at capacity: %.3f%% of fresh keys denied, target %.1f%%", 100*rate, 100*deny)
			}
			if s := l.Stats().Saturation; s > 1.5*deny {
				t.Fatalf("at capacity: Saturation %v, target %v", s, deny)
			}
			fill(keys, 3*keys)
			rate, s := denied(), l.Stats().Saturation
			t.Logf("3x: measured %.4f Saturation %.4f", rate, s)
			if rate < 10*deny || s < 10*deny {
				t.Fatalf("at 3x capacity: measured %.2f%% denied, Saturation %.2f%%: not saying it is full", 100*rate, 100*s)
			}
			if s < 0.8*rate || s > 1.2*rate {
				t.Fatalf("at 3x capacity: Saturation %.4f vs measured %.4f: beyond 20%%", s, rate)
			}
		})
	}
}
