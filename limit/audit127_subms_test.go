package limit_test

import (
	"context"
	"errors"
	"runtime"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

var a127Engines = []limit.Engine{limit.Buckets, limit.CountMin}

// a127Clock returns a limittest clock an hour ahead of the wall clock
// (so a context deadline set on it never fires in real time) with a
// sub-millisecond fraction of frac.
func a127Clock(frac time.Duration) *limittest.FakeClock {
	c := limittest.NewFakeClock()
	c.SetTime(time.UnixMilli(time.Now().Add(time.Hour).UnixMilli()).Add(frac))
	return c
}

// a127Settle spins until every one of n waiters has returned or has a
// pending timer, so that the waiters released by the last move are
// counted at that move.
func a127Settle(t *testing.T, c *limittest.FakeClock, done *atomic.Int64, n int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for int(done.Load())+c.Timers() < n {
		if time.Now().After(deadline) {
			t.Fatalf("waiters did not settle: %d done, %d timers of %d", done.Load(), c.Timers(), n)
		}
		time.Sleep(time.Microsecond)
	}
}

// a127Pending waits until a waiter has a timer, failing if it returned
// instead.
func a127Pending(t *testing.T, c *limittest.FakeClock, res chan error) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for c.Timers() < 1 {
		select {
		case err := <-res:
			t.Fatalf("the waiter returned at once: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("no timer")
		}
		runtime.Gosched()
	}
}

// TestAudit127FixedWaitNLateWithClockFraction (audit 127; fixed at stop 63, the text below says what was wrong): n waiters on one key
// start together at a clock reading with a sub-ms fraction (the limiter
// decides at NowMillis, D) and the clock moves in sub-ms steps. The
// rational bucket at millisecond resolution (limit's doc, "Exactness";
// docs/readings.md: "decisions happen at whole milliseconds ... exact
// against the rational bucket when Exact()"; ReserveN's DelayFrom agrees)
// acts the i-th reservation at D + ceil((i+1-b) x 1000/r) ms, and WaitN
// "waits on the limiter's clock, at most until the time the check
// admitted" (docs/readings.md, Wait row). Observed at 5bac8b3: every
// waiter that had to wait returns 1 ms late (D+5 for D+4 at 300/s; D+2
// for D+1 at 1000/s). Cause: WaitN's delay is act - l.Now(), and
// l.Now() is the start of the clock's ms (limit/reserve.go:296, via
// Timebase.Time of the ms reading), while limittest's NewTimer now counts
// d from Now() with its fraction (limit/limittest/clock.go:106-118,
// audit 126's fix): D+0.7 + 1 ms rounds up to D+2. Fix: in
// limit/reserve.go:296 and :306 take now from the clock's own Now() when
// it is a limit.Clock (so delay = act - clock.Now(), 300 µs here), or
// have limittest's deadline count from NowMillis again for the limiter's
// whole-ms delays; the two must agree.
func TestAudit127FixedWaitNLateWithClockFraction(t *testing.T) {
	type tc struct {
		rate  int // per second
		burst int
		n     int
		step  time.Duration
		frac  time.Duration
	}
	cases := []tc{
		{300, 2, 6, 300 * time.Microsecond, 700 * time.Microsecond},
		{2500, 2, 8, 70 * time.Microsecond, 999 * time.Microsecond},
		{1000, 1, 5, 130 * time.Microsecond, 10 * time.Microsecond},
		{7, 1, 3, 900 * time.Microsecond, 500 * time.Microsecond},
	}
	if testing.Short() {
		cases = cases[:2]
	}
	for _, e := range a127Engines {
		for _, k := range cases {
			c := a127Clock(k.frac)
			l := limit.MustNew(limit.Limit(k.rate), k.burst, limit.WithClock(c), limit.WithEngine(e), limit.WithSeed(3), limit.WithMaxDebt(float64(k.n+k.burst)))
			if !l.Exact() {
				t.Fatalf("%v %d/s: not Exact", e, k.rate)
			}
			d0 := c.NowMillis()
			var want []int64
			for i := 1; i <= k.n; i++ {
				need := int64(i - k.burst)
				ms := int64(0)
				if need > 0 {
					ms = (need*1000 + int64(k.rate) - 1) / int64(k.rate)
				}
				want = append(want, d0+ms)
			}
			var done atomic.Int64
			res := make(chan error, k.n)
			for range k.n {
				go func() {
					err := l.Wait(context.Background(), "k")
					res <- err
					done.Add(1)
				}()
			}
			var got []int64
			collect := func() {
				for int(done.Load()) > len(got) {
					if err := <-res; err != nil {
						t.Fatalf("Wait: %v", err)
					}
					got = append(got, c.NowMillis())
				}
			}
			a127Settle(t, c, &done, k.n)
			collect()
			for steps := 0; len(got) < k.n; steps++ {
				if steps > 2_000_000 {
					t.Fatalf("%v %d/s: waiters never returned", e, k.rate)
				}
				c.Advance(k.step)
				a127Settle(t, c, &done, k.n)
				collect()
			}
			sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("%v %d/s burst %d, step %v: waiter %d returned at D+%d ms; the bucket's act time is D+%d ms (all: %v, want %v)",
						e, k.rate, k.burst, k.step, i, got[i]-d0, want[i]-d0, got, want)
					break
				}
			}
		}
	}
}

// TestAudit127WaitCancelSubMs: a waiter cancelled partway (the clock moved
// in sub-ms steps) returns ctx.Err(), stops its timer and gives its
// reservation back (Cancel's rule: nothing else wrote the key), so the
// key reads as if it had never waited; an uncancelled twin shows the
// debit it would have left.
func TestAudit127WaitCancelSubMs(t *testing.T) {
	for _, e := range a127Engines {
		c := a127Clock(600 * time.Microsecond)
		l := limit.MustNew(10, 1, limit.WithClock(c), limit.WithEngine(e), limit.WithSeed(5), limit.WithMaxDebt(4))
		if !l.Allow("k") {
			t.Fatal("first Allow denied")
		}
		ctx, cancel := context.WithCancel(context.Background())
		res := make(chan error, 1)
		go func() { res <- l.Wait(ctx, "k") }()
		a127Pending(t, c, res)
		for range 37 {
			c.Advance(1300 * time.Microsecond) // 48.1 ms: neither act time
		}
		cancel()
		if err := <-res; !errors.Is(err, context.Canceled) {
			t.Fatalf("%v: Wait after cancel: %v", e, err)
		}
		if n := c.Timers(); n != 0 {
			t.Errorf("%v: %d timers left after a cancelled Wait", e, n)
		}
		// 100 ms after the first Allow (decided at D): the key, given
		// back, has its token again.
		c.Advance(100*time.Millisecond - 37*1300*time.Microsecond)
		if !l.Allow("k") {
			t.Errorf("%v: 100 ms after the first Allow, with the cancelled wait given back, Allow was denied (tokens %v)", e, l.Tokens("k"))
		}
	}
}

// TestAudit127ReserveCancelAndDeadlineSubMs: with the clock at D + 0.7
// ms, a reservation behind a full key acts at D+1 ms; DelayFrom the
// clock's Now is 1 ms (Now is the whole ms NowMillis reads, D: since
// stop 63's fix of the findings below); Cancel gives it back; WaitN with a
// deadline at D + 0.95 ms is refused with ErrPastDeadline having debited
// nothing, and one at the act time (D+1) is admitted and does not return
// before it (how late it returns: the finding above).
func TestAudit127ReserveCancelAndDeadlineSubMs(t *testing.T) {
	for _, e := range a127Engines {
		c := a127Clock(700 * time.Microsecond)
		l := limit.MustNew(1000, 1, limit.WithClock(c), limit.WithEngine(e), limit.WithSeed(7), limit.WithMaxDebt(4))
		d := c.NowMillis()
		if !l.AllowN(c.Now(), "k", 1) {
			t.Fatal("first AllowN denied")
		}
		r := l.ReserveN(c.Now(), "k", 1)
		if !r.OK() {
			t.Fatal("reservation not OK")
		}
		if got := r.DelayFrom(c.Now()); got != time.Millisecond {
			t.Errorf("%v: DelayFrom(clock's Now at D+0.7ms, which reads D) = %v; want 1ms (act at D+1)", e, got)
		}
		r.Cancel()
		if tk := l.TokensAt(c.Now(), "k"); tk != 0 {
			t.Errorf("%v: tokens after Cancel %v; want 0 (the first Allow's debit only)", e, tk)
		}
		before := l.TokensAt(c.Now(), "k")
		ctx, cancel := context.WithDeadline(context.Background(), time.UnixMilli(d).Add(950*time.Microsecond))
		err := l.Wait(ctx, "k")
		cancel()
		if !errors.Is(err, limit.ErrPastDeadline) {
			t.Errorf("%v: a wait to D+1ms with the deadline at D+0.95ms: %v; want ErrPastDeadline", e, err)
		}
		if tk := l.TokensAt(c.Now(), "k"); tk != before {
			t.Errorf("%v: the refused Wait debited: %v, before %v", e, tk, before)
		}
		ctx, cancel = context.WithDeadline(context.Background(), time.UnixMilli(d+1))
		res := make(chan error, 1)
		go func() { res <- l.Wait(ctx, "k") }()
		a127Pending(t, c, res)
		c.Advance(299 * time.Microsecond)
		select {
		case err := <-res:
			t.Errorf("%v: returned at D+0.999ms (%v); acts at D+1", e, err)
		case <-time.After(5 * time.Millisecond):
		}
		c.Advance(2 * time.Millisecond)
		if err := <-res; err != nil {
			t.Errorf("%v: a wait admitted with its act time at its deadline: %v", e, err)
		}
		cancel()
	}
}

// TestAudit127FixedDelayIgnoresClockFraction (audit 127; fixed at stop 63, the text below says what was wrong): since limittest's clock
// keeps sub-ms parts (this stop), Limiter.Now() is no longer the clock's
// Now(): it is the start of the clock's millisecond (core.Timebase.Time
// of the ms reading), so Reservation.Delay() counts from up to 1 ms
// before the fake clock's time and overstates the wait by the fraction.
// Expected (limit/reserve.go:29-30: "Delay is DelayFrom at the limiter
// clock's current reading (Now): with WithClock, a fake clock's time";
// limit/clock.go:14-15: "Now must be the time.Time of NowMillis's
// reading (as sketchtest.FakeClock's is)", which both fake clocks no
// longer are): Delay() == DelayFrom(clock.Now()), so that
// clock.Advance(r.Delay()) lands on the act time. Observed: at D+0.7 ms
// with the act at D+1, Delay() is 1ms, DelayFrom(c.Now()) 300µs;
// Advance(Delay()) lands at D+1.7, and a timer of Delay() (limittest's
// count from the fraction since 5bac8b3) fires at D+2. Fix: either make
// Limiter.Now (limit/limit.go:473) return the clock's own Now() for a
// clock that has one (WaitN's delay then counts from it too: see
// TestAudit127FixedWaitNLateWithClockFraction), or reword
// limit/clock.go:14-15 and reserve.go:29-30 (and Limiter.Now's doc) to
// say the limiter reads its clock at whole ms, so Delay is measured from
// the start of the clock's millisecond.
func TestAudit127FixedDelayIgnoresClockFraction(t *testing.T) {
	c := a127Clock(700 * time.Microsecond)
	l := limit.MustNew(1000, 1, limit.WithClock(c), limit.WithEngine(limit.Buckets), limit.WithSeed(9))
	l.Allow("k")
	r := l.Reserve("k")
	if !r.OK() {
		t.Fatal("reservation not OK")
	}
	if got, want := r.Delay(), r.DelayFrom(c.Now()); got != want {
		t.Errorf("Delay() = %v; DelayFrom(the fake clock's Now) = %v (Limiter.Now %v, clock Now %v past the ms)",
			got, want, time.Duration(l.Now().Nanosecond()%1e6), time.Duration(c.Now().Nanosecond()%1e6))
	}
}
