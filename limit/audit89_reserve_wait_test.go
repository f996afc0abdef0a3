package limit_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// a89rsWaitLim builds New(10, 20) on engine e on a fake clock that reads an
// hour past the real time, so that a context deadline set on the fake
// clock is still ahead of the real one (the context does not end by
// itself during the test).
func a89rsWaitLim(t *testing.T, e limit.Engine, opts ...limit.Option) (*limit.Limiter, *limittest.FakeClock) {
	t.Helper()
	clk := limittest.NewFakeClock()
	clk.SetTime(time.Now().Add(time.Hour).Truncate(time.Millisecond))
	l, err := limit.New(10, 20, append([]limit.Option{limit.WithClock(clk), limit.WithSeed(5), limit.WithEngine(e)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return l, clk
}

// a89rsPanics returns the panic value of f, as a string ("" when none).
func a89rsPanics(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	f()
	return ""
}

// TestAudit89WaitNonPositiveNPanics: "n <= 0 panics ("limit: AllowN: n
// must be > 0; got 0")" (doc.go), WaitN "panics if n <= 0" and ReserveN
// "panics if n <= 0" (reserve.go): on both engines, on a Tier, on an Inf
// limiter (which admits any n > 0, and keeps no state), and before the
// context is looked at (a done context does not turn the panic into
// ctx.Err()); nothing is debited or counted.
func TestAudit89WaitNonPositiveNPanics(t *testing.T) {
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for _, e := range []limit.Engine{limit.Buckets, limit.CountMin} {
		l, clk := a89rsWaitLim(t, e)
		tr, err := l.Tier("half", 5, 10)
		if err != nil {
			t.Fatal(err)
		}
		inf := limit.MustNew(limit.Inf, 3, limit.WithClock(clk))
		type waiter interface {
			WaitN(context.Context, string, int) error
			ReserveN(time.Time, string, int) *limit.Reservation
		}
		for name, w := range map[string]waiter{"limiter": l, "tier": tr, "inf": inf} {
			for _, n := range []int{0, -1} {
				for _, ctx := range []context.Context{context.Background(), done} {
					want := fmt.Sprintf("limit: WaitN: n must be > 0; got %d", n)
					if got := a89rsPanics(func() { _ = w.WaitN(ctx, "k", n) }); got != want {
						t.Errorf("%v %s: WaitN(n=%d) panic %q, want %q", e, name, n, got, want)
					}
				}
				want := fmt.Sprintf("limit: ReserveN: n must be > 0; got %d", n)
				if got := a89rsPanics(func() { w.ReserveN(clk.Now(), "k", n) }); got != want {
					t.Errorf("%v %s: ReserveN(n=%d) panic %q, want %q", e, name, n, got, want)
				}
			}
		}
		if st := l.Stats(); st.Admitted != 0 || st.Denied != 0 {
			t.Errorf("%v: panicking calls counted: %+v", e, st)
		}
		if tok := l.Tokens("k"); tok != 20 {
			t.Errorf("%v: panicking calls debited: tokens %v", e, tok)
		}
		// Inf admits any positive n through every form, above its burst too.
		if err := inf.WaitN(context.Background(), "k", 1000); err != nil {
			t.Errorf("Inf WaitN(1000) = %v", err)
		}
		if r := inf.ReserveN(clk.Now(), "k", 1000); !r.OK() || r.Delay() != 0 {
			t.Errorf("Inf ReserveN(1000): OK %v Delay %v", r.OK(), r.Delay())
		}
	}
}

// TestAudit89WaitErrorsDebitNothing: WaitN's errors (reserve.go, WaitN
// and WaitError; Stats' counting rules, stats.go) on both engines and on
// a Tier (whose WaitError carries its own burst):
//   - n above the burst: ErrAboveBurst even on a done context (as
//     x/time/rate, which checks n first), counted Denied;
//   - a context already done: ctx.Err(), not a *WaitError, not counted;
//   - a deadline already past on the limiter's clock: ErrPastDeadline
//     (also context.DeadlineExceeded) with Wait the (negative) time left,
//     not counted;
//   - a deadline 1 ms short of the wait: ErrPastDeadline with Wait the
//     time left, counted Denied; at the wait itself, the wait succeeds;
//   - a key queued to MaxDebt: ErrMaxDebt without a deadline or with a
//     long one, ErrPastDeadline with a short one; counted Denied;
//   - a deadline exactly at the clock's reading, room for n: nil at once,
//     debited (as x/time/rate, whose wait limit is then 0).
//
// Every error leaves the key's tokens as they were.
func TestAudit89WaitErrorsDebitNothing(t *testing.T) {
	for _, e := range []limit.Engine{limit.Buckets, limit.CountMin} {
		for _, useTier := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/tier=%v", e, useTier), func(t *testing.T) {
				l, clk := a89rsWaitLim(t, e)
				type pol interface {
					WaitN(context.Context, string, int) error
					AllowN(time.Time, string, int) bool
					TokensAt(time.Time, string) float64
					Burst() int
				}
				var p pol = l
				msPerToken := 100 * time.Millisecond
				if useTier {
					tr, err := l.Tier("slow", 5, 10) // 200 ms a token, 10 of them: MaxDebt 40 of New's = 20 of its
					if err != nil {
						t.Fatal(err)
					}
					p, msPerToken = tr, 200*time.Millisecond
				}
				b := p.Burst()
				stats := l.Stats()
				counted := func(what string, adm, den uint64) {
					t.Helper()
					st := l.Stats()
					if st.Admitted-stats.Admitted != adm || st.Denied-stats.Denied != den {
						t.Errorf("%s: counted admitted +%d denied +%d, want +%d +%d", what, st.Admitted-stats.Admitted, st.Denied-stats.Denied, adm, den)
					}
					stats = st
				}
				tokens := func() float64 { return p.TokensAt(clk.Now(), "k") }
				check := func(what string, err, want error, n int, wait time.Duration, before float64) {
					t.Helper()
					if !errors.Is(err, want) {
						t.Fatalf("%s: %v, want %v", what, err, want)
					}
					var we *limit.WaitError
					if errors.As(err, &we) {
						if we.N != n || we.Burst != b || we.Wait != wait {
							t.Errorf("%s: %+v, want N %d Burst %d Wait %v", what, *we, n, b, wait)
						}
						if want == limit.ErrPastDeadline && !errors.Is(err, context.DeadlineExceeded) {
							t.Errorf("%s: ErrPastDeadline does not match context.DeadlineExceeded", what)
						}
						if !strings.Contains(err.Error(), fmt.Sprintf("n=%d", n)) {
							t.Errorf("%s: message %q does not name n=%d", what, err, n)
						}
					} else if want != context.Canceled {
						t.Errorf("%s: %T is not a *WaitError", what, err)
					}
					if got := tokens(); got != before {
						t.Errorf("%s: tokens %v -> %v, want nothing debited", what, before, got)
					}
				}
				done, cancel := context.WithCancel(context.Background())
				cancel()
				before := tokens()
				check("above the burst on a done context", p.WaitN(done, "k", b+1), limit.ErrAboveBurst, b+1, 0, before)
				counted("above the burst", 0, 1)
				check("a done context", p.WaitN(done, "k", 1), context.Canceled, 1, 0, before)
				counted("a done context", 0, 0)

				past, cancelPast := context.WithDeadline(context.Background(), clk.Now().Add(-time.Millisecond))
				defer cancelPast()
				if past.Err() != nil {
					t.Fatal("the context ended by itself: the fake clock is not ahead of the real one")
				}
				check("a deadline already past", p.WaitN(past, "k", 1), limit.ErrPastDeadline, 1, -time.Millisecond, before)
				counted("a deadline already past", 0, 0)

				// Spend the burst: a request of 3 then waits 3 tokens' drain.
				if !p.AllowN(clk.Now(), "k", b) {
					t.Fatal("the burst was not admitted from an empty key")
				}
				counted("the burst", 1, 0)
				need := 3 * msPerToken
				short, cancelShort := context.WithDeadline(context.Background(), clk.Now().Add(need-time.Millisecond))
				defer cancelShort()
				before = tokens()
				check("a deadline 1 ms short", p.WaitN(short, "k", 3), limit.ErrPastDeadline, 3, need-time.Millisecond, before)
				counted("a deadline 1 ms short", 0, 1)

				// Queue to MaxDebt (New's 40 tokens: 20 of the limiter's past
				// its burst, 10 of the tier's): a reservation of one more is
				// refused, by MaxDebt without a deadline or with a long one,
				// by the deadline with a short one.
				room := int(l.MaxDebt()) - 20
				if useTier {
					room /= 2
				}
				if r := p.(interface {
					ReserveN(time.Time, string, int) *limit.Reservation
				}).ReserveN(clk.Now(), "k", room); !r.OK() {
					t.Fatalf("ReserveN(%d) up to MaxDebt not OK", room)
				}
				counted("the queue", 1, 0)
				before = tokens()
				check("a full queue, no deadline", p.WaitN(context.Background(), "k", 1), limit.ErrMaxDebt, 1, 0, before)
				counted("a full queue", 0, 1)
				long, cancelLong := context.WithDeadline(context.Background(), clk.Now().Add(time.Minute))
				defer cancelLong()
				check("a full queue, a long deadline", p.WaitN(long, "k", 1), limit.ErrMaxDebt, 1, time.Minute, before)
				counted("a full queue, a long deadline", 0, 1)
				check("a full queue, a short deadline", p.WaitN(short, "k", 1), limit.ErrPastDeadline, 1, need-time.Millisecond, before)
				counted("a full queue, a short deadline", 0, 1)

				// Once the queue drained: a deadline exactly now admits a
				// request that fits at once.
				clk.Advance(time.Duration(l.MaxDebt()) * 100 * time.Millisecond)
				now, cancelNow := context.WithDeadline(context.Background(), clk.Now())
				defer cancelNow()
				if err := p.WaitN(now, "k", b); err != nil {
					t.Fatalf("WaitN(burst) on an empty key with its deadline now: %v", err)
				}
				counted("a deadline now", 1, 0)
				if got := tokens(); got != 0 {
					t.Errorf("after WaitN(burst) with its deadline now: tokens %v, want 0", got)
				}
			})
		}
	}
}

// TestAudit89SetLimitBurstBoundsReserveAndWait: SetBurst "changes the
// limiter's burst for every later decision of its own methods", so
// ReserveN and WaitN judge n against the new burst ("A reservation for
// n > burst ... is not OK and debits nothing"; WaitN's ErrAboveBurst,
// whose WaitError carries "the limiter's burst"), and a Tier keeps its
// own; SetLimit keeps the burst's count and every key's debt as time
// (ResetAfter), and a reservation taken before it keeps its time to act.
// Both engines.
func TestAudit89SetLimitBurstBoundsReserveAndWait(t *testing.T) {
	for _, e := range []limit.Engine{limit.Buckets, limit.CountMin} {
		l, clk := a89rsWaitLim(t, e, limit.WithMaxDebt(45)) // room past two bursts: a reservation that fills MaxDebt is never given back
		tr, err := l.Tier("t", 10, 20)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.SetBurst(8); err != nil {
			t.Fatal(err)
		}
		before := l.Tokens("k")
		if r := l.ReserveN(clk.Now(), "k", 9); r.OK() || r.Delay() != limit.InfDuration {
			t.Errorf("%v: ReserveN(9) after SetBurst(8): OK %v Delay %v", e, r.OK(), r.Delay())
		}
		var we *limit.WaitError
		if err := l.WaitN(context.Background(), "k", 9); !errors.As(err, &we) || we.Err != limit.ErrAboveBurst || we.Burst != 8 || we.N != 9 {
			t.Errorf("%v: WaitN(9) after SetBurst(8) = %v, want ErrAboveBurst with Burst 8", e, err)
		}
		if got := l.Tokens("k"); got != before {
			t.Errorf("%v: refused requests debited: %v -> %v", e, before, got)
		}
		// The Tier keeps its burst of 20.
		r := tr.ReserveN(clk.Now(), "k", 20)
		if !r.OK() || r.Delay() != 0 {
			t.Fatalf("%v: Tier ReserveN(20): OK %v Delay %v", e, r.OK(), r.Delay())
		}
		// The limiter's burst of 8 (800 ms) now waits 1200 ms of the
		// tier's 2000 ms; a second tier reservation queues 2 s more.
		if d := l.PeekN(clk.Now(), "k", 1).RetryAfter; d != 1300*time.Millisecond {
			t.Errorf("%v: after the tier's 20, the limiter's RetryAfter %v, want 1.3s", e, d)
		}
		q := tr.ReserveN(clk.Now(), "k", 20)
		if !q.OK() || q.Delay() != 2*time.Second {
			t.Fatalf("%v: queued Tier ReserveN(20): OK %v Delay %v, want 2s", e, q.OK(), q.Delay())
		}
		reset := l.PeekN(clk.Now(), "k", 9).ResetAfter
		if err := l.SetLimit(2.5); err != nil { // burst 8 at 400 ms = 3.2 s <= MaxDebt 4.5 s
			t.Fatal(err)
		}
		if got := l.PeekN(clk.Now(), "k", 9).ResetAfter; got != reset || reset != 4*time.Second {
			t.Errorf("%v: SetLimit moved ResetAfter %v -> %v (want 4s kept)", e, reset, got)
		}
		if q.Delay() != 2*time.Second {
			t.Errorf("%v: SetLimit moved a reservation's Delay to %v", e, q.Delay())
		}
		// At 2.5/s the burst of 8 is 3.2 s: one token (400 ms) fits once
		// the 4 s of debt drained to 2.8 s, after 1.2 s.
		if d := l.PeekN(clk.Now(), "k", 1).RetryAfter; d != 1200*time.Millisecond {
			t.Errorf("%v: at 2.5/s the RetryAfter of one token %v, want 1.2s", e, d)
		}
		clk.Advance(time.Second)
		q.Cancel() // nothing wrote the key since: all of it back
		if got := tr.PeekN(clk.Now(), "k", 21).ResetAfter; got != time.Second {
			t.Errorf("%v: after Cancel of the queued reservation, ResetAfter %v, want 1s", e, got)
		}
		q.Cancel() // the second call does nothing
		if got := tr.PeekN(clk.Now(), "k", 21).ResetAfter; got != time.Second {
			t.Errorf("%v: a second Cancel changed ResetAfter to %v, want 1s", e, got)
		}
		// r's cells were written since (by q, whose Cancel put r's word
		// back): all of r or nothing of it comes back, never more.
		r.Cancel()
		if got := tr.PeekN(clk.Now(), "k", 21).ResetAfter; got != time.Second && got != 0 {
			t.Errorf("%v: Cancel of the first reservation left ResetAfter %v, want 1s (kept) or 0 (given back)", e, got)
		}
	}
}

// TestAudit89ReserveZeroReservation: "The zero Reservation is not OK"
// and "A Reservation that is not OK has Delay InfDuration and Cancel does
// nothing" (reserve.go): DelayFrom too ("InfDuration if the reservation
// is not OK"), and Cancel twice does not panic.
func TestAudit89ReserveZeroReservation(t *testing.T) {
	var r limit.Reservation
	if r.OK() || r.Delay() != limit.InfDuration || r.DelayFrom(time.Unix(0, 0)) != limit.InfDuration {
		t.Errorf("zero Reservation: OK %v Delay %v DelayFrom %v", r.OK(), r.Delay(), r.DelayFrom(time.Unix(0, 0)))
	}
	if msg := a89rsPanics(func() { r.Cancel(); r.Cancel() }); msg != "" {
		t.Errorf("zero Reservation's Cancel panicked: %s", msg)
	}
}

// TestAudit89WaitDeadlineBeforeLimiterTime: after the clock stepped back
// behind the time the limiter already decided at, a WaitN whose deadline
// is ahead of the clock's reading but before that time cannot act in
// time ("Even a request that fits acts at hw, after the deadline"): it
// returns ErrPastDeadline, with Wait the (positive) time left on the
// clock, having debited nothing; with a deadline past that time it
// waits from the reading (the lag included) and succeeds. Both engines.
func TestAudit89WaitDeadlineBeforeLimiterTime(t *testing.T) {
	for _, e := range []limit.Engine{limit.Buckets, limit.CountMin} {
		l, clk := a89rsWaitLim(t, e)
		l.AllowN(clk.Now(), "other", 1) // the limiter's time: the reading
		clk.Advance(-100 * time.Millisecond)
		ctx, cancel := context.WithDeadline(context.Background(), clk.Now().Add(50*time.Millisecond))
		err := l.WaitN(ctx, "k", 1)
		cancel()
		var we *limit.WaitError
		if !errors.As(err, &we) || we.Err != limit.ErrPastDeadline || we.Wait != 50*time.Millisecond {
			t.Errorf("%v: WaitN with a deadline before the limiter's time = %v, want ErrPastDeadline with Wait 50ms", e, err)
		}
		if tok := l.Tokens("k"); tok != 20 {
			t.Errorf("%v: the refused WaitN debited: tokens %v", e, tok)
		}
		ctx, cancel = context.WithDeadline(context.Background(), clk.Now().Add(100*time.Millisecond))
		errc := make(chan error, 1)
		go func() { errc <- l.WaitN(ctx, "k", 20) }()
		if err, early := a89rsTimerOrResult(clk, errc); early {
			t.Fatalf("%v: WaitN returned %v without waiting out the lag", e, err)
		}
		clk.Advance(99 * time.Millisecond)
		select {
		case err := <-errc:
			t.Errorf("%v: WaitN returned %v 1 ms before the limiter's time", e, err)
		default:
		}
		clk.Advance(time.Millisecond)
		if err := <-errc; err != nil {
			t.Errorf("%v: WaitN with its deadline at the limiter's time = %v", e, err)
		}
		cancel()
	}
}
