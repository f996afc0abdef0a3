package limit_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"golang.org/x/time/rate"
)

// Ports of golang.org/x/time/rate v0.15.0 rate_test.go to limit.Limiter
// for one key. x/time/rate's times t0..t9 are t0 + i*100ms; here each
// call's t is also the fake clock's reading (a t after the clock counts as
// the clock, docs/readings.md), so a45At moves the clock to t first.

const a45D = 100 * time.Millisecond

var a45T0 = time.UnixMilli(1_700_000_000_000)

func a45Ti(i int) time.Time { return a45T0.Add(time.Duration(i) * a45D) }

type a45Env struct {
	clk *limittest.FakeClock
	l   *limit.Limiter
}

func a45New(t *testing.T, r limit.Limit, b int, eng limit.Engine, opts ...limit.Option) *a45Env {
	t.Helper()
	clk := limittest.NewFakeClock()
	clk.SetTime(a45T0)
	o := append([]limit.Option{limit.WithClock(clk), limit.WithSeed(45), limit.WithEngine(eng)}, opts...)
	l, err := limit.New(r, b, o...)
	if err != nil {
		t.Fatal(err)
	}
	return &a45Env{clk: clk, l: l}
}

func (e *a45Env) at(tm time.Time) time.Time {
	if tm.After(e.clk.Now()) {
		e.clk.SetTime(tm)
	}
	return tm
}

func (e *a45Env) allow(t *testing.T, i, n int, want bool) {
	t.Helper()
	if got := e.l.AllowN(e.at(a45Ti(i)), "k", n); got != want {
		t.Errorf("AllowN(t%d, k, %d) = %v, want %v (x/time/rate)", i, n, got, want)
	}
}

// reserve expects OK and time to act tAct (in d's), or !OK when act < 0.
func (e *a45Env) reserve(t *testing.T, i, n, act int) *limit.Reservation {
	t.Helper()
	tm := e.at(a45Ti(i))
	r := e.l.ReserveN(tm, "k", n)
	if act < 0 {
		if r.OK() {
			t.Errorf("ReserveN(t%d, k, %d) OK, want not OK", i, n)
		}
		return r
	}
	if !r.OK() {
		t.Errorf("ReserveN(t%d, k, %d) not OK, want act at t%d", i, n, act)
		return r
	}
	if got, want := r.DelayFrom(tm), a45Ti(act).Sub(tm); got != want {
		t.Errorf("ReserveN(t%d, k, %d).DelayFrom(t%d) = %v, want %v (act at t%d)", i, n, i, got, want, act)
	}
	return r
}

var a45Engines = []limit.Engine{limit.Buckets, limit.CountMin}

func a45Each(t *testing.T, f func(t *testing.T, eng limit.Engine)) {
	for _, eng := range a45Engines {
		t.Run(fmt.Sprint(eng), func(t *testing.T) { f(t, eng) })
	}
}

func TestAudit45XRateLimiterBurst1(t *testing.T) {
	a45Each(t, func(t *testing.T, eng limit.Engine) {
		e := a45New(t, 10, 1, eng)
		e.allow(t, 0, 1, true)
		e.allow(t, 0, 1, false)
		e.allow(t, 0, 1, false)
		e.allow(t, 1, 1, true)
		e.allow(t, 1, 1, false)
		e.allow(t, 1, 1, false)
		e.allow(t, 2, 2, false) // burst size is 1, so n=2 always fails
		e.allow(t, 2, 1, true)
		e.allow(t, 2, 1, false)
	})
}

func TestAudit45XRateLimiterBurst3(t *testing.T) {
	a45Each(t, func(t *testing.T, eng limit.Engine) {
		e := a45New(t, 10, 3, eng)
		e.allow(t, 0, 2, true)
		e.allow(t, 0, 2, false)
		e.allow(t, 0, 1, true)
		e.allow(t, 0, 1, false)
		e.allow(t, 1, 4, false)
		e.allow(t, 2, 1, true)
		e.allow(t, 3, 1, true)
		e.allow(t, 4, 1, true)
		e.allow(t, 4, 1, true)
		e.allow(t, 4, 1, false)
		e.allow(t, 4, 1, false)
		e.allow(t, 9, 3, true)
		// {t9, 0, true}: n = 0 panics here (documented deviation).
		func() {
			defer func() {
				if recover() == nil {
					t.Error("AllowN(n=0) did not panic (docs/readings.md: n <= 0 panics)")
				}
			}()
			e.l.AllowN(a45Ti(9), "k", 0)
		}()
	})
}

// TestAudit45XRateJumpBackwardsDocumented: x/time/rate's
// TestLimiterJumpBackwards expects, after t1,t0,t0 admitted, t1 admitted
// again (its `last` moved back, the interval re-credited). Documented
// here: "a t before a time already used counts as that time ... here time
// never runs backwards". So t1 is a stale-free continuation: the debt of
// t1's three admissions drains 1 token per d.
func TestAudit45XRateJumpBackwardsDocumented(t *testing.T) {
	a45Each(t, func(t *testing.T, eng limit.Engine) {
		e := a45New(t, 10, 3, eng)
		e.allow(t, 1, 1, true)
		e.allow(t, 0, 1, true) // counts as t1
		e.allow(t, 0, 1, true)
		e.allow(t, 0, 1, false)
		e.allow(t, 0, 1, false)
		e.allow(t, 1, 1, false) // x/time/rate: true (re-credits t0..t1)
		e.allow(t, 2, 1, true)
		e.allow(t, 2, 1, false)
	})
}

func TestAudit45XRateSimultaneousRequests(t *testing.T) {
	a45Each(t, func(t *testing.T, eng limit.Engine) {
		for _, procs := range []int{1, 2, 8} {
			e := a45New(t, 1, 5, eng)
			var ok atomic.Int32
			var wg sync.WaitGroup
			start := make(chan struct{})
			for range 15 * procs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					if e.l.Allow("k") {
						ok.Add(1)
					}
				}()
			}
			close(start)
			wg.Wait()
			// Buckets may rarely deny one with room (doc "Exactness"):
			// never above the burst; at most 3 short.
			if n := ok.Load(); n > 5 || (eng == limit.CountMin && n != 5) || n < 2 {
				t.Errorf("procs %d: numOK = %d, want 5", procs, n)
			}
		}
	})
}

func TestAudit45XRateLongRunningQPS(t *testing.T) {
	a45Each(t, func(t *testing.T, eng limit.Engine) {
		e := a45New(t, 100, 100, eng)
		x := rate.NewLimiter(100, 100)
		okL, okX := 0, 0
		end := a45T0.Add(5 * time.Second)
		for now := a45T0; now.Before(end); now = now.Add(2 * time.Millisecond) {
			e.at(now)
			if e.l.AllowN(now, "k", 1) {
				okL++
			}
			if x.AllowN(now, 1) {
				okX++
			}
		}
		// ideal = 100 + 100*4.998 = 599.8; exact bucket: 100 + floor(4998/10)+... = x/time/rate's count.
		if okL != okX {
			t.Errorf("numOK = %d, x/time/rate %d (ideal 599.8)", okL, okX)
		}
	})
}

func TestAudit45XRateSimpleReserve(t *testing.T) {
	a45Each(t, func(t *testing.T, eng limit.Engine) {
		e := a45New(t, 10, 2, eng)
		e.reserve(t, 0, 2, 0)
		e.reserve(t, 0, 2, 2)
		e.reserve(t, 3, 2, 4)
	})
}

func TestAudit45XRateMix(t *testing.T) {
	a45Each(t, func(t *testing.T, eng limit.Engine) {
		e := a45New(t, 10, 2, eng)
		e.reserve(t, 0, 3, -1) // n > burst
		e.reserve(t, 0, 2, 0)
		e.allow(t, 1, 2, false)
		e.reserve(t, 1, 2, 2)
		// {t1, -1, false}: negative n panics here.
		e.allow(t, 3, 1, true)
	})
}

func TestAudit45XRateCancelInvalid(t *testing.T) {
	a45Each(t, func(t *testing.T, eng limit.Engine) {
		e := a45New(t, 10, 2, eng)
		e.reserve(t, 0, 2, 0)
		r := e.reserve(t, 0, 3, -1)
		r.Cancel()
		e.reserve(t, 0, 2, 2)
	})
}

func TestAudit45XRateCancelLast(t *testing.T) {
	a45Each(t, func(t *testing.T, eng limit.Engine) {
		e := a45New(t, 10, 2, eng, limit.WithMaxDebt(8))
		e.reserve(t, 0, 2, 0)
		r := e.reserve(t, 0, 2, 2)
		e.at(a45Ti(1))
		r.Cancel()
		e.reserve(t, 1, 2, 2)
	})
}

// TestAudit45XRateCancelTooLateDocumented: x/time/rate's CancelAt(t3)
// after the reservation's act time t2 gives nothing back, and the next
// reservation of 2 at t3 acts at t4. Here Cancel is documented to undo
// exactly whatever t ("the key reads as if the reservation had never
// been taken, the part drained since included"; docs/readings.md: "No
// CancelAt: the exact undo does not depend on t"), so it acts at t3.
func TestAudit45XRateCancelTooLateDocumented(t *testing.T) {
	a45Each(t, func(t *testing.T, eng limit.Engine) {
		e := a45New(t, 10, 2, eng, limit.WithMaxDebt(8))
		e.reserve(t, 0, 2, 0)
		r := e.reserve(t, 0, 2, 2)
		e.at(a45Ti(3))
		r.Cancel()
		e.reserve(t, 3, 2, 3) // x/time/rate: t4
	})
}

// TestAudit45XRateCancel0TokensDocumented: x/time/rate gives back 0
// tokens (a later reservation used them); here the key's cells were
// written since, so the debit stays too: the same outcome.
func TestAudit45XRateCancel0TokensDocumented(t *testing.T) {
	a45Each(t, func(t *testing.T, eng limit.Engine) {
		e := a45New(t, 10, 2, eng, limit.WithMaxDebt(8))
		e.reserve(t, 0, 2, 0)
		r := e.reserve(t, 0, 1, 1)
		e.reserve(t, 0, 1, 2)
		r.Cancel()
		want := 3 // Buckets: written since, nothing back (as x/time/rate's 0 tokens)
		if eng == limit.CountMin {
			want = 2 // count-min: written since only within the same ms: all back (doc of Cancel)
		}
		e.reserve(t, 0, 1, want)
	})
}

// TestAudit45XRateCancel1TokenDocumented: x/time/rate gives 1 token back
// (t2+... acts at t4); here all or nothing: the cells were written since,
// so nothing is given back and the reservation of 2 at t2 acts at t5.
func TestAudit45XRateCancel1TokenDocumented(t *testing.T) {
	a45Each(t, func(t *testing.T, eng limit.Engine) {
		e := a45New(t, 10, 2, eng, limit.WithMaxDebt(8))
		e.reserve(t, 0, 2, 0)
		r := e.reserve(t, 0, 2, 2)
		e.reserve(t, 0, 1, 3)
		e.at(a45Ti(2))
		r.Cancel()
		want := 5 // Buckets: written since, nothing back
		if eng == limit.CountMin {
			want = 3 // count-min: written since within the same ms, all back (doc of Cancel)
		}
		e.reserve(t, 2, 2, want) // x/time/rate: t4
	})
}

func TestAudit45XRateReserveJumpBackDocumented(t *testing.T) {
	a45Each(t, func(t *testing.T, eng limit.Engine) {
		e := a45New(t, 10, 2, eng, limit.WithMaxDebt(8))
		e.reserve(t, 1, 2, 1) // start at t1
		e.reserve(t, 0, 1, 2) // stale t0 decided at t1: debt 3, acts at t2 (x/time/rate: t1)
		e.reserve(t, 2, 2, 4) // debt at t2: 2, +2 = 4, acts t4 (x/time/rate: t3)
		e.reserve(t, 0, 3, -1)
	})
}

// TestAudit45XRateSetLimitDocumented: x/time/rate's TestReserveSetLimit
// (5/s b2; reserve 2 at t0, 2 at t0 acting t4; SetLimitAt(t2, 10);
// reserve 1 at t2 acts at t4). Here the debt is kept as time: at t2 the
// key owes 1 s - 0.2 s = 0.8 s... of 5/s tokens: debt 4 - 1 = 3 tokens of
// 5/s = 600 ms; at 10/s that is 6 tokens, above the new burst 2 by 4,
// i.e. 400 ms; +1 token (100 ms): acts at t2 + 500 ms = t7.
func TestAudit45XRateSetLimitDocumented(t *testing.T) {
	a45Each(t, func(t *testing.T, eng limit.Engine) {
		e := a45New(t, 5, 2, eng, limit.WithMaxDebt(8))
		e.reserve(t, 0, 2, 0)
		e.reserve(t, 0, 2, 4)
		e.at(a45Ti(2))
		if err := e.l.SetLimit(10); err != nil {
			t.Fatal(err)
		}
		e.reserve(t, 2, 1, 7) // x/time/rate: t4
	})
}

func TestAudit45XRateSetBurst(t *testing.T) {
	a45Each(t, func(t *testing.T, eng limit.Engine) {
		e := a45New(t, 5, 2, eng, limit.WithMaxDebt(8))
		e.reserve(t, 0, 2, 0)
		e.reserve(t, 0, 2, 4)
		e.at(a45Ti(3))
		if err := e.l.SetBurst(4); err != nil {
			t.Fatal(err)
		}
		// x/time/rate: SetBurstAt(t3, 4) then ReserveN(t0 (stale), 4) acts at t9.
		// Here the stale t0 counts as t3: debt 4 - 1.5 = 2.5, +4 = 6.5, acts when <= 4: 500 ms: t8.
		r := e.l.ReserveN(a45Ti(0), "k", 4)
		if !r.OK() || r.DelayFrom(a45Ti(3)) != 500*time.Millisecond {
			t.Errorf("after SetBurst(4): ReserveN(stale t0, 4): ok %v delay from t3 %v, want true 500ms", r.OK(), r.DelayFrom(a45Ti(3)))
		}
	})
}

func TestAudit45XRateZeroAndInf(t *testing.T) {
	if limit.Every(0) != limit.Inf || limit.Every(-time.Second) != limit.Inf {
		t.Errorf("Every(0) = %v, Every(-1s) = %v, want Inf", limit.Every(0), limit.Every(-time.Second))
	}
	if float64(limit.Inf) != float64(rate.Inf) || limit.InfDuration != rate.InfDuration {
		t.Errorf("Inf %v/%v InfDuration %v/%v", limit.Inf, rate.Inf, limit.InfDuration, rate.InfDuration)
	}
	for _, d := range []time.Duration{time.Millisecond, 7 * time.Millisecond, 3 * time.Second, 333 * time.Microsecond} {
		if float64(limit.Every(d)) != float64(rate.Every(d)) {
			t.Errorf("Every(%v) = %v, x/time/rate %v", d, limit.Every(d), rate.Every(d))
		}
	}
	// Documented: zero limit and burst 0 are errors.
	if _, err := limit.New(0, 1); err == nil {
		t.Error("New(0, 1): no error (docs/readings.md: r <= 0 is an error)")
	}
	if _, err := limit.New(10, 0); err == nil {
		t.Error("New(10, 0): no error (docs/readings.md: b < 1 is an error)")
	}
	// x/time/rate's TestWaitInf builds NewLimiter(Inf, 0); here b < 1 is an
	// error whatever the limit (docs/readings.md NewLimiter row).
	if _, err := limit.New(limit.Inf, 0); err == nil {
		t.Error("New(Inf, 0): no error")
	}
	// Inf: every request admitted, n > burst included (x/time/rate: TestWaitInf, Inf ignores burst).
	clk := limittest.NewFakeClock()
	clk.SetTime(a45T0)
	l, err := limit.New(limit.Inf, 1, limit.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	x := rate.NewLimiter(rate.Inf, 1)
	now := clk.Now()
	if got, want := l.AllowN(now, "k", 3), x.AllowN(now, 3); got != want {
		t.Errorf("Inf: AllowN(n=3 > burst 1) = %v, x/time/rate %v", got, want)
	}
	r, xr := l.ReserveN(now, "k", 3), x.ReserveN(now, 3)
	if r.OK() != xr.OK() || r.DelayFrom(now) != xr.DelayFrom(now) {
		t.Errorf("Inf: ReserveN(n=3) ok %v delay %v, x/time/rate ok %v delay %v", r.OK(), r.DelayFrom(now), xr.OK(), xr.DelayFrom(now))
	}
	if err := l.WaitN(context.Background(), "k", 3); err != nil {
		t.Errorf("Inf: WaitN(n=3 > burst) = %v, x/time/rate nil (TestWaitInf)", err)
	}
	if got := l.TokensAt(now, "k"); got != x.TokensAt(now) {
		t.Logf("Inf: TokensAt = %v, x/time/rate %v", got, x.TokensAt(now))
	}
}

// TestAudit45XRateReserveAboveBurst: n > burst: Reservation not OK,
// Delay InfDuration, Cancel a no-op, nothing debited (x/time/rate).
func TestAudit45XRateReserveAboveBurst(t *testing.T) {
	a45Each(t, func(t *testing.T, eng limit.Engine) {
		e := a45New(t, 10, 3, eng)
		x := rate.NewLimiter(10, 3)
		now := e.clk.Now()
		r, xr := e.l.ReserveN(now, "k", 4), x.ReserveN(now, 4)
		if r.OK() != xr.OK() || r.Delay() != xr.DelayFrom(now) || r.DelayFrom(now) != xr.DelayFrom(now) {
			t.Errorf("ReserveN(4 > 3): ok %v delay %v, x/time/rate ok %v delay %v", r.OK(), r.Delay(), xr.OK(), xr.DelayFrom(now))
		}
		r.Cancel()
		if tk := e.l.TokensAt(now, "k"); tk != 3 {
			t.Errorf("tokens after refused reservation %v, want 3", tk)
		}
		if e.l.AllowN(now, "k", 4) {
			t.Error("AllowN(4 > burst 3) admitted")
		}
	})
}

func a45WaitAsync(e *a45Env, ctx context.Context, n int) chan error {
	ch := make(chan error, 1)
	go func() { ch <- e.l.WaitN(ctx, "k", n) }()
	return ch
}

func TestAudit45XRateWait(t *testing.T) {
	a45Each(t, func(t *testing.T, eng limit.Engine) {
		e := a45New(t, 10, 3, eng)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := e.l.WaitN(ctx, "k", 1); !errors.Is(err, context.Canceled) {
			t.Errorf("already-cancelled: %v", err)
		}
		if tk := e.l.Tokens("k"); tk != 3 {
			t.Errorf("already-cancelled debited: tokens %v", tk)
		}
		if err := e.l.WaitN(context.Background(), "k", 4); !errors.Is(err, limit.ErrAboveBurst) {
			t.Errorf("exceed-burst: %v", err)
		}
		if err := e.l.WaitN(context.Background(), "k", 2); err != nil {
			t.Errorf("act-now: %v", err)
		}
		ch := a45WaitAsync(e, context.Background(), 3)
		e.clk.BlockUntilTimers(1)
		e.clk.Advance(199 * time.Millisecond)
		select {
		case err := <-ch:
			t.Fatalf("act-later returned %v after 199ms, want 200ms", err)
		case <-time.After(20 * time.Millisecond):
		}
		e.clk.Advance(time.Millisecond)
		if err := <-ch; err != nil {
			t.Errorf("act-later: %v", err)
		}
	})
}

func TestAudit45XRateWaitCancel(t *testing.T) {
	a45Each(t, func(t *testing.T, eng limit.Engine) {
		e := a45New(t, 10, 3, eng)
		ctx, cancel := context.WithCancel(context.Background())
		if err := e.l.WaitN(ctx, "k", 2); err != nil {
			t.Fatal(err)
		}
		ch := a45WaitAsync(e, ctx, 3)
		e.clk.BlockUntilTimers(1)
		e.clk.Advance(a45D)
		cancel()
		if err := <-ch; !errors.Is(err, context.Canceled) {
			t.Errorf("will-cancel: %v", err)
		}
		// x/time/rate: 3 tokens back, tokens = 2 at t1: act-now with 2.
		if tk := e.l.Tokens("k"); tk != 2 {
			t.Errorf("tokens after cancelled wait %v, want 2 (x/time/rate)", tk)
		}
		if err := e.l.WaitN(ctx, "k", 0+1); !errors.Is(err, context.Canceled) {
			t.Errorf("%v", err)
		}
	})
}

func TestAudit45XRateWaitTimeout(t *testing.T) {
	a45Each(t, func(t *testing.T, eng limit.Engine) {
		e := a45New(t, 10, 3, eng)
		e.clk.SetTime(time.Now().Add(time.Hour).Truncate(time.Millisecond))
		ctx, cancel := context.WithDeadline(context.Background(), e.clk.Now().Add(a45D))
		defer cancel()
		if err := e.l.WaitN(ctx, "k", 2); err != nil {
			t.Fatal(err)
		}
		err := e.l.WaitN(ctx, "k", 3)
		if !errors.Is(err, limit.ErrPastDeadline) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("w-timeout-err: %v", err)
		}
		if tk := e.l.Tokens("k"); tk != 1 {
			t.Errorf("deadline refusal debited: tokens %v, want 1", tk)
		}
		// TestReserveMax analogue: a wait ending exactly at the deadline is in time.
		ch := a45WaitAsync(e, ctx, 2)
		e.clk.BlockUntilTimers(1)
		e.clk.Advance(a45D)
		if err := <-ch; err != nil {
			t.Errorf("wait ending at the deadline: %v", err)
		}
	})
}

func TestAudit45XRateTokensAt(t *testing.T) {
	a45Each(t, func(t *testing.T, eng limit.Engine) {
		e := a45New(t, 10, 2, eng, limit.WithMaxDebt(6))
		x := rate.NewLimiter(10, 2)
		steps := []struct {
			adv time.Duration
			n   int
		}{{0, 2}, {0, 2}, {0, 1}, {35 * time.Millisecond, 0}, {165 * time.Millisecond, 1}, {time.Second, 0}}
		for i, s := range steps {
			e.clk.Advance(s.adv)
			now := e.clk.Now()
			if s.n > 0 {
				r, xr := e.l.ReserveN(now, "k", s.n), x.ReserveN(now, s.n)
				if r.OK() != xr.OK() || r.DelayFrom(now) != xr.DelayFrom(now) {
					t.Errorf("step %d: ReserveN ok %v delay %v, x/time/rate %v %v", i, r.OK(), r.DelayFrom(now), xr.OK(), xr.DelayFrom(now))
				}
			}
			if got, want := e.l.TokensAt(now, "k"), x.TokensAt(now); abs45(got-want) > 1e-9 {
				t.Errorf("step %d: TokensAt = %v, x/time/rate %v", i, got, want)
			}
		}
	})
}

func abs45(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// TestAudit45XRateCancelAtMaxDebtDocumented: x/time/rate's TestCancelLast
// with the default MaxDebt (2 x burst): the second reservation fills the
// key to MaxDebt, and "A reservation that filled the key to MaxDebt is
// never given back (either engine)" (Reservation.Cancel), so at t1 the
// key owes 3 and a reservation of 2 is past MaxDebt (x/time/rate: OK, t2).
func TestAudit45XRateCancelAtMaxDebtDocumented(t *testing.T) {
	a45Each(t, func(t *testing.T, eng limit.Engine) {
		e := a45New(t, 10, 2, eng)
		e.reserve(t, 0, 2, 0)
		r := e.reserve(t, 0, 2, 2)
		e.at(a45Ti(1))
		r.Cancel()
		e.reserve(t, 1, 2, -1)
		e.reserve(t, 1, 1, 3) // owes 3 + 1: acts when back at 2, 200 ms later
	})
}
