package redis

import (
	"context"
	"errors"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// maxMs is the most whole ms a Duration holds.
const maxMs = int64(math.MaxInt64 / int64(time.Millisecond))

// TestAudit19LaterMsDuration: later leaves 0 and negatives as they are,
// adds the lag otherwise, saturating at the largest Duration, never
// below w; msDuration saturates and is exact below.
func TestAudit19LaterMsDuration(t *testing.T) {
	const maxD = time.Duration(math.MaxInt64)
	for _, c := range []struct{ w, lag, want time.Duration }{
		{0, time.Hour, 0},
		{-1, time.Hour, -1},
		{time.Millisecond, 0, time.Millisecond},
		{time.Millisecond, time.Second, time.Second + time.Millisecond},
		{maxD - time.Second, time.Second, maxD},
		{maxD - time.Second, time.Second + 1, maxD},
		{maxD, maxD, maxD},
		{1, maxD, maxD},
	} {
		if got := later(c.w, c.lag); got != c.want {
			t.Errorf("later(%d, %d) = %d; want %d", c.w, c.lag, got, c.want)
		}
	}
	for _, c := range []struct {
		ms   int64
		want time.Duration
	}{
		{0, 0}, {1, time.Millisecond}, {1 << 42, (1 << 42) * time.Millisecond},
		{maxMs, time.Duration(maxMs) * time.Millisecond},
		{maxMs + 1, maxD}, {1<<53 - 1, maxD}, {math.MaxInt64, maxD},
	} {
		if got := msDuration(c.ms); got != c.want {
			t.Errorf("msDuration(%d) = %d; want %d", c.ms, got, c.want)
		}
	}
}

// TestAudit19FixedLagWraps: localTime.lag converts the gap in ms to a
// Duration with an unchecked multiplication: a clock that stepped back
// more than 292 years (MaxInt64 ns) wraps, and past 2^64 ns (584.9
// years) the lag comes out as a small positive Duration. A clock that
// read a bogus future (year 2603 here) and was then corrected to 2026
// gives a lag of about 1 s instead of 585 years, so the local fallback's
// RetryAfter counts from a time 585 years off: early by all of it
// ("the same wait counts lag() more from the clock's own reading";
// Decision.RetryAfter "never early"). later and msDuration saturate, lag
// does not.
func TestAudit19FixedLagWraps(t *testing.T) {
	const year2026 = 1_780_000_000_000                            // ms since 1970
	gap := int64(math.MaxUint64/uint64(time.Millisecond)) + 1_000 // 2^64 ns in ms, plus 1 s
	clk := sketchtest.NewFakeClock()
	lt := newLocalTime(clk)
	clk.Set(year2026 + gap)
	lt.tb.NowMillis()
	clk.Set(year2026)
	if got := lt.lag(); got < 292*365*24*time.Hour {
		t.Errorf("lag() after the clock stepped back %d ms = %v; want the gap, saturated at the largest Duration", gap, got)
	}

	// The same through the local fallback.
	clk2 := sketchtest.NewFakeClock()
	clk2.Set(year2026 + gap)
	l, err := newLimiter(a19Down{}, LimiterConfig{Name: "a19wrap", Limit: PerSecond(10, 10), Policy: LocalFallback,
		ServerCheck: CheckSkip, Timeout: 2 * time.Second, Clock: clk2})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if d, err := l.AllowN(ctx, "k", 10); !errors.Is(err, ErrDegraded) || !d.Allowed {
		t.Fatalf("AllowN(10), server down = %+v, %v; want admitted by the fallback", d, err)
	}
	clk2.Set(year2026)
	d, err := l.AllowN(ctx, "k", 1)
	if !errors.Is(err, ErrDegraded) || d.Allowed {
		t.Fatalf("AllowN(1) = %+v, %v; want denied by the fallback", d, err)
	}
	if d.RetryAfter < 292*365*24*time.Hour || d.ResetAfter < 292*365*24*time.Hour {
		t.Errorf("fallback denial with the clock %d ms behind its time = %+v; want RetryAfter and ResetAfter saturated at the largest Duration (the fallback admits nothing for the whole lag)", gap, d)
	}
	// Honour the RetryAfter it answered: the fallback still denies.
	if d.RetryAfter > 0 && d.RetryAfter < time.Hour {
		clk2.Advance(d.RetryAfter)
		if d2, _ := l.AllowN(ctx, "k", 1); !d2.Allowed {
			t.Errorf("AllowN(1) after the RetryAfter %v it was answered = %+v; want admitted (never early)", d.RetryAfter, d2)
		}
	}
}

// TestAudit19LagLargeStepsSaturate: steps back between 292 and 584 years
// (the multiplication wraps negative) and forward any distance: the
// fallback's waits are never negative, and a step forward adds nothing.
func TestAudit19LagLargeStepsSaturate(t *testing.T) {
	ctx := context.Background()
	for i, back := range []int64{0, 1, 3_600_000, maxMs, maxMs + 1, 12e12, 18e12} {
		clk := sketchtest.NewFakeClock()
		clk.Set(1 << 62)
		l, err := newLimiter(a19Down{}, LimiterConfig{Name: "a19sat" + strconv.Itoa(i), Limit: PerSecond(10, 10), Policy: LocalFallback,
			ServerCheck: CheckSkip, Timeout: 2 * time.Second, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		if d, _ := l.AllowN(ctx, "k", 10); !d.Allowed {
			t.Fatalf("AllowN(10) = %+v", d)
		}
		clk.Set(1<<62 - back)
		d, _ := l.AllowN(ctx, "k", 1)
		if d.Allowed || d.RetryAfter < 0 || d.ResetAfter < 0 {
			t.Errorf("fallback AllowN(1) %d ms behind = %+v; want denied, waits >= 0", back, d)
		}
		if want := later(100*time.Millisecond, msDuration(back)); back < maxMs && d.RetryAfter != want {
			t.Errorf("fallback AllowN(1) %d ms behind = %+v; want RetryAfter %v", back, d, want)
		}
	}
}

// a19Down is a server that is down: every call fails at once.
type a19Down struct{}

var errA19Down = errors.New("a19: server down")

func (a19Down) fcall(context.Context, string, []string, []string) (string, error) {
	return "", errA19Down
}
func (a19Down) fcallStrings(context.Context, string, []string, []string) ([]string, error) {
	return nil, errA19Down
}
func (a19Down) nodes(context.Context) ([]node, error) { return nil, errA19Down }
func (a19Down) concurrent() int                       { return 1 }
func (a19Down) serverError(error) (string, bool)      { return "", false }

// TestAudit19ServerHugeStepBack: the server's waits after the clock
// stepped back by 292 years to 2^50 ms: saturated at the largest
// Duration, never negative, and no call fails.
func TestAudit19ServerHugeStepBack(t *testing.T) {
	a19HugeStepBack(t, []int64{maxMs - 50, maxMs + 1, 1 << 44, 1 << 50})
}

// TestAudit19FixedServerLagPast2p53: past 2^53 ms behind (285,000
// years; low severity) the server function's later() answers waits of
// 2^53 ms or more, which the client's decodeReply rejects as a
// malformed reply: every call on the sketch fails (ErrDegraded, the
// policy decides) until the clock catches up, and AllowN(0), which the
// server committed (admitted), is reported as FailClosed's denial. Where
// the search itself caps waits (BIG = 2^52 ms: none), the lag does not.
func TestAudit19FixedServerLagPast2p53(t *testing.T) {
	a19HugeStepBack(t, []int64{1<<53 - 1000, 1 << 56})
}

func a19HugeStepBack(t *testing.T, backs []int64) {
	e := newEnv(t, "rueidis", "standalone")
	ctx := context.Background()
	const year2026 = 1_780_000_000_000
	for i, back := range backs {
		t.Run(strconv.FormatInt(back, 10), func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			clk.Set(year2026 + back)
			l := e.limiter(t, LimiterConfig{Name: "a19hb" + strconv.Itoa(i) + t.Name(), Limit: PerSecond(10, 10), Clock: clk})
			if d, err := l.AllowN(ctx, "k", 10); err != nil || !d.Allowed {
				t.Fatalf("AllowN(10) at %d = %+v, %v", year2026+back, d, err)
			}
			clk.Set(year2026)
			for _, n := range []float64{1, 0} {
				d, err := l.AllowN(ctx, "k", n)
				if err != nil {
					t.Errorf("AllowN(%v) %d ms behind the string's time: %v", n, back, err)
					continue
				}
				if d.Allowed != (n == 0) || d.ResetAfter < time.Duration(min(back, maxMs))*time.Millisecond {
					t.Errorf("AllowN(%v) %d ms behind = %+v; want ResetAfter >= the lag (saturated)", n, back, d)
				}
				if n == 1 && d.RetryAfter < time.Duration(min(back, maxMs))*time.Millisecond {
					t.Errorf("AllowN(1) %d ms behind = %+v; want RetryAfter >= the lag (saturated)", back, d)
				}
			}
		})
	}
}
