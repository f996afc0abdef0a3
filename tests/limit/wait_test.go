package limit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
	"go.uber.org/goleak"
)

// newWaiter returns a limiter on a limittest.FakeClock set to the real
// time (so that context deadlines, which are real, mean the same on it).
func newWaiter(t *testing.T, lim limit.Limit, burst int, opts ...limit.Option) (*limit.Limiter, *limittest.FakeClock) {
	t.Helper()
	return newWaiterAt(t, time.Now(), lim, burst, opts...)
}

// newWaiterAt is newWaiter with the fake clock set to start.
func newWaiterAt(t *testing.T, start time.Time, lim limit.Limit, burst int, opts ...limit.Option) (*limit.Limiter, *limittest.FakeClock) {
	t.Helper()
	clk := limittest.NewFakeClock()
	clk.SetTime(start)
	l, err := limit.New(lim, burst, append([]limit.Option{limit.WithClock(clk), limit.WithSeed(1)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return l, clk
}

// waitAsync runs WaitN in a goroutine and returns its result channel.
func waitAsync(ctx context.Context, l *limit.Limiter, key string, n int) <-chan error {
	done := make(chan error, 1)
	go func() { done <- l.WaitN(ctx, key, n) }()
	return done
}

// TestWaitFakeClock: with a clock that can wait, WaitN waits on the
// clock's timer, not on real time: an hour of fake wait passes when the
// test advances the clock, at once. Reservation.Delay reads the same
// clock. Before, WaitN slept on a real timer and Delay read time.Now.
func TestWaitFakeClock(t *testing.T) {
	defer goleak.VerifyNone(t)
	l, clk := newWaiter(t, limit.Every(time.Hour), 1)
	if !l.Allow("k") {
		t.Fatal("first request denied")
	}
	if d := l.ReserveN(clk.Now(), "r", 1).Delay(); d != 0 {
		t.Fatalf("Delay of a fresh key %v", d)
	}
	r := l.ReserveN(clk.Now(), "r", 1)
	if d := r.Delay(); d != time.Hour {
		t.Fatalf("Delay %v on the fake clock, want 1h", d)
	}
	r.Cancel()
	start := time.Now()
	done := waitAsync(context.Background(), l, "k", 1)
	clk.BlockUntilTimers(1)
	clk.Advance(time.Hour - time.Millisecond)
	if clk.Timers() != 1 {
		t.Fatal("WaitN's timer fired 1 ms before its time")
	}
	clk.Advance(time.Millisecond)
	if err := <-done; err != nil {
		t.Fatalf("WaitN: %v", err)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Fatalf("an hour of fake wait took %v of real time", el)
	}
	// The wait debited the token: the key is empty again for an hour.
	if d := l.PeekN(clk.Now(), "k", 1); d.Allowed || d.RetryAfter != time.Hour {
		t.Fatalf("after the wait %+v", d)
	}
}

// TestWaitErrors: WaitN's failures before waiting are *WaitError values
// matched with errors.Is and errors.As, the past-deadline one also as
// context.DeadlineExceeded, and none of them debits anything.
func TestWaitErrors(t *testing.T) { forEngines(t, testWaitErrors) }

func testWaitErrors(t *testing.T, eng limit.Option) {
	// The fake clock runs an hour ahead of the real one, so the real
	// contexts' deadlines (set on it) cannot pass while the test runs:
	// on the real time, a pause of 100 ms (a loaded CI machine) expired
	// them before WaitN looked, which then returned the context's own
	// error, or set no timer and left BlockUntilTimers waiting forever
	// (audit 155: about 1 run in 700 under -race; the same as stop 61's
	// note at audit54_sweep_test.go). WaitN measures a deadline on the
	// limiter's clock, so "99 ms is refused, 100 ms admitted" still holds.
	l, clk := newWaiterAt(t, time.Now().Add(time.Hour), 10, 2, eng) // MaxDebt 4
	ctx := context.Background()
	check := func(err, want error, n int) {
		t.Helper()
		var we *limit.WaitError
		if !errors.Is(err, want) || !errors.As(err, &we) || we.N != n || we.Err != want {
			t.Fatalf("err %v (%T), want a *WaitError matching %v", err, err, want)
		}
	}
	check(l.WaitN(ctx, "k", 3), limit.ErrAboveBurst, 3)

	// Debt 2 (the burst): one more token needs 100 ms.
	l.AllowN(clk.Now(), "k", 2)
	before := l.PeekN(clk.Now(), "k", 1)
	short, cancel := context.WithDeadline(ctx, clk.Now().Add(99*time.Millisecond))
	defer cancel()
	err := l.WaitN(short, "k", 1)
	check(err, limit.ErrPastDeadline, 1)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("past-deadline error %v does not match context.DeadlineExceeded", err)
	}
	if after := l.PeekN(clk.Now(), "k", 1); after != before {
		t.Fatalf("a refused WaitN debited: %+v, then %+v", before, after)
	}
	// Exactly at the deadline is in time (x/time/rate: wait <= deadline).
	atDl, cancel2 := context.WithDeadline(ctx, clk.Now().Add(100*time.Millisecond))
	defer cancel2()
	done := waitAsync(atDl, l, "k", 1)
	clk.BlockUntilTimers(1)
	clk.Advance(100 * time.Millisecond)
	if err := <-done; err != nil {
		t.Fatalf("WaitN due exactly at the deadline: %v", err)
	}

	// Queue up to MaxDebt (4): two reservations of 1 on a full debt of 3.
	for l.ReserveN(clk.Now(), "k", 1).OK() {
	}
	before = l.PeekN(clk.Now(), "k", 1)
	check(l.WaitN(ctx, "k", 1), limit.ErrMaxDebt, 1)
	if after := l.PeekN(clk.Now(), "k", 1); after != before {
		t.Fatalf("a WaitN refused by MaxDebt debited: %+v, then %+v", before, after)
	}

	// A clock that cannot wait (sketchtest.FakeClock has no timers).
	nt, err := limit.New(1, 1, limit.WithClock(sketchtest.NewFakeClock()), eng)
	if err != nil {
		t.Fatal(err)
	}
	check(nt.WaitN(ctx, "k", 1), limit.ErrNoTimer, 1)

	// A context already done: its own error, nothing debited.
	dead, cancel3 := context.WithCancel(ctx)
	cancel3()
	if err := l.WaitN(dead, "z", 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitN on a cancelled context = %v", err)
	}
	if d := l.PeekN(clk.Now(), "z", 2); !d.Allowed {
		t.Fatal("WaitN on a cancelled context debited")
	}
}

// TestWaitCancelRule: one rule for WaitN and Cancel. A WaitN whose context
// ends during the wait cancels its reservation, and Cancel is all or
// nothing: untouched, the key reads exactly as if nothing had been
// reserved (the part drained during the wait included); with another
// request in the key's cells since, the whole debit stays (the safe
// side). Before, a cancelled wait kept the part already drained (0.4
// token here) while the doc said nothing stays debited.
//
// The same rule holds on the Buckets engine, where the key's cells are
// its one entry: no other key writes it (but a fingerprint twin, rarely),
// so the request that touches it here is the key's own.
func TestWaitCancelRule(t *testing.T) {
	for _, c := range []struct {
		engine  limit.Engine
		touched bool
	}{{limit.CountMin, false}, {limit.CountMin, true}, {limit.Buckets, false}, {limit.Buckets, true}} {
		touched := c.touched
		// Count-min: one cell per level, so every key shares the key's
		// cells; the toucher is another key.
		opts := []limit.Option{limit.WithSize(1, 1), limit.WithMaxDebt(5)}
		toucher := "other"
		if c.engine == limit.Buckets {
			opts, toucher = []limit.Option{limit.WithEngine(limit.Buckets), limit.WithMaxDebt(5)}, "k"
		}
		l, clk := newWaiter(t, 1, 1, opts...)
		twin, tclk := newWaiterAt(t, clk.Now(), 1, 1, opts...) // never reserves for "k"
		l.Allow("k")
		twin.Allow("k")
		ctx, cancel := context.WithCancel(context.Background())
		done := waitAsync(ctx, l, "k", 1)
		clk.BlockUntilTimers(1)
		clk.Advance(400 * time.Millisecond)
		tclk.Advance(400 * time.Millisecond)
		if touched { // another key writes the shared cell during the wait
			if !l.ReserveN(clk.Now(), toucher, 1).OK() || !twin.ReserveN(tclk.Now(), toucher, 1).OK() {
				t.Fatal("reservation of another key refused")
			}
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled WaitN = %v", err)
		}
		got, never := l.PeekN(clk.Now(), "k", 1), twin.PeekN(tclk.Now(), "k", 1)
		if !touched && got != never {
			t.Fatalf("untouched: after Cancel %+v, as if never reserved %+v", got, never)
		}
		if touched && got.ResetAfter != never.ResetAfter+time.Second {
			t.Fatalf("touched: after Cancel %+v, want the whole reservation kept (%+v plus 1 s)", got, never)
		}
	}
}
