package limit_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"github.com/lfgrudge/grudge/sketch"
)

// The cases of golang.org/x/time/rate's own rate_test.go (v0.15.0),
// re-expressed per key on limit, on both engines, with d = 100 ms and
// t_i = t0 + i x d. Where limit documents a deviation the case asserts
// limit's documented answer and that it is never ahead of x/time/rate's
// (no admission x/time/rate refuses, no earlier act time).

const a97D = 100 * time.Millisecond

// a97Port builds limit.New(r, b) on eng at t0 = a97Base on a fake clock.
func a97Port(t *testing.T, eng limit.Engine, r limit.Limit, b int, opts ...limit.Option) (*limit.Limiter, *limittest.FakeClock) {
	t.Helper()
	clk := limittest.NewFakeClock()
	clk.Set(a97Base)
	l, err := limit.New(r, b, append([]limit.Option{limit.WithClock(clk), limit.WithEngine(eng), limit.WithSeed(7)}, opts...)...)
	if err != nil {
		t.Fatalf("New(%v, %d) on %v: %v", r, b, eng, err)
	}
	return l, clk
}

// a97T is t_i: t0 + i x d.
func a97T(i int) time.Time { return time.UnixMilli(a97Base).Add(time.Duration(i) * a97D) }

// a97Allow is one step of x/time/rate's run: at t_i, TokensAt is toks
// and AllowN(n) answers ok.
type a97Allow struct {
	i    int
	toks float64
	n    int
	ok   bool
}

func a97Run(t *testing.T, l *limit.Limiter, clk *limittest.FakeClock, steps []a97Allow) {
	t.Helper()
	for s, a := range steps {
		tm := a97T(a.i)
		if clk.Now().Before(tm) {
			clk.SetTime(tm)
		}
		if toks := l.TokensAt(tm, "k"); toks != a.toks {
			t.Errorf("step %d: TokensAt(t%d) = %v, want %v", s, a.i, toks, a.toks)
		}
		if ok := l.AllowN(tm, "k", a.n); ok != a.ok {
			t.Errorf("step %d: AllowN(t%d, %d) = %v, want %v", s, a.i, a.n, ok, a.ok)
		}
	}
}

// a97Reserve is ReserveN(t_i, n) with the clock at t_i (or later when it
// is past already), checked to be OK as ok and to act at t_act.
func a97Reserve(t *testing.T, l *limit.Limiter, clk *limittest.FakeClock, i, n, act int, ok bool) *limit.Reservation {
	t.Helper()
	tm := a97T(i)
	if clk.Now().Before(tm) {
		clk.SetTime(tm)
	}
	r := l.ReserveN(tm, "k", n)
	if r.OK() != ok {
		t.Fatalf("ReserveN(t%d, %d): OK %v, want %v", i, n, r.OK(), ok)
	}
	if ok {
		if got, want := tm.Add(r.DelayFrom(tm)), a97T(act); !got.Equal(want) {
			t.Fatalf("ReserveN(t%d, %d) acts at t0+%v, want t%d", i, n, got.Sub(a97T(0)), act)
		}
	} else if r.DelayFrom(tm) != limit.InfDuration {
		t.Fatalf("ReserveN(t%d, %d) not OK: DelayFrom %v, want InfDuration", i, n, r.DelayFrom(tm))
	}
	return r
}

// a97ByEngine is onBuckets on the Buckets engine, onCountMin on the
// count-min.
func a97ByEngine(eng limit.Engine, onBuckets, onCountMin int) int {
	if eng == limit.Buckets {
		return onBuckets
	}
	return onCountMin
}

func a97Engines(t *testing.T, f func(t *testing.T, eng limit.Engine)) {
	for _, eng := range []limit.Engine{limit.Buckets, limit.CountMin} {
		t.Run(eng.String(), func(t *testing.T) { f(t, eng) })
	}
}

// TestAudit97PeerPortBurst: x/time/rate's TestLimiterBurst1 and
// TestLimiterBurst3, TokensAt and AllowN step for step (readings.md:565-567:
// TokensAt "burst - debt, fractional"; AllowN "admitted iff debt + n <=
// burst at t"), except its last step AllowN(t9, 0): "n <= 0 panics
// (x/time/rate admits n = 0)" (readings.md:567) with "limit: AllowN: n
// must be > 0; got 0" (doc.go).
func TestAudit97PeerPortBurst(t *testing.T) {
	a97Engines(t, func(t *testing.T, eng limit.Engine) {
		l, clk := a97Port(t, eng, 10, 1)
		a97Run(t, l, clk, []a97Allow{
			{0, 1, 1, true}, {0, 0, 1, false}, {0, 0, 1, false},
			{1, 1, 1, true}, {1, 0, 1, false}, {1, 0, 1, false},
			{2, 1, 2, false}, {2, 1, 1, true}, {2, 0, 1, false},
		})
		l, clk = a97Port(t, eng, 10, 3)
		a97Run(t, l, clk, []a97Allow{
			{0, 3, 2, true}, {0, 1, 2, false}, {0, 1, 1, true}, {0, 0, 1, false},
			{1, 1, 4, false}, {2, 2, 1, true}, {3, 2, 1, true}, {4, 2, 1, true},
			{4, 1, 1, true}, {4, 0, 1, false}, {4, 0, 1, false}, {9, 3, 3, true},
		})
		if tk := l.TokensAt(a97T(9), "k"); tk != 0 {
			t.Errorf("TokensAt(t9) after AllowN(t9, 3) = %v, want 0", tk)
		}
		defer func() {
			if msg := fmt.Sprint(recover()); msg != "limit: AllowN: n must be > 0; got 0" {
				t.Errorf("AllowN(t9, 0) panicked with %q, want the documented message", msg)
			}
		}()
		l.AllowN(a97T(9), "k", 0)
	})
}

// TestAudit97PeerPortJumpBackwards: x/time/rate's TestLimiterJumpBackwards
// (start at t1, then t0 three times, then t1 and t2). Up to the return to
// t1 limit agrees ("A t before a time already used counts as that time,
// as x/time/rate counts it (no elapsed time)", readings.md:567); there
// x/time/rate re-credits t0..t1 and admits, and limit does not: "x/time/rate
// then also moves its last back and re-credits the interval later; here
// time never runs backwards". The token of t1..t2 then comes in both.
func TestAudit97PeerPortJumpBackwards(t *testing.T) {
	a97Engines(t, func(t *testing.T, eng limit.Engine) {
		l, clk := a97Port(t, eng, 10, 3)
		clk.SetTime(a97T(1))
		a97Run(t, l, clk, []a97Allow{
			{1, 3, 1, true},
			{0, 2, 1, true}, {0, 1, 1, true}, {0, 0, 1, false}, {0, 0, 1, false},
			{1, 0, 1, false}, // x/time/rate: 1 token, admitted
			{1, 0, 1, false},
			{2, 1, 1, true}, {2, 0, 1, false}, {2, 0, 1, false},
		})
	})
}

// TestAudit97PeerPortTinyRates: x/time/rate's TestLimiter_noTruncationErrors
// (NewLimiter(0.7692307692307693, 1).Allow() is true), TestTinyLimit
// (1e-10/s, burst 1: the first Allow admitted, the second not) and
// TestEvery (Every(d) is 1e9/d ns within 1e-9, Every(<= 0) is Inf),
// under Auto; and Every's extremes as limits New takes: Every(1 ns) and
// Every(MaxInt64) ("a limit that is NaN, zero, negative or too large to
// represent (above 1e22)" are New's only refusals of a rate, limit.go).
func TestAudit97PeerPortTinyRates(t *testing.T) {
	for _, r := range []limit.Limit{0.7692307692307693, 1e-10, limit.Every(time.Duration(math.MaxInt64)), limit.Every(time.Nanosecond)} {
		clk := limittest.NewFakeClock()
		clk.Set(a97Base)
		l, err := limit.New(r, 1, limit.WithClock(clk))
		if err != nil {
			t.Errorf("New(%v, 1): %v", r, err)
			continue
		}
		if !l.Allow("k") {
			t.Errorf("New(%v, 1): the first Allow denied", r)
		}
		if r < 1e3 && l.Allow("k") {
			t.Errorf("New(%v, 1): a second Allow in the same ms admitted", r)
		}
	}
	for _, c := range []struct {
		d time.Duration
		r float64
	}{
		{time.Nanosecond, 1e9}, {time.Microsecond, 1e6}, {time.Millisecond, 1e3}, {10 * time.Millisecond, 100},
		{100 * time.Millisecond, 10}, {time.Second, 1}, {2 * time.Second, 0.5}, {2500 * time.Millisecond, 0.4},
		{4 * time.Second, 0.25}, {10 * time.Second, 0.1}, {time.Duration(math.MaxInt64), 1e9 / float64(math.MaxInt64)},
	} {
		if got := float64(limit.Every(c.d)); math.Abs(got/c.r-1) > 1e-9 {
			t.Errorf("Every(%v) = %v, want %v", c.d, got, c.r)
		}
	}
	if limit.Every(0) != limit.Inf || limit.Every(-1) != limit.Inf || limit.Limit(10) == limit.Inf {
		t.Errorf("Every(0) %v, Every(-1) %v: want Inf", limit.Every(0), limit.Every(-1))
	}
}

// TestAudit97PeerPortReserve: x/time/rate's TestSimpleReserve, TestMix,
// TestCancelInvalid, TestCancelLast, TestCancel0Tokens and
// TestReserveSetBurst, whose act times limit gives too (with room in
// MaxDebt: default 2 x burst; readings.md:568 "not OK beyond MaxDebt").
func TestAudit97PeerPortReserve(t *testing.T) {
	a97Engines(t, func(t *testing.T, eng limit.Engine) {
		// TestSimpleReserve
		l, clk := a97Port(t, eng, 10, 2)
		a97Reserve(t, l, clk, 0, 2, 0, true)
		a97Reserve(t, l, clk, 0, 2, 2, true)
		a97Reserve(t, l, clk, 3, 2, 4, true)

		// TestMix
		l, clk = a97Port(t, eng, 10, 2)
		a97Reserve(t, l, clk, 0, 3, 0, false) // n > burst
		a97Reserve(t, l, clk, 0, 2, 0, true)
		a97Run(t, l, clk, []a97Allow{{1, 1, 2, false}})
		a97Reserve(t, l, clk, 1, 2, 2, true)
		a97Run(t, l, clk, []a97Allow{{1, -1, 1, false}}) // negative tokens
		a97Run(t, l, clk, []a97Allow{{3, 1, 1, true}})

		// TestCancelInvalid: a Reservation that is not OK: "Cancel does
		// nothing" (reserve.go)
		l, clk = a97Port(t, eng, 10, 2)
		a97Reserve(t, l, clk, 0, 2, 0, true)
		a97Reserve(t, l, clk, 0, 3, 0, false).Cancel()
		a97Reserve(t, l, clk, 0, 2, 2, true)

		// TestCancelLast, with MaxDebt room for the second reservation (the
		// default MaxDebt 4 is filled by it: see TestAudit97PeerPortCancel)
		l, clk = a97Port(t, eng, 10, 2, limit.WithMaxDebt(5))
		a97Reserve(t, l, clk, 0, 2, 0, true)
		r := a97Reserve(t, l, clk, 0, 2, 2, true)
		clk.SetTime(a97T(1))
		r.Cancel() // 2 tokens back
		a97Reserve(t, l, clk, 1, 2, 2, true)

		// TestCancel0Tokens: a later reservation has used the tokens, so
		// none come back in x/time/rate (the next acts at t3). Here
		// Buckets keeps the debit (another request wrote the key since,
		// "within the same millisecond too"), as x/time/rate; the
		// count-min gives it back, the later write being "only within the
		// same millisecond, below MaxDebt" (readings.md:571): the next
		// acts at t2, 100 ms ahead of x/time/rate, as the rational bucket
		// without the cancelled reservation has it.
		l, clk = a97Port(t, eng, 10, 2, limit.WithMaxDebt(5))
		a97Reserve(t, l, clk, 0, 2, 0, true)
		r = a97Reserve(t, l, clk, 0, 1, 1, true)
		a97Reserve(t, l, clk, 0, 1, 2, true)
		r.Cancel()
		a97Reserve(t, l, clk, 0, 1, a97ByEngine(eng, 3, 2), true)

		// TestReserveSetBurst: x/time/rate answers t9 from its SetBurstAt(t3)
		// then a reservation at t0 ("violates Limit and Burst", its
		// comment); here SetBurst takes no time, the reservation is decided
		// at t0, the time the key was last used, and acts when 8 tokens of
		// 200 ms have drained to the new burst of 4: t8.
		l, clk = a97Port(t, eng, 5, 2, limit.WithMaxDebt(8))
		a97Reserve(t, l, clk, 0, 2, 0, true)
		a97Reserve(t, l, clk, 0, 2, 4, true)
		clk.SetTime(a97T(3))
		if err := l.SetBurst(4); err != nil {
			t.Fatal(err)
		}
		a97Reserve(t, l, clk, 0, 4, 8, true)
	})
}

// TestAudit97PeerPortCancel: the Cancel cases of x/time/rate where limit
// documents another answer (reserve.go, Reservation.Cancel;
// readings.md:571, "all or nothing per cell"):
//   - TestCancelLast at the default MaxDebt (4): the second reservation
//     fills the key to MaxDebt, and "A reservation that filled the key to
//     MaxDebt is never given back (either engine)": a third of 2 at t1
//     is then beyond MaxDebt, not OK (x/time/rate: OK, at t2).
//   - TestCancelTooLate: a Cancel at t3, after the act time t2: "after
//     its act time Cancel still gives the tokens back (...), where
//     x/time/rate's CancelAt gives nothing": 2 at t3 act at t3, where
//     x/time/rate says t4 (ahead of x/time/rate, as documented).
//   - TestCancel1Token: another reservation since, so "all or nothing":
//     nothing back; 2 at t2 act at t5 (x/time/rate, which gives 1 back:
//     t4).
//   - TestCancelMulti: C (the last) is given back whole; A (written over
//     since) not at all on Buckets, so 3 at t1 act at t7 (x/time/rate:
//     t5); on the count-min A too, its later writes being in its own
//     millisecond and below MaxDebt: t4, 100 ms ahead of x/time/rate
//     (which gives 2 of A's 3 back), as the rational bucket without A
//     and C has it.
func TestAudit97PeerPortCancel(t *testing.T) {
	a97Engines(t, func(t *testing.T, eng limit.Engine) {
		l, clk := a97Port(t, eng, 10, 2)
		a97Reserve(t, l, clk, 0, 2, 0, true)
		r := a97Reserve(t, l, clk, 0, 2, 2, true)
		clk.SetTime(a97T(1))
		r.Cancel()
		a97Reserve(t, l, clk, 1, 2, 0, false)

		l, clk = a97Port(t, eng, 10, 2, limit.WithMaxDebt(5))
		a97Reserve(t, l, clk, 0, 2, 0, true)
		r = a97Reserve(t, l, clk, 0, 2, 2, true)
		clk.SetTime(a97T(3))
		r.Cancel()
		a97Reserve(t, l, clk, 3, 2, 3, true)

		l, clk = a97Port(t, eng, 10, 2, limit.WithMaxDebt(5))
		a97Reserve(t, l, clk, 0, 2, 0, true)
		r = a97Reserve(t, l, clk, 0, 2, 2, true)
		a97Reserve(t, l, clk, 0, 1, 3, true)
		clk.SetTime(a97T(2))
		r.Cancel()
		a97Reserve(t, l, clk, 2, 2, 5, true)

		l, clk = a97Port(t, eng, 10, 4, limit.WithMaxDebt(10))
		a97Reserve(t, l, clk, 0, 4, 0, true)
		rA := a97Reserve(t, l, clk, 0, 3, 3, true)
		a97Reserve(t, l, clk, 0, 1, 4, true)
		rC := a97Reserve(t, l, clk, 0, 1, 5, true)
		clk.SetTime(a97T(1))
		rC.Cancel()
		rA.Cancel()
		a97Reserve(t, l, clk, 1, 3, a97ByEngine(eng, 7, 4), true)
	})
}

// TestAudit97PeerPortJumpBackReserve: x/time/rate's TestReserveJumpBack
// and TestReserveJumpBackCancel. "A stale t is decided at the later time
// the limiter is at and the act time measured from there (x/time/rate:
// from t, its own time)" (readings.md:568), and ReserveN "a stale t
// never makes the requests act early": every act time here is at or after
// x/time/rate's (t1, t3, t4, t5 there; t1, t2, t4, t5, t6 here), and a
// reservation above the burst changes nothing in either.
func TestAudit97PeerPortJumpBackReserve(t *testing.T) {
	a97Engines(t, func(t *testing.T, eng limit.Engine) {
		l, clk := a97Port(t, eng, 10, 2, limit.WithMaxDebt(10))
		clk.SetTime(a97T(1))
		a97Reserve(t, l, clk, 1, 2, 1, true)
		a97Reserve(t, l, clk, 0, 1, 2, true) // x/time/rate: t1
		a97Reserve(t, l, clk, 2, 2, 4, true) // x/time/rate: t3
		a97Reserve(t, l, clk, 0, 3, 0, false)
		a97Reserve(t, l, clk, 2, 1, 5, true) // x/time/rate: t4
		a97Reserve(t, l, clk, 2, 1, 6, true) // x/time/rate: t5 (after its refused reserveN)

		// TestReserveJumpBackCancel: the cancelled reservation was written
		// over since (x/time/rate gives 1 back, and 2 at t1 act at t4):
		// on Buckets nothing back, t6; on the count-min, written over only
		// within its millisecond, all of it, t4.
		l, clk = a97Port(t, eng, 10, 2, limit.WithMaxDebt(10))
		clk.SetTime(a97T(1))
		a97Reserve(t, l, clk, 1, 2, 1, true)
		r := a97Reserve(t, l, clk, 1, 2, 3, true)
		a97Reserve(t, l, clk, 1, 1, 4, true)
		r.Cancel()
		a97Reserve(t, l, clk, 1, 2, a97ByEngine(eng, 6, 4), true)
	})
}

// TestAudit97PeerPortSetLimit: x/time/rate's TestReserveSetLimit and
// TestReserveSetLimitCancel (5/s, burst 2, the rate doubled at t2).
// "a key's debt is kept as time to drain, not as a token count"
// (readings.md:573): at t2 the key owes 600 ms; a reservation of 1 at
// 10/s makes it 700 ms, back within the burst's 200 ms at t7
// (x/time/rate, which keeps -1 tokens and refills them at 10/s: t4).
// With the second reservation cancelled (MaxDebt 5, so that it did not
// fill the key), the key owes 200 ms and 2 more at 10/s act at t4
// (x/time/rate: t3).
func TestAudit97PeerPortSetLimit(t *testing.T) {
	a97Engines(t, func(t *testing.T, eng limit.Engine) {
		l, clk := a97Port(t, eng, 5, 2)
		a97Reserve(t, l, clk, 0, 2, 0, true)
		a97Reserve(t, l, clk, 0, 2, 4, true)
		clk.SetTime(a97T(2))
		if err := l.SetLimit(10); err != nil {
			t.Fatal(err)
		}
		a97Reserve(t, l, clk, 2, 1, 7, true)

		l, clk = a97Port(t, eng, 5, 2, limit.WithMaxDebt(5))
		a97Reserve(t, l, clk, 0, 2, 0, true)
		r := a97Reserve(t, l, clk, 0, 2, 4, true)
		clk.SetTime(a97T(2))
		if err := l.SetLimit(10); err != nil {
			t.Fatal(err)
		}
		r.Cancel()
		a97Reserve(t, l, clk, 2, 2, 4, true)
	})
}

// TestAudit97PeerPortInfAndZero: x/time/rate's TestWaitInf (Inf admits
// a WaitN above the burst), TestZeroLimit and TestSetAfterZeroLimit
// (a zero limit). readings.md:562: "r <= 0 and b < 1 are errors
// (*sketch.ConfigError)" where x/time/rate takes them; Inf "admits every
// request and keeps no state" (limit.go), so AllowN, DecideN, ReserveN
// and WaitN of n above the burst are admitted as x/time/rate's are
// (x/time/rate's reserveN under Inf is OK whatever n), at once.
func TestAudit97PeerPortInfAndZero(t *testing.T) {
	for _, c := range []struct {
		r limit.Limit
		b int
	}{{0, 1}, {-1, 1}, {10, 0}, {limit.Inf, 0}} {
		_, err := limit.New(c.r, c.b)
		if !errors.Is(err, sketch.ErrInvalidConfig) {
			t.Errorf("New(%v, %d): %v, want a *sketch.ConfigError", c.r, c.b, err)
		}
	}
	clk := limittest.NewFakeClock()
	clk.Set(a97Base)
	l, err := limit.New(limit.Inf, 1, limit.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	now := clk.Now()
	for i := 0; i < 3; i++ {
		if !l.AllowN(now, "k", 3) {
			t.Errorf("Inf: AllowN(3) above the burst 1 denied")
		}
		if d := l.DecideN(now, "k", 5); !d.Allowed || d.Never || d.RetryAfter != 0 {
			t.Errorf("Inf: DecideN(5) = %+v, want admitted", d)
		}
		if r := l.ReserveN(now, "k", 4); !r.OK() || r.DelayFrom(now) != 0 || r.Delay() != 0 {
			t.Errorf("Inf: ReserveN(4) OK %v, DelayFrom %v", r.OK(), r.DelayFrom(now))
		}
		if err := l.WaitN(t.Context(), "k", 3); err != nil {
			t.Errorf("Inf: WaitN(3) above the burst: %v", err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.WaitN(ctx, "k", 3); !errors.Is(err, context.Canceled) {
		t.Errorf("Inf: WaitN on a cancelled context: %v, want context.Canceled (x/time/rate checks the context first)", err)
	}
	if err := l.SetBurst(0); !errors.Is(err, sketch.ErrInvalidConfig) {
		t.Errorf("Inf: SetBurst(0): %v, want a *sketch.ConfigError", err)
	}
	f := limit.MustNew(10, 1)
	if err := f.SetBurst(0); !errors.Is(err, sketch.ErrInvalidConfig) {
		t.Errorf("SetBurst(0): %v, want a *sketch.ConfigError", err)
	}
	if err := f.SetLimit(0); !errors.Is(err, sketch.ErrInvalidConfig) {
		t.Errorf("SetLimit(0): %v, want a *sketch.ConfigError", err)
	}
}

// TestAudit97PeerPortQPS: x/time/rate's TestSimultaneousRequests (limit
// 1, burst 5, 15 goroutines at one instant: 5 admitted) and
// TestLongRunningQPS (100/s, burst 100, a request every ms for 5 s:
// burst + rate x elapsed admitted), on the fake clock. Strict mode "never
// over-admits under contention, as x/time/rate's mutex" (readings.md:567),
// and the count-min is exact under contention (API.md: TryUpdate racers
// "admit exactly" the limit); on Buckets "a key's own racing requests
// can, rarely, deny one with room", so there at most 5. The long run is
// serial: exactly the rational bucket's count, 100 + 499 (one more
// every 10 ms of the 4999 ms from the first request to the last).
func TestAudit97PeerPortQPS(t *testing.T) {
	a97Engines(t, func(t *testing.T, eng limit.Engine) {
		l, clk := a97Port(t, eng, 1, 5)
		now := clk.Now()
		var ok atomic.Int32
		var wg sync.WaitGroup
		for range 15 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if l.AllowN(now, "k", 1) {
					ok.Add(1)
				}
			}()
		}
		wg.Wait()
		if n := ok.Load(); n > 5 || eng == limit.CountMin && n != 5 {
			t.Errorf("15 simultaneous requests, burst 5: %d admitted", n)
		}

		l, clk = a97Port(t, eng, 100, 100)
		admitted := 0
		for ms := int64(0); ms < 5000; ms++ {
			clk.Set(a97Base + ms)
			if l.Allow("k") {
				admitted++
			}
		}
		if admitted != 100+499 {
			t.Errorf("a request every ms for 5 s at 100/s, burst 100: %d admitted, want 599", admitted)
		}
	})
}

// TestAudit97PeerPortSetBurstKeepsDebt: x/time/rate's SetBurst keeps a
// bucket's token count (readings.md:573: here "a key's debt is kept as
// time to drain, not as a token count"; tier.go, SetBurst: "a key's debt
// is unchanged, so a lower burst leaves a key in debt further from
// admission, a higher one closer"). 10/s, burst 10, MaxDebt 40: a full
// key after SetBurst(20) has 20 tokens at once (x/time/rate: its 10,
// refilling); a key owing 2 tokens after SetBurst(5) has 3 (x/time/rate:
// 8 capped at 5); SetBurst back to 10 finds the same debt.
func TestAudit97PeerPortSetBurstKeepsDebt(t *testing.T) {
	a97Engines(t, func(t *testing.T, eng limit.Engine) {
		l, clk := a97Port(t, eng, 10, 10, limit.WithMaxDebt(40))
		now := clk.Now()
		if err := l.SetBurst(20); err != nil {
			t.Fatal(err)
		}
		if tk := l.TokensAt(now, "full"); tk != 20 {
			t.Errorf("a full key after SetBurst(20): TokensAt %v, want 20", tk)
		}
		if !l.AllowN(now, "full", 20) {
			t.Errorf("a full key after SetBurst(20): AllowN(20) denied")
		}
		if err := l.SetBurst(10); err != nil {
			t.Fatal(err)
		}
		if !l.AllowN(now, "k", 2) {
			t.Fatal("AllowN(2) of a full key denied")
		}
		if err := l.SetBurst(5); err != nil {
			t.Fatal(err)
		}
		if tk := l.TokensAt(now, "k"); tk != 3 {
			t.Errorf("a key owing 2 after SetBurst(5): TokensAt %v, want 3", tk)
		}
		if d := l.PeekN(now, "k", 4); d.Allowed || d.RetryAfter != 100*time.Millisecond {
			t.Errorf("a key owing 2 after SetBurst(5): PeekN(4) %+v, want denied, RetryAfter 100ms", d)
		}
		if err := l.SetBurst(10); err != nil {
			t.Fatal(err)
		}
		if tk := l.TokensAt(now, "k"); tk != 8 {
			t.Errorf("after SetBurst(10) again: TokensAt %v, want 8", tk)
		}
	})
}
