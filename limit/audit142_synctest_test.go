package limit_test

// Audit 142: testing/synctest. Inside a synctest.Test bubble time.Now,
// time.Sleep and time.Timer run on a fake clock that jumps ahead
// whenever every goroutine of the bubble is durably blocked; the
// limiter's default clock reads the runtime's nanotime, which the bubble
// does not fake, while WaitN waits on time.NewTimer, which it does.

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lfgrudge/grudge/internal/testchild"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

const a142Env = "GRUDGE_AUDIT142_CHILD"

// a142Now is the clock a synctest user would write: time.Now for the
// reading and time.NewTimer for the waits, both faked inside a bubble.
type a142Now struct{}

func (a142Now) NowMillis() int64 { return time.Now().UnixMilli() }
func (a142Now) Now() time.Time   { return time.Now().Truncate(time.Millisecond) }
func (a142Now) NewTimer(d time.Duration) limit.Timer {
	return a142Timer{time.NewTimer(d)}
}

type a142Timer struct{ t *time.Timer }

func (t a142Timer) C() <-chan time.Time { return t.t.C }
func (t a142Timer) Stop() bool          { return t.t.Stop() }

// a142NowOnly reads time.Now but cannot wait.
type a142NowOnly struct{}

func (a142NowOnly) NowMillis() int64 { return time.Now().UnixMilli() }
func (a142NowOnly) Now() time.Time   { return time.Now().Truncate(time.Millisecond) }

// TestAudit142FixedDefaultClockWaitSpinsInBubble (audit 142; fixed at
// stop 65, the text below says what was wrong): a user testing code that
// calls Wait on a limiter with the default clock inside a synctest.Test
// bubble. limit/doc.go: "Every time read and every wait goes through the
// limiter's clock (WithClock): Now, Reservation.Delay, WaitN's timer";
// nothing mentioned synctest. Observed (go1.26.8, amd64): a 50 ms wait
// (rate 20/s, burst 1) returned only after 50 ms of REAL time, during
// which WaitN's loop re-armed time.NewTimer(delay) ~15,000 times: every
// timer fires at once in the bubble (fake time), the reading (nanotime,
// real) had moved a few µs, and a new timer was made for the rest. The
// goroutine spun on a CPU and the bubble's fake clock raced 10 to 14
// MINUTES ahead for one 50 ms wait (x/time/rate in the same bubble
// returns after exactly 50 ms of fake time, one timer); Tier.Wait took
// the same path. Now: the first timer that fires with the default clock
// moved by less than half its delay ends the wait with ErrNoTimer, the
// reservation cancelled (the key's tokens are back), after one timer's
// worth of fake time; the docs (WithClock, ErrNoTimer) name
// limittest.TimeClock, on which the same wait takes exactly its 50 ms of
// fake time and returns nil.
func TestAudit142FixedDefaultClockWaitSpinsInBubble(t *testing.T) {
	testchild.Isolate(t, a142Env, func(t *testing.T) {
		// synctest.Test calls FailNow on a failure: a subtest each.
		for _, form := range []string{"Limiter", "Tier"} {
			t.Run(form, func(t *testing.T) { a142SpinCase(t, form, nil) })
			t.Run(form+"/TimeClock", func(t *testing.T) { a142SpinCase(t, form, limittest.TimeClock{}) })
		}
	})
}

// a142SpinCase times one wait of the form's in a bubble, on the default
// clock (c nil) or on c.
func a142SpinCase(t *testing.T, form string, c limit.Clock) {
	synctest.Test(t, func(t *testing.T) {
		opts := []limit.Option{limit.WithMaxDebt(10)}
		if c != nil {
			opts = append(opts, limit.WithClock(c))
		}
		// One token a minute: on the default clock (real), a faster
		// rate refilled while a loaded machine (qemu at nice 10) was
		// slow to reach the first timer, and Wait rightly returned nil
		// (audit 157: 13 runs in 130 at 20/s).
		l, err := limit.New(limit.Every(time.Minute), 1, opts...)
		if err != nil {
			t.Fatal(err)
		}
		wait, tokens, want := l.Wait, l.Tokens, time.Minute
		if form == "Tier" {
			tr, err := l.Tier("half", limit.Every(2*time.Minute), 1)
			if err != nil {
				t.Fatal(err)
			}
			wait, tokens, want = tr.Wait, tr.Tokens, 2*time.Minute
		}
		if err := wait(context.Background(), "k"); err != nil { // the burst: no wait
			t.Fatal(err)
		}
		start := time.Now() // fake
		err = wait(context.Background(), "k")
		fake := time.Since(start)
		// On the default clock a loaded machine can deschedule the waiter
		// between a timer's arming and its check, so it may re-arm once
		// (fake time then moves by a little more than the wait); the spin
		// this guards against moved it by minutes.
		if bound := want + time.Millisecond; c == nil && fake > 4*want || c != nil && fake > bound {
			t.Errorf("%s.Wait of %v inside a synctest bubble advanced the bubble's fake clock by %v; x/time/rate's Wait advances it by %v", form, want, fake.Round(time.Millisecond), want)
		}
		if c != nil {
			if err != nil || fake != want {
				t.Errorf("%s.Wait on TimeClock in a bubble: %v after %v of fake time; want nil after %v", form, err, fake, want)
			}
			return
		}
		if !errors.Is(err, limit.ErrNoTimer) {
			t.Errorf("%s.Wait on the default clock in a bubble = %v; want ErrNoTimer", form, err)
		}
		if tok := tokens("k"); tok < -0.01 {
			t.Errorf("%s.Tokens after the failed Wait = %v; want the reservation cancelled (about 0)", form, tok)
		}
	})
}

// TestAudit142FixedDefaultClockWaitMissesDeadlineInBubble (audit 142;
// fixed at stop 65, the text below says what was wrong): the same spin
// made a Wait that the deadline check admitted (and debited) fail with
// the context's error. docs/readings.md (Wait row): "a wait that would
// end after the deadline: error, nothing debited ...; else waits on the
// limiter's clock, at most until the time the check admitted". Observed:
// Wait(ctx with a 1 s timeout) of a 50 ms wait returned
// context.DeadlineExceeded after 1 s of fake time (the spin passed the
// fake deadline after ~20 timers); x/time/rate returns nil at 50 ms.
// Now: ErrNoTimer after the first timer, well before the deadline.
func TestAudit142FixedDefaultClockWaitMissesDeadlineInBubble(t *testing.T) {
	testchild.Isolate(t, a142Env, func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// A minute's wait and a 20-minute deadline (the spin passed
			// it after ~20 timers): a real stall of the machine cannot
			// refill the token (audit 157: at 20/s, 16 runs in 130
			// under qemu returned nil after no timer at all).
			l, err := limit.New(limit.Every(time.Minute), 1, limit.WithMaxDebt(10))
			if err != nil {
				t.Fatal(err)
			}
			if !l.Allow("k") {
				t.Fatal("the first request was denied")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
			defer cancel()
			start := time.Now()
			if err := l.Wait(ctx, "k"); !errors.Is(err, limit.ErrNoTimer) || time.Since(start) > 4*time.Minute {
				t.Errorf("Wait(ctx 20m) of a 1 min wait inside a synctest bubble: %v after %v of fake time; want ErrNoTimer after a timer or two (well before the 20 min deadline)", err, time.Since(start))
			}
		})
	})
}

// TestAudit142DefaultClockIgnoresFakeTime records what the short forms
// do with the default clock in a bubble: the bubble's time.Sleep does
// not move the limiter's clock, so a debt never drains across a fake
// sleep (x/time/rate, reading time.Now, admits after it). Not a hang or
// a panic; undocumented (see the finding above). The limiter, its
// timers and its contexts leave nothing behind in the bubble
// (synctest.Test would panic on a goroutine or timer left blocked).
func TestAudit142DefaultClockIgnoresFakeTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// One token a minute (a tier of one every two): the default
		// clock is real, so a faster rate refilled across a stall of
		// the machine (20/s: 50 ms; audit 154).
		l, err := limit.New(limit.Every(time.Minute), 1, limit.WithMaxDebt(10))
		if err != nil {
			t.Fatal(err)
		}
		n0 := l.Now()
		if !l.Allow("k") || l.Allow("k") {
			t.Fatal("burst 1: want admit then deny")
		}
		tr, err := l.Tier("slow", limit.Every(2*time.Minute), 1)
		if err != nil {
			t.Fatal(err)
		}
		m, err := limit.NewMulti(l)
		if err != nil {
			t.Fatal(err)
		}
		if !tr.Allow("t") || tr.Allow("t") || !m.Allow("m") || m.Allow("m") {
			t.Fatal("Tier and Multi, burst 1: want admit then deny")
		}
		time.Sleep(time.Hour) // fake
		if l.Allow("k") || tr.Allow("t") || m.Allow("m") {
			t.Fatal("the default clock moved with the bubble's fake time")
		}
		if l.AllowN(time.Now(), "k", 1) {
			t.Fatal("AllowN(the bubble's time.Now) admitted: a t ahead of the clock's reading should count as the reading")
		}
		if d := l.Now().Sub(n0); d > 10*time.Second {
			t.Fatalf("limiter clock moved %v over a fake hour", d)
		}
		d := l.Decide("k")
		if d.Allowed || d.RetryAfter <= 0 || d.RetryAfter > time.Minute {
			t.Fatalf("Decide after a fake hour: %+v", d)
		}
		r := l.Reserve("k")
		if !r.OK() || r.Delay() <= 0 || r.Delay() > 2*time.Minute {
			t.Fatalf("Reserve after a fake hour: ok %v delay %v", r.OK(), r.Delay())
		}
		r.Cancel()
		// A canceled Wait leaves no timer behind.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := l.Wait(ctx, "k"); !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait on a canceled ctx: %v", err)
		}
	})
}

// TestAudit142NoTimerClockInBubble: a time.Now clock without NewTimer
// answers ErrNoTimer at once (documented: limit.Clock, ErrNoTimer), and
// its short forms follow the fake time exactly.
func TestAudit142NoTimerClockInBubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, err := limit.New(20, 1, limit.WithClock(a142NowOnly{}), limit.WithMaxDebt(10))
		if err != nil {
			t.Fatal(err)
		}
		if !l.Allow("k") || l.Allow("k") {
			t.Fatal("burst 1: want admit then deny")
		}
		if err := l.Wait(context.Background(), "k"); !errors.Is(err, limit.ErrNoTimer) {
			t.Fatalf("Wait: %v, want ErrNoTimer", err)
		}
		time.Sleep(50 * time.Millisecond)
		if !l.Allow("k") {
			t.Fatal("not admitted 50 ms of fake time later")
		}
	})
}

// a142Script runs one fixed scenario on a limiter with the time.Now
// clock inside a fresh bubble and returns its transcript: every
// admission, RetryAfter, Delay and wait measured in fake time.
func a142Script(t *testing.T) []string {
	var out []string
	synctest.Test(t, func(t *testing.T) {
		l, err := limit.New(10, 3, limit.WithClock(a142Now{}), limit.WithMaxDebt(30))
		if err != nil {
			t.Fatal(err)
		}
		tr, err := l.Tier("slow", 2, 2)
		if err != nil {
			t.Fatal(err)
		}
		l2, err := limit.New(1, 2, limit.WithClock(a142Now{}))
		if err != nil {
			t.Fatal(err)
		}
		m, err := limit.NewMulti(l, l2)
		if err != nil {
			t.Fatal(err)
		}
		rec := func(f string, a ...any) { out = append(out, fmt.Sprintf(f, a...)) }
		start := time.Now()
		for i := range 5 {
			d := l.Decide("a")
			rec("decide %d %v %v %v", i, d.Allowed, d.RetryAfter, d.ResetAfter)
		}
		r := l.Reserve("a")
		rec("reserve %v %v", r.OK(), r.Delay())
		time.Sleep(r.Delay())
		rec("at %v allow %v", time.Since(start), l.Allow("a"))
		for i := range 3 {
			s := time.Now()
			err := l.Wait(context.Background(), "b")
			rec("wait %d %v %v", i, err, time.Since(s))
		}
		for i := range 4 {
			s := time.Now()
			err := tr.Wait(context.Background(), "c")
			rec("tier wait %d %v %v", i, err, time.Since(s))
		}
		for i := range 4 {
			rec("multi %d %v", i, m.Allow("d"))
		}
		time.Sleep(time.Second)
		rec("multi after 1s %v", m.Allow("d"))
		// Concurrent waiters on one key: the bubble orders them.
		var wg sync.WaitGroup
		got := make([]time.Duration, 4)
		s := time.Now()
		for i := range got {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := l.WaitN(context.Background(), "e", 3); err != nil {
					t.Error(err)
				}
				got[i] = time.Since(s)
			}()
			synctest.Wait()
		}
		wg.Wait()
		rec("concurrent %v", got)
		ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
		s = time.Now()
		err = l.WaitN(ctx, "e", 3)
		rec("deadline wait %v %v", err, time.Since(s))
		cancel()
		rec("total %v", time.Since(start))
	})
	return out
}

// TestAudit142TimeNowClockExactInBubble: with WithClock(a clock on
// time.Now and time.NewTimer) everything is exact and deterministic in a
// bubble: each wait is one timer, ends at the fake time it announced,
// and two runs give the same transcript. (tests/limit's audit142 test
// compares it with x/time/rate.)
func TestAudit142TimeNowClockExactInBubble(t *testing.T) {
	a := a142Script(t)
	b := a142Script(t)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("two runs differ:\n%s\n---\n%s", strings.Join(a, "\n"), strings.Join(b, "\n"))
	}
	want := []string{
		"decide 0 true 0s 100ms",
		"decide 1 true 0s 200ms",
		"decide 2 true 0s 300ms",
		"decide 3 false 100ms 300ms",
		"decide 4 false 100ms 300ms",
		"reserve true 100ms",
		"at 100ms allow false",
		"wait 0 <nil> 0s",
		"wait 1 <nil> 0s",
		"wait 2 <nil> 0s",
		"tier wait 0 <nil> 0s",
		"tier wait 1 <nil> 0s",
		"tier wait 2 <nil> 500ms",
		"tier wait 3 <nil> 500ms",
		"multi 0 true",
		"multi 1 true",
		"multi 2 false",
		"multi 3 false",
		"multi after 1s true",
		"concurrent [0s 300ms 600ms 900ms]",
		"deadline wait limit: WaitN(n=3) would wait past the context deadline (in 250ms) 0s",
		"total 3s",
	}
	if !reflect.DeepEqual(a, want) {
		t.Errorf("transcript:\n%s\nwant:\n%s", strings.Join(a, "\n"), strings.Join(want, "\n"))
	}
}
