package limittest_test

import (
	"context"
	"errors"
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// TestAudit130ZeroFakeClockAndOddTimers: the zero FakeClock is usable
// ("the zero value and NewFakeClock read 0 ms"), its timers included;
// NewTimer with d <= 0 (0, -1, MinInt64) fires at once; a timer's Stop
// reports true once and then false, and a stopped timer leaves Timers and
// never fires; BlockUntilTimers(0) and (-1) return at once.
func TestAudit130ZeroFakeClockAndOddTimers(t *testing.T) {
	var c limittest.FakeClock
	if c.NowMillis() != 0 || !c.Now().Equal(time.UnixMilli(0)) || c.Timers() != 0 {
		t.Fatalf("zero FakeClock: NowMillis %d Now %v Timers %d, want 0, UnixMilli(0), 0", c.NowMillis(), c.Now(), c.Timers())
	}
	for _, d := range []time.Duration{0, -1, math.MinInt64} {
		tm := c.NewTimer(d)
		select {
		case <-tm.C():
		default:
			t.Errorf("NewTimer(%v) did not fire at once", d)
		}
		if tm.Stop() {
			t.Errorf("NewTimer(%v): Stop after firing reported true", d)
		}
	}
	tm := c.NewTimer(time.Second)
	if c.Timers() != 1 {
		t.Errorf("Timers = %d after one NewTimer(1s), want 1", c.Timers())
	}
	if !tm.Stop() || tm.Stop() {
		t.Errorf("Stop of a pending timer: want true then false")
	}
	if c.Timers() != 0 {
		t.Errorf("Timers = %d after Stop, want 0", c.Timers())
	}
	c.Advance(time.Hour)
	select {
	case <-tm.C():
		t.Errorf("a stopped timer fired")
	default:
	}
	huge := c.NewTimer(math.MaxInt64)
	c.Advance(24 * time.Hour)
	select {
	case <-huge.C():
		t.Errorf("NewTimer(MaxInt64) fired after a day")
	default:
	}
	huge.Stop()
	done := make(chan struct{})
	go func() {
		c.BlockUntilTimers(0)
		c.BlockUntilTimers(-1)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatalf("BlockUntilTimers(0) / (-1) blocked with no timers")
	}
}

// TestAudit130WaitOnFakeClockOddContexts: a WaitN on a limiter driven by a
// FakeClock returns ErrPastDeadline (a *limit.WaitError that also matches
// context.DeadlineExceeded) for a deadline the wait would pass, and the
// context's error once the context ends mid-wait, giving the tokens back.
func TestAudit130WaitOnFakeClockOddContexts(t *testing.T) {
	c := limittest.NewFakeClock()
	c.SetTime(time.Now()) // the context's deadline is wall-clock time
	// MaxDebt 4: a reservation that fills the key to MaxDebt is never
	// given back (Reservation.Cancel doc), so leave room.
	l := limit.MustNew(1, 1, limit.WithClock(c), limit.WithCapacity(100, 0.01), limit.WithMaxDebt(4))
	if !l.Allow("k") {
		t.Fatal("first request denied")
	}
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(10*time.Millisecond))
	defer cancel()
	err := l.WaitN(ctx, "k", 1)
	var we *limit.WaitError
	if !errors.As(err, &we) || !errors.Is(err, limit.ErrPastDeadline) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitN past a 10ms deadline needing 1s: %v, want a *WaitError matching ErrPastDeadline and DeadlineExceeded", err)
	}
	before := l.Tokens("k")
	ctx2, cancel2 := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- l.WaitN(ctx2, "k", 1) }()
	deadline := time.Now().Add(5 * time.Second)
	for c.Timers() < 1 {
		select {
		case err := <-errc:
			t.Fatalf("WaitN returned before waiting: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("WaitN never started its timer")
		}
		runtime.Gosched()
	}
	cancel2()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("WaitN cancelled mid-wait: %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WaitN did not return after its context was cancelled")
	}
	if got := l.Tokens("k"); got != before {
		t.Errorf("after a cancelled WaitN: Tokens %v, want %v (given back)", got, before)
	}
}
