package limit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// docs/migrating.md, "limit: tiers, SetLimit and SetBurst": "Halving the
// rate of a key that just spent a burst of 10 at 10/s: x/time/rate admits
// the next request after 200 ms; here 5 requests fit at once (the burst of
// 10 now spans 2 s, 1 s of it owed) and then one per 200 ms."
func TestAudit43MigratingSetLimitExample(t *testing.T) {
	for _, e := range []limit.Engine{limit.Buckets, limit.CountMin} {
		c := limittest.NewFakeClock()
		c.Set(1_000_000)
		l := limit.MustNew(10, 10, limit.WithClock(c), limit.WithEngine(e))
		for i := 0; i < 10; i++ {
			if !l.Allow("k") {
				t.Fatalf("%v: burst request %d denied", e, i)
			}
		}
		before := l.PeekN(c.Now(), "k", 11).ResetAfter // n > burst: nothing hypothetical taken
		if err := l.SetLimit(5); err != nil {
			t.Fatalf("%v: SetLimit(5): %v", e, err)
		}
		if ra := l.PeekN(c.Now(), "k", 11).ResetAfter; ra != before || ra != time.Second {
			t.Errorf("%v: ResetAfter %v after SetLimit (before %v); doc: the same, 1 s", e, ra, before)
		}
		if tk := l.Tokens("k"); tk != 5 {
			t.Errorf("%v: Tokens %v after halving; doc: 1 s owed is 5 tokens at 5/s, of 10", e, tk)
		}
		n := 0
		for l.Allow("k") {
			n++
			if n > 20 {
				break
			}
		}
		if n != 5 {
			t.Errorf("%v: %d requests fit at once after halving, migrating.md says 5", e, n)
		}
		d := l.Decide("k")
		if d.RetryAfter != 200*time.Millisecond {
			t.Errorf("%v: then RetryAfter %v, doc: one per 200 ms", e, d.RetryAfter)
		}
		// SetLimit(Inf) on a finite limiter is an error
		if err := l.SetLimit(limit.Inf); err == nil {
			t.Errorf("%v: SetLimit(Inf) on a finite limiter accepted", e)
		}
	}
	inf := limit.MustNew(limit.Inf, 1)
	if err := inf.SetLimit(10); err == nil {
		t.Errorf("finite SetLimit on an Inf limiter accepted")
	}
}

// docs/readings.md parity table rows.
func TestAudit43ParityRows(t *testing.T) {
	// "`Every(d <= 0)` is `Inf`"
	if limit.Every(0) != limit.Inf || limit.Every(-time.Second) != limit.Inf {
		t.Errorf("Every(<=0) = %v, %v; doc: Inf", limit.Every(0), limit.Every(-time.Second))
	}
	c := limittest.NewFakeClock()
	c.Set(1_000_000)
	l := limit.MustNew(10, 20, limit.WithClock(c))
	// Tokens: "burst - debt, fractional, negative while reservations queue"
	if tk := l.Tokens("k"); tk != 20 {
		t.Errorf("fresh Tokens %v, want 20", tk)
	}
	r := l.ReserveN(c.Now(), "k", 20)
	r2 := l.ReserveN(c.Now(), "k", 15)
	if !r.OK() || !r2.OK() {
		t.Fatalf("reservations within MaxDebt 40 not OK")
	}
	if tk := l.Tokens("k"); tk != -15 {
		t.Errorf("Tokens with 35 reserved = %v, doc: burst - debt = -15", tk)
	}
	if d := r2.Delay(); d != 1500*time.Millisecond {
		t.Errorf("Delay of the queued reservation %v, want 1.5 s (15 tokens at 10/s)", d)
	}
	c.Advance(50 * time.Millisecond)
	if tk := l.Tokens("k"); tk != -14.5 {
		t.Errorf("Tokens after 50 ms = %v, doc: fractional, -14.5", tk)
	}
	// "not OK beyond MaxDebt"
	if l.ReserveN(c.Now(), "k", 6).OK() {
		t.Errorf("reservation past MaxDebt 40 OK (debt 34.5 + 6)")
	}
	if !l.ReserveN(c.Now(), "k", 5).OK() {
		t.Errorf("reservation up to MaxDebt (34.5 + 5 <= 40) not OK")
	}
	// WaitN: "exactly at the deadline is in time"; past it ErrPastDeadline, nothing debited
	// The context's deadline is real time an hour ahead; the fake clock
	// stands 99 ms before it.
	deadline := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	c2 := limittest.NewFakeClock()
	c2.SetTime(deadline.Add(-99 * time.Millisecond))
	w := limit.MustNew(10, 20, limit.WithClock(c2))
	for i := 0; i < 20; i++ {
		w.Allow("k")
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	err := w.WaitN(ctx, "k", 1)
	cancel()
	var we *limit.WaitError
	if !errors.Is(err, limit.ErrPastDeadline) || !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &we) {
		t.Errorf("wait of 100 ms with 99 ms left: err %v, doc: ErrPastDeadline, DeadlineExceeded", err)
	}
	if tk := w.Tokens("k"); tk != 0 {
		t.Errorf("refused WaitN debited: Tokens %v", tk)
	}
	// "exactly at the deadline is in time": 100 ms wait, deadline 100 ms ahead
	c3 := limittest.NewFakeClock()
	c3.SetTime(deadline.Add(-100 * time.Millisecond))
	w3 := limit.MustNew(10, 20, limit.WithClock(c3))
	for i := 0; i < 20; i++ {
		w3.Allow("k")
	}
	done := make(chan error, 1)
	ctx2, cancel2 := context.WithDeadline(context.Background(), deadline)
	defer cancel2()
	go func() { done <- w3.WaitN(ctx2, "k", 1) }()
	select {
	case err := <-done:
		t.Fatalf("wait ending exactly at the deadline returned at once: %v; doc: in time", err)
	case <-time.After(50 * time.Millisecond):
	}
	c3.BlockUntilTimers(1)
	c3.Advance(100 * time.Millisecond)
	if err := <-done; err != nil {
		t.Errorf("wait ending exactly at the deadline: %v; doc: in time", err)
	}
	if err := w.WaitN(context.Background(), "k", 21); !errors.Is(err, limit.ErrAboveBurst) {
		t.Errorf("WaitN(21) err %v, doc: ErrAboveBurst", err)
	}
}

// limit/doc.go: WaitN's errors include ErrNoTimer, for "a WithClock clock
// that neither has NewTimer nor runs at real speed" (readings.md).
func TestAudit43WaitNoTimer(t *testing.T) {
	c := &a43MsClock{ms: 1_000_000}
	l := limit.MustNew(10, 1, limit.WithClock(c))
	l.Allow("k")
	err := l.WaitN(context.Background(), "k", 1)
	if !errors.Is(err, limit.ErrNoTimer) {
		t.Errorf("WaitN on a fake clock without NewTimer: %v, doc: ErrNoTimer", err)
	}
}

type a43MsClock struct{ ms int64 }

func (c *a43MsClock) NowMillis() int64 { return c.ms }
