package limit_test

// audit22: WaitN's timer under a clock that another goroutine steps back
// while WaitN arms it.
//
// WaitN computes its delay from one reading of the clock (act minus
// l.Now()) and then asks the clock for a timer of that length "from now"
// (Clock.NewTimer: it fires "when the clock reaches d from now"). A
// WithClock clock is safe for concurrent use and may be stepped back by
// another goroutine at any moment (the package documents clocks that
// step back); when that happens between the read and NewTimer, the timer
// fires at act minus the step, and WaitN returns nil while the clock
// never reached act and the limiter never decided at act: the tokens it
// waited for are not there (Tokens < 0, a DecideN of the key denies).
// The doc: "WaitN blocks until n tokens for key are available".
//
// The step is injected deterministically: a22StepClock is a
// limittest.FakeClock whose NewTimer first applies a pending step (as a
// goroutine calling Set just before it would). Suggested fix
// (limit/reserve.go, waitN): after the timer fires, read l.Now() again
// and, while it is before act, arm a new timer for the rest.

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// a22StepClock is a FakeClock whose next NewTimer first moves the clock
// back by back ms: what a goroutine stepping the clock between WaitN's
// reading and its timer does.
type a22StepClock struct {
	*limittest.FakeClock
	back atomic.Int64
}

func (c *a22StepClock) NewTimer(d time.Duration) limit.Timer {
	if b := c.back.Swap(0); b != 0 {
		c.FakeClock.Set(c.FakeClock.NowMillis() - b)
	}
	return c.FakeClock.NewTimer(d)
}

var _ limit.Clock = (*a22StepClock)(nil)

// a22WaitOutcome runs wait in a goroutine (its timer armed after a step
// back of lag), moves the clock forward by the wait's own length (the
// timer, armed early, fires), and reports whether the wait returned then
// (returned true) or armed a new timer. In the second case the clock is
// moved to hw+wait, where the tokens are there, and the wait must return.
func a22WaitOutcome(t *testing.T, clk *a22StepClock, hw int64, wait time.Duration, run func() error) (returned bool) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- run() }()
	clk.BlockUntilTimers(1)
	clk.Advance(wait) // the clock now reads hw - lag + wait: far before hw + wait
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("WaitN: %v", err)
			}
			return true
		default:
		}
		if clk.Timers() > 0 { // it waits on: let it go where its tokens are
			clk.Set(hw + wait.Milliseconds())
			if err := <-done; err != nil {
				t.Fatalf("WaitN: %v", err)
			}
			return false
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("WaitN neither returned nor armed a new timer within 10 s")
	return false
}

// TestAudit22FixedWaitNTimerArmedAfterStepBack: a key emptied at hw
// (burst 10 at 10/s), WaitN(ctx, key, 1): its token is there at hw +
// 100 ms. The clock steps back an hour between WaitN's reading and its
// NewTimer; the timer then fires when the clock reads hw - 1h + 100 ms,
// and WaitN returns nil with the limiter still at hw: Tokens is -1 and
// an AllowN of the key right after is denied. It must keep waiting until
// the clock reaches hw + 100 ms. Limiter and Tier, both engines.
func TestAudit22FixedWaitNTimerArmedAfterStepBack(t *testing.T) {
	const lag = time.Hour
	for _, eng := range engines {
		for _, useTier := range []bool{false, true} {
			name := eng.String() + "/limiter"
			if useTier {
				name = eng.String() + "/tier"
			}
			t.Run(name, func(t *testing.T) {
				clk := &a22StepClock{FakeClock: limittest.NewFakeClock()}
				hw := time.Now().Add(2 * time.Hour).UnixMilli()
				clk.Set(hw)
				l, err := limit.New(10, 10, limit.WithClock(clk), limit.WithEngine(eng), limit.WithSeed(22))
				if err != nil {
					t.Fatal(err)
				}
				wait := 100 * time.Millisecond
				run := func() error { return l.WaitN(context.Background(), "k", 1) }
				tokens := func() float64 { return l.Tokens("k") }
				if useTier {
					tier, err := l.Tier("half", 5, 5) // a token is 200 ms
					if err != nil {
						t.Fatal(err)
					}
					wait = 200 * time.Millisecond
					run = func() error { return tier.WaitN(context.Background(), "k", 1) }
					tokens = func() float64 { return tier.Tokens("k") }
				}
				if !l.AllowN(clk.Now(), "k", 10) {
					t.Fatal("burst denied")
				}
				clk.back.Store(lag.Milliseconds())
				if a22WaitOutcome(t, clk, hw, wait, run) {
					tk := tokens()
					allowed := l.PeekN(clk.Now(), "k", 1).Allowed
					t.Fatalf("WaitN returned nil with the clock at hw-%v+%v (it never reached hw+%v, the time its token is there) and the limiter at hw: Tokens(k) = %v (want >= 0), a request of k now admitted: %v", lag, wait, wait, tk, allowed)
				}
				if tk := tokens(); tk < 0 {
					t.Fatalf("after WaitN returned at hw+%v: Tokens = %v, want >= 0", wait, tk)
				}
			})
		}
	}
}

// TestAudit22WaitNForwardStepWaitsItsTime: the same wait with the clock
// stepped forward (by 50 ms, less than the wait) between the reading and
// the timer: the timer is late by the step, never early. WaitN returns
// only once the clock has reached hw + 100 ms + 50 ms, and the token is
// there.
func TestAudit22WaitNForwardStepWaitsItsTime(t *testing.T) {
	for _, eng := range engines {
		t.Run(eng.String(), func(t *testing.T) {
			clk := &a22StepClock{FakeClock: limittest.NewFakeClock()}
			hw := time.Now().Add(2 * time.Hour).UnixMilli()
			clk.Set(hw)
			l, err := limit.New(10, 10, limit.WithClock(clk), limit.WithEngine(eng), limit.WithSeed(22))
			if err != nil {
				t.Fatal(err)
			}
			if !l.AllowN(clk.Now(), "k", 10) {
				t.Fatal("burst denied")
			}
			clk.back.Store(-50)
			done := make(chan error, 1)
			go func() { done <- l.WaitN(context.Background(), "k", 1) }()
			clk.BlockUntilTimers(1)
			clk.Set(hw + 149)
			select {
			case err := <-done:
				t.Fatalf("WaitN returned (%v) at hw+149 ms, before its timer (hw+150)", err)
			case <-time.After(20 * time.Millisecond):
			}
			clk.Set(hw + 150)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if tk := l.Tokens("k"); tk < 0 {
				t.Fatalf("after WaitN: Tokens = %v, want >= 0", tk)
			}
		})
	}
}
