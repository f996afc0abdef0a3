package limit_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"golang.org/x/time/rate"
)

// a89rsPeer builds limit.New(10, 20) on engine e and x/time/rate's
// NewLimiter(10, 20), both at t0 on the limiter's fake clock.
func a89rsPeer(t *testing.T, e limit.Engine) (*limit.Limiter, *rate.Limiter, *limittest.FakeClock, time.Time) {
	t.Helper()
	clk := limittest.NewFakeClock()
	clk.Set(80_000_000)
	l, err := limit.New(10, 20, limit.WithClock(clk), limit.WithSeed(3), limit.WithEngine(e))
	if err != nil {
		t.Fatal(err)
	}
	return l, rate.NewLimiter(10, 20), clk, clk.Now()
}

// TestAudit89ReservePeerXRate: Reserve, Cancel and WaitN's early returns
// against golang.org/x/time/rate where limit's documentation says they
// match (docs/readings.md's parity table; reserve.go), and the
// documented differences where it says they differ, on both engines:
//   - n > burst: not OK, DelayFrom InfDuration, Cancel does nothing (as
//     x/time/rate);
//   - queued reservations: the same delays; beyond MaxDebt (2 x burst) not
//     OK, where x/time/rate queues without bound;
//   - Cancel before the act time of the last reservation: the tokens back
//     (x/time/rate's CancelAt restores what no later reservation used);
//     after the act time: back here, nothing in x/time/rate;
//   - WaitN on a done context: ctx.Err() with nothing taken; n > burst
//     fails first, on both;
//   - SetLimit keeps a key's debt as time, x/time/rate its tokens.
func TestAudit89ReservePeerXRate(t *testing.T) {
	for _, e := range []limit.Engine{limit.Buckets, limit.CountMin} {
		t.Run(e.String(), func(t *testing.T) {
			ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
			var clk *limittest.FakeClock
			// a t ahead of the clock counts as its reading: move it first
			same := func(what string, l *limit.Limiter, x *rate.Limiter, at time.Time) {
				t.Helper()
				clk.SetTime(at)
				// TokensAt is a float64 reading of each side's exact state
				if got, want := l.TokensAt(at, "k"), x.TokensAt(at); math.Abs(got-want) > 1e-9 {
					t.Errorf("%s: tokens %v, x/time/rate %v", what, got, want)
				}
			}

			// n > burst, then a queue.
			l, x, clk, t0 := a89rsPeer(t, e)
			rl, rx := l.ReserveN(t0, "k", 21), x.ReserveN(t0, 21)
			if rl.OK() || rx.OK() || rl.DelayFrom(t0) != limit.InfDuration || rx.DelayFrom(t0) != rate.InfDuration {
				t.Errorf("ReserveN(21): OK %v/%v DelayFrom %v/%v", rl.OK(), rx.OK(), rl.DelayFrom(t0), rx.DelayFrom(t0))
			}
			rl.Cancel()
			rx.CancelAt(t0)
			same("after n > burst", l, x, t0)
			for i, n := range []int{20, 5, 7, 1} {
				clk.SetTime(t0.Add(ms(i)))
				rl, rx := l.ReserveN(t0.Add(ms(i)), "k", n), x.ReserveN(t0.Add(ms(i)), n)
				if !rl.OK() || !rx.OK() || rl.DelayFrom(t0) != rx.DelayFrom(t0) {
					t.Errorf("queued ReserveN(%d): OK %v/%v DelayFrom(t0) %v, x/time/rate %v", n, rl.OK(), rx.OK(), rl.DelayFrom(t0), rx.DelayFrom(t0))
				}
			}
			same("after the queue", l, x, t0.Add(ms(3)))
			// debt 33 - 0.03: 8 more would pass MaxDebt 40; x/time/rate takes them
			if rl, rx := l.ReserveN(t0.Add(ms(3)), "k", 8), x.ReserveN(t0.Add(ms(3)), 8); rl.OK() || !rx.OK() {
				t.Errorf("ReserveN past MaxDebt: OK %v, x/time/rate %v (want false, true: the documented queue bound)", rl.OK(), rx.OK())
			}

			// Cancel of the last reservation before its act time: the same.
			l, x, clk, t0 = a89rsPeer(t, e)
			l.ReserveN(t0, "k", 20)
			x.ReserveN(t0, 20)
			rl, rx = l.ReserveN(t0, "k", 5), x.ReserveN(t0, 5)
			if rl.DelayFrom(t0) != ms(500) || rx.DelayFrom(t0) != ms(500) {
				t.Fatalf("Delay %v, x/time/rate %v, want 500ms", rl.DelayFrom(t0), rx.DelayFrom(t0))
			}
			at := t0.Add(ms(120))
			clk.SetTime(at)
			l.TokensAt(at, "k") // the limiter's time: Cancel takes none
			rl.Cancel()
			rx.CancelAt(at)
			same("Cancel before the act time", l, x, at)
			same("then", l, x, at.Add(ms(1000)))

			// After the act time: back here, not in x/time/rate.
			l, x, clk, t0 = a89rsPeer(t, e)
			l.ReserveN(t0, "k", 20)
			x.ReserveN(t0, 20)
			rl, rx = l.ReserveN(t0, "k", 5), x.ReserveN(t0, 5)
			at = t0.Add(ms(600))
			clk.SetTime(at)
			l.TokensAt(at, "k")
			rl.Cancel()
			rx.CancelAt(at)
			if got, want := l.TokensAt(at, "k"), x.TokensAt(at)+5; got != want || x.TokensAt(at) != 1 {
				t.Errorf("Cancel after the act time: tokens %v (want %v: all back), x/time/rate %v (want 1: nothing back)", got, want, x.TokensAt(at))
			}

			// WaitN on a done context; n > burst first.
			l, x, clk, t0 = a89rsPeer(t, e)
			done, cancel := context.WithCancel(context.Background())
			cancel()
			el, ex := l.WaitN(done, "k", 21), x.WaitN(done, 21)
			if !errors.Is(el, limit.ErrAboveBurst) || ex == nil || !strings.Contains(ex.Error(), "exceeds limiter's burst") {
				t.Errorf("WaitN(done, 21) = %v, x/time/rate %v: want the burst error on both", el, ex)
			}
			el, ex = l.WaitN(done, "k", 1), x.WaitN(done, 1)
			if !errors.Is(el, context.Canceled) || !errors.Is(ex, context.Canceled) {
				t.Errorf("WaitN(done, 1) = %v, x/time/rate %v: want context.Canceled on both", el, ex)
			}
			if got := l.TokensAt(t0, "k"); got != 20 || x.Tokens() != 20 {
				t.Errorf("WaitN on a done context took tokens: %v, x/time/rate %v", got, x.Tokens())
			}

			// SetLimit: debt as time here, tokens in x/time/rate.
			l, x, clk, t0 = a89rsPeer(t, e)
			l.AllowN(t0, "k", 20)
			x.AllowN(t0, 20)
			if err := l.SetLimit(5); err != nil {
				t.Fatal(err)
			}
			x.SetLimitAt(t0, 5)
			at = t0.Add(2 * time.Second)
			clk.SetTime(at)
			if got, want := l.TokensAt(at, "k"), x.TokensAt(at); got != 20 || want != 10 {
				t.Errorf("2 s after SetLimit(5) on an empty bucket: tokens %v (want 20: the debt of 2 s drained), x/time/rate %v (want 10)", got, want)
			}
		})
	}
}
