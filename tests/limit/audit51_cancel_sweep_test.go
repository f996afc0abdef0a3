package limit_test

import (
	"context"
	"errors"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// a51Slow is a count-min limiter whose debts last months: Every(24h),
// burst 100, MaxDebt 200 (the default), a Period long enough that no
// rotation happens in the test. Key "k" takes its whole burst at the
// start, so it owes 100 days.
func a51Slow(t *testing.T) (*limit.Limiter, *limittest.FakeClock) {
	t.Helper()
	clk := limittest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	l, err := limit.New(limit.Every(24*time.Hour), 100, limit.WithClock(clk), limit.WithSeed(51), limit.WithPeriod(10000*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if l.Engine() != limit.CountMin {
		t.Fatalf("engine %v", l.Engine())
	}
	if !l.AllowN(clk.Now(), "k", 100) {
		t.Fatal("burst denied")
	}
	return l, clk
}

// TestAudit51CancelAcrossHorizonSweep: a reservation still waiting
// (its act time months away) cancelled after the horizon sweep (2^30 ms,
// 12.4 days) has run over the key's cells is given back exactly: the
// key reads as if it had never been reserved, drained since included.
func TestAudit51CancelAcrossHorizonSweep(t *testing.T) {
	for _, days := range []int64{1, 11, 13, 20, 24} {
		l, clk := a51Slow(t)
		r := l.ReserveN(clk.Now(), "k", 60)
		if d := r.Delay(); !r.OK() || d < 60*24*time.Hour || d > 60*24*time.Hour+2*time.Minute {
			t.Fatalf("reserve: ok %v delay %v", r.OK(), d)
		}
		clk.Advance(time.Duration(days) * 24 * time.Hour)
		l.AllowN(clk.Now(), "other", 1) // runs the sweep when it is due
		r.Cancel()
		want := float64(days) // 100 days of debt drained by days
		if got := l.Tokens("k"); math.Abs(got-want) > 1e-3 {
			t.Errorf("cancel after %d days: tokens %.6f, want %.6f", days, got, want)
		}
	}
}

// TestAudit51FixedCancelGivesNothingBackAfter2p31ms (fixed in the docs:
// Cancel's and WaitN's now state it): the same reservation, cancelled 26
// days (> 2^31 ms, 24.86 days) after it was taken and 34 days before its
// act time, with no other request of the key since, gives nothing back
// once the limiter's time has moved 2^31 ms past it.
//
// limit/reserve.go, Reservation.Cancel, listed exceptions (another
// request's write, the Buckets engine's steps and eviction floors,
// MaxDebt, conservative update) that did not include time; only
// docs/design.md ("Stamps repeat every 2^32 ms ... a roll-back gives
// nothing back once the sketch's time ... is 2^31 ms past the call's
// time") said so. The check: the key reads either as if never reserved
// (26) or with the whole reservation kept (26 - 60), never in between,
// and the Cancel and WaitN docs say when it is kept.
func TestAudit51FixedCancelGivesNothingBackAfter2p31ms(t *testing.T) {
	const days = 26
	const day = 24 * time.Hour
	src, err := os.ReadFile("../../limit/reserve.go")
	if err != nil {
		t.Fatal(err)
	}
	if doc := string(src); !strings.Contains(doc, "2^31 ms (24.8 days)") || !strings.Contains(doc, "began 24.8 days or more") {
		t.Errorf("limit/reserve.go: Cancel's and WaitN's docs do not state that a count-min reservation cancelled 24.8 days after it was taken keeps its debit")
	}
	check := func(t *testing.T, l *limit.Limiter, what string) {
		t.Helper()
		got := l.Tokens("k")
		if math.Abs(got-days) > 1e-3 && math.Abs(got-(days-60)) > 1e-3 {
			t.Errorf("%s: key reads %.4f tokens, want %d (given back) or %d (kept, as documented)", what, got, days, days-60)
		}
	}
	// the reservation's own Delay, read before Cancel (a read, no write)
	t.Run("Cancel-after-Delay", func(t *testing.T) {
		l, clk := a51Slow(t)
		r := l.ReserveN(clk.Now(), "k", 60)
		clk.Advance(days * day)
		if d := r.Delay(); d < (60-days)*day {
			t.Fatalf("delay %v: the reservation should not have acted yet", d)
		}
		r.Cancel()
		check(t, l, "Cancel 26 days after ReserveN(60), 34 days before its act time, after reading its Delay")
	})
	// another key's request (disjoint cells) before Cancel
	t.Run("Cancel-after-other-key", func(t *testing.T) {
		l, clk := a51Slow(t)
		r := l.ReserveN(clk.Now(), "k", 60)
		clk.Advance(days * day)
		l.Allow("other")
		r.Cancel()
		check(t, l, "Cancel 26 days after ReserveN(60), after one request of another key")
	})
	t.Run("WaitN-after-other-key", func(t *testing.T) {
		l, clk := a51Slow(t)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- l.WaitN(ctx, "k", 60) }()
		clk.BlockUntilTimers(1)
		clk.Advance(days * day)
		l.Allow("other")
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("WaitN: %v", err)
		}
		check(t, l, "WaitN(60) whose context ended 26 days into its 60-day wait, after one request of another key")
	})
}

// TestAudit51CancelAfter2p31msUnobserved: the same Cancel with nothing
// reading the clock in between (no request, no Delay) gives everything
// back: what decides is whether the limiter's time (the high-water mark)
// was raised 2^31 ms past the reservation, not the key's cells.
func TestAudit51CancelAfter2p31msUnobserved(t *testing.T) {
	l, clk := a51Slow(t)
	r := l.ReserveN(clk.Now(), "k", 60)
	clk.Advance(26 * 24 * time.Hour)
	r.Cancel()
	if got := l.Tokens("k"); math.Abs(got-26) > 1e-3 {
		t.Errorf("tokens %.4f want 26", got)
	}
}
