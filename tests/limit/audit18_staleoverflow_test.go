package limit_test

// FINDING (audit18): these tests FAIL on the current code. A stale t's
// lag is added to every duration of a Decision without saturation
// (limit/decision.go, gap: g + time.Millisecond - 1 overflows when
// Time.Sub saturated; judge and fill: gap + l.ms(...) overflows when
// l.ms saturated at InfDuration). So DecideN/PeekN (and Multi's
// windows, through state) answer a denial with a negative RetryAfter
// (and negative ResetAfter, NextAfter) for t = time.Time{} (any lag past
// ~292 years), or for a stale t of an hour on a tiny rate, where the
// package otherwise saturates durations at InfDuration
// (TestAudit3PeerNoTruncation: "a duration too long for a time.Duration
// saturates instead of wrapping negative").

import (
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

func a18CheckNotNegative(t *testing.T, what string, d limit.Decision, atLeast time.Duration) {
	t.Helper()
	if d.Allowed {
		t.Fatalf("%s = %+v; want denied", what, d)
	}
	if d.RetryAfter < atLeast || d.ResetAfter < atLeast || d.NextAfter < atLeast {
		t.Errorf("%s = %+v; want every duration at least %v (saturating at InfDuration), never negative", what, d, atLeast)
	}
}

// TestAudit18StaleZeroTime: t = time.Time{} (a stale time whose lag
// does not fit a Duration).
func TestAudit18StaleZeroTime(t *testing.T) {
	for _, eng := range a18Engines {
		clk := limittest.NewFakeClock()
		clk.Set(1_700_000_000_000)
		l, err := limit.New(10, 10, limit.WithClock(clk), limit.WithEngine(eng), limit.WithSeed(1))
		if err != nil {
			t.Fatal(err)
		}
		if !l.AllowN(clk.Now(), "k", 10) {
			t.Fatal("burst denied")
		}
		for _, st := range []time.Time{{}, time.Unix(-1<<40, 0)} {
			a18CheckNotNegative(t, eng.String()+" DecideN(zero time)", l.DecideN(st, "k", 1), time.Hour)
			a18CheckNotNegative(t, eng.String()+" PeekN(zero time)", l.PeekN(st, "k", 1), time.Hour)
			m, _ := limit.NewMulti(l)
			a18CheckNotNegative(t, eng.String()+" Multi.DecideKeys(zero time)", m.DecideKeys(st, 1, "k"), time.Hour)
			if d := l.DecideN(st, "k", 11); !d.Never || d.ResetAfter < 0 || d.NextAfter < 0 {
				t.Errorf("%v DecideN(zero time, n > burst) = %+v; want Never, durations not negative", eng, d)
			}
		}
	}
}

// TestAudit18StaleTinyRate: a rate of one token per 10^10 s (CountMin;
// Auto picks it), a stale t by an hour: the wait saturates at
// InfDuration from the clock, and must not wrap when the lag is added.
func TestAudit18StaleTinyRate(t *testing.T) {
	for _, lim := range []limit.Limit{1e-10, limit.Every(time.Duration(1<<63 - 1))} {
		clk := limittest.NewFakeClock()
		clk.Set(1_700_000_000_000)
		l, err := limit.New(lim, 1, limit.WithClock(clk), limit.WithSeed(1))
		if err != nil {
			t.Fatal(err)
		}
		if !l.Allow("k") {
			t.Fatal("first request denied")
		}
		if d := l.Decide("k"); d.RetryAfter != limit.InfDuration {
			t.Fatalf("%v: Decide = %+v; want RetryAfter InfDuration (saturated)", lim, d)
		}
		a18CheckNotNegative(t, "DecideN(an hour stale)", l.DecideN(clk.Now().Add(-time.Hour), "k", 1), time.Hour)
	}
}
