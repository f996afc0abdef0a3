package limit_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// a146Ends are the clock readings (ms) the audit moves between.
var a146Ends = []int64{math.MinInt64, -1 << 40, -1, 0, 1 << 40, math.MaxInt64 - 1000, math.MaxInt64}

// a146New returns a limit.New(10, 20) on engine eng whose fake clock
// read start at New (opts added).
func a146New(t *testing.T, eng limit.Engine, start int64, opts ...limit.Option) (*limit.Limiter, *limittest.FakeClock) {
	t.Helper()
	clk := limittest.NewFakeClock()
	clk.Set(start)
	opts = append([]limit.Option{limit.WithClock(clk), limit.WithEngine(eng), limit.WithSeed(146)}, opts...)
	l, err := limit.New(10, 20, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return l, clk
}

// a146Drain counts the one-token admissions of key at the clock's
// reading (long form with the clock's own Now, or the short form), at
// most 100.
func a146Drain(l *limit.Limiter, clk *limittest.FakeClock, key string, short bool) int {
	n := 0
	for n < 100 {
		var ok bool
		if short {
			ok = l.Allow(key)
		} else {
			ok = l.AllowN(clk.Now(), key, 1)
		}
		if !ok {
			break
		}
		n++
	}
	return n
}

// TestAudit146FixedLongFormAtClockNowForgottenByShortForm (audit 146; fixed at stop 65, the text below
// says what was wrong): a count-min
// limiter built while its clock read MinInt64 ms (or within 292 years of
// it) whose clock then reads near MaxInt64 ms. Its key takes the whole
// burst through AllowN(clk.Now(), ...), the clock's own reading; at the
// same millisecond the short form Allow admits the burst again: 40
// admissions in one millisecond at limit.New(10, 20).
//
// limit/doc.go "Keys and time": "all keys share one time scale, so a t
// after the clock's reading counts as that reading ..., and a t before a
// time already used counts as that time"; a t equal to the reading is
// that reading. Observed: internal/core/clock.go convert: t.Sub(anchor)
// saturates (more than 292 years), so it falls back to
// addSat(anchorMs, wallMillisBetween(t, anchor)), and wallMillisBetween
// saturates the difference (2^64 - 1001 ms, beyond int64) at MaxInt64:
// the t converts to MinInt64 + MaxInt64 = -1 ms, not MaxInt64 - 1000.
// The long forms decide 2^63 ms in the past (the first one even moves
// the high-water mark there), and a short form at the real reading
// finds every cell drained. Fix: compute the sum, not the difference,
// saturated (clock.go:295-299: when t and the anchor are in time.Time's
// range, anchorMs + (t's ms - anchor's ms) in 128 bits (math/bits) or
// by checking whether the sum fits before saturating the difference).
func TestAudit146FixedLongFormAtClockNowForgottenByShortForm(t *testing.T) {
	for _, c := range [][2]int64{{math.MinInt64, math.MaxInt64 - 1000}, {math.MinInt64 + 1e12, math.MaxInt64 - 1e12}, {math.MinInt64, math.MaxInt64}} {
		l, clk := a146New(t, limit.CountMin, c[0])
		clk.Set(c[1])
		if n := a146Drain(l, clk, "k", false); n != 20 {
			t.Fatalf("New at %d ms, clock at %d ms: AllowN(clk.Now()) admitted %d, want the burst 20", c[0], c[1], n)
		}
		if n := a146Drain(l, clk, "k", true); n != 0 {
			t.Errorf("New at %d ms, clock at %d ms: burst 20 taken by AllowN(clk.Now()); at the same ms Allow admits %d more (Tokens %v, TokensAt(clk.Now()) %v); want 0",
				c[0], c[1], n, l.Tokens("k"), l.TokensAt(clk.Now(), "k"))
		}
	}
}

// TestAudit146FixedNowWrapsAtInt64Ends (audit 146; fixed at stop 65, the text below
// says what was wrong): Limiter.Now (and Tier.Now) of a
// limiter built while its clock read MinInt64 ms, once the clock reads
// MaxInt64 - 1000 ms, is a time 2^64 ms before the clock's: year
// -292275055 where limittest.FakeClock.Now says 292278994. A
// Reservation's DelayFrom(clk.Now()) is then 0 right after the burst
// (the debt needs 100 ms), and WaitN given a context whose deadline is a
// second before the clock's reading returns nil, admitting the request,
// instead of ErrPastDeadline.
//
// limit/limit.go:497 "Now returns the limiter clock's current reading as
// a time.Time"; limit/clock.go: "Now must be the time.Time of
// NowMillis's reading"; reserve.go DelayFrom: "how long after t the
// reserved requests may act"; WaitN: "a *WaitError before waiting (... a
// wait past the context's deadline ...)". Observed: Now's year
// -292275055; DelayFrom(clk.Now()) = 0s; WaitN = nil. Cause:
// internal/core/clock.go:357 Time: d := ms - tb.anchorMs wraps (2^64 -
// 1001 ms reads as -1001) into Duration range, so anchor.Add(-1001 ms).
// Fix: detect the overflow ((ms >= anchorMs) != (d >= 0)) and take the
// wall-clock branch, time.UnixMilli(ms - anchorMs + anchor.UnixMilli())
// in modular arithmetic, as the branch already does.
func TestAudit146FixedNowWrapsAtInt64Ends(t *testing.T) {
	l, clk := a146New(t, limit.CountMin, math.MinInt64)
	clk.Set(math.MaxInt64 - 1000)
	if got, want := l.Now(), clk.Now(); !got.Equal(want) {
		t.Errorf("New at MinInt64 ms, clock at MaxInt64-1000 ms: Limiter.Now() = %v, the clock's Now() = %v", got, want)
	}
	tier, err := l.Tier("t", 10, 20)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tier.Now(), clk.Now(); !got.Equal(want) {
		t.Errorf("Tier.Now() = %v, the clock's Now() = %v", got, want)
	}
	if !l.AllowN(l.Now(), "k", 20) {
		t.Fatal("a fresh key's burst denied")
	}
	r := l.ReserveN(l.Now(), "k", 1)
	if !r.OK() {
		t.Fatal("ReserveN(1) after the burst not OK")
	}
	if d := r.DelayFrom(clk.Now()); d != 100*time.Millisecond {
		t.Errorf("a reservation of 1 right after the burst: DelayFrom(clk.Now()) = %v (Delay %v), want 100ms", d, r.Delay())
	}
	ctx, cancel := context.WithDeadline(context.Background(), clk.Now().Add(-time.Second))
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- l.WaitN(ctx, "fresh", 1) }()
	select {
	case err := <-done:
		if !errors.Is(err, limit.ErrPastDeadline) {
			t.Errorf("WaitN with a deadline 1 s before the clock's reading: %v, want ErrPastDeadline", err)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("WaitN with a deadline 1 s before the clock's reading: still waiting after 5 s, want ErrPastDeadline at once")
	}
}

// TestAudit146ClockJumpsHold: on both engines, with New at each end value
// and the clock moved to every other one, where the limiter's own rules
// say what a key holds: a key takes exactly its burst, then is denied
// with RetryAfter 100 ms, ResetAfter 2 s, Tokens 0; after a move forward
// of at least 2 s the burst is back, after a move back (zero elapsed)
// nothing is. Only pairs whose span fits int64 (the two findings above
// cover the rest) and, for Buckets, within its documented 2^47 ms
// horizon.
func TestAudit146ClockJumpsHold(t *testing.T) {
	for _, eng := range []limit.Engine{limit.CountMin, limit.Buckets} {
		for _, start := range a146Ends {
			for _, to := range a146Ends {
				if to == start {
					continue
				}
				if math.Abs(float64(to)-float64(start)) > 9e18 {
					continue // a span beyond int64: the findings above
				}
				if eng == limit.Buckets && (to-start > 1<<46 || start-to > 1<<46) {
					continue // the documented horizon
				}
				l, clk := a146New(t, eng, start)
				// The burst at start + 5 s (or start, at the end).
				first := start
				if start < math.MaxInt64-10_000 {
					first = start + 5000
				}
				clk.Set(first)
				if n := a146Drain(l, clk, "k", true); n != 20 {
					t.Fatalf("%v New %d, at %d: admitted %d, want 20", eng, start, first, n)
				}
				clk.Set(to)
				n := a146Drain(l, clk, "k", false) + a146Drain(l, clk, "k", true)
				switch {
				case to < first:
					if n != 0 {
						t.Errorf("%v New %d, burst at %d, clock stepped back to %d: admitted %d, want 0 (zero elapsed)", eng, start, first, to, n)
					}
				case to-first >= 2000:
					if n != 20 {
						t.Errorf("%v New %d, burst at %d, clock moved to %d: admitted %d, want 20", eng, start, first, to, n)
					}
				}
				// After a step back the short form's durations count from
				// the clock's reading: longer by the lag (doc.go "Keys and
				// time").
				lag := time.Duration(0)
				if to < first {
					lag = time.Duration(first-to) * time.Millisecond
				}
				d := l.Decide("k")
				if d.Allowed || d.RetryAfter != lag+100*time.Millisecond || d.ResetAfter != lag+2*time.Second || d.Remaining != 0 {
					t.Errorf("%v New %d, at %d after the burst: %+v; want denied, RetryAfter %v, ResetAfter %v", eng, start, to, d, lag+100*time.Millisecond, lag+2*time.Second)
				}
				if tok := l.Tokens("k"); tok != 0 {
					t.Errorf("%v New %d, at %d after the burst: Tokens %v, want 0", eng, start, to, tok)
				}
			}
		}
	}
}

// TestAudit146WaitDeadlinesAtEndsHold: WaitN on a clock near the end of
// int64 ms (New 1000 ms before it, or at 0, 2^40 and -2^40 with the
// clock moved there: spans within int64), on both engines where the
// span is within the Buckets horizon: with the burst spent, a deadline
// 50 ms ahead is ErrPastDeadline at once (the token needs 100 ms), one
// at time.Unix(2^62, 0) (year 146 billion) waits
// for the fake timer and returns nil once the clock moves 100 ms, and a
// deadline a second behind the clock is ErrPastDeadline (or the
// context's own error where the deadline is before time.Now).
func TestAudit146WaitDeadlinesAtEndsHold(t *testing.T) {
	for _, eng := range []limit.Engine{limit.CountMin, limit.Buckets} {
		for _, c := range [][2]int64{{math.MaxInt64 - 100_000, math.MaxInt64 - 1000}, {-1 << 40, -1<<40 + 5000}, {1 << 40, 1<<40 + 5000}, {0, 5000}} {
			l, clk := a146New(t, eng, c[0])
			clk.Set(c[1])
			if n := a146Drain(l, clk, "k", true); n != 20 {
				t.Fatalf("%v at %d: admitted %d, want 20", eng, c[1], n)
			}
			for _, dl := range []time.Time{clk.Now().Add(50 * time.Millisecond), clk.Now().Add(-time.Second)} {
				ctx, cancel := context.WithDeadline(context.Background(), dl)
				// A deadline before the real time.Now is done already: the
				// context's own error then (it matches the same).
				if err := l.WaitN(ctx, "k", 1); !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("%v at %d: WaitN with the deadline at %v from the clock: %v, want ErrPastDeadline", eng, c[1], dl.Sub(clk.Now()), err)
				}
				cancel()
			}
			ctx, cancel := context.WithDeadline(context.Background(), time.Unix(1<<62, 0))
			done := make(chan error, 1)
			go func() { done <- l.WaitN(ctx, "k", 1) }()
			waited := make(chan struct{})
			go func() { clk.BlockUntilTimers(1); close(waited) }()
			select {
			case <-waited:
			case err := <-done:
				t.Errorf("%v at %d: WaitN returned %v before the clock moved, want a wait of 100 ms", eng, c[1], err)
				cancel()
				continue
			case <-time.After(5 * time.Second):
				t.Fatalf("%v at %d: WaitN made no timer in 5 s", eng, c[1])
			}
			clk.Advance(100 * time.Millisecond)
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("%v at %d: WaitN after 100 ms: %v, want nil", eng, c[1], err)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("%v at %d: WaitN still waiting 5 s after the clock moved 100 ms", eng, c[1])
			}
			cancel()
		}
	}
}

// TestAudit146FarTimesAtEndsHold: on a clock at each end value (New at
// that reading, so the span fits), the full forms given a t far from it
// (the zero time.Time, 2^62 seconds either side, the ms ends of int64,
// the clock's own Now) admit exactly the burst, no more (a t ahead counts
// as the reading, one behind as the latest time used: no time passes),
// then deny with a RetryAfter of 100 ms from the reading (100 ms for a t
// ahead, at least 100 ms and at most InfDuration for one behind, never
// negative), Tokens 0, on both engines.
func TestAudit146FarTimesAtEndsHold(t *testing.T) {
	fars := []time.Time{{}, time.Unix(-1<<62, 0), time.Unix(1<<62, 0), time.UnixMilli(math.MinInt64), time.UnixMilli(math.MaxInt64)}
	for _, eng := range []limit.Engine{limit.CountMin, limit.Buckets} {
		for _, start := range a146Ends {
			for i, far := range fars {
				l, clk := a146New(t, eng, start, limit.WithCapacity(100, 0.01))
				n := 0
				for n < 100 && l.AllowN(far, "k", 1) {
					n++
				}
				if n != 20 {
					t.Errorf("%v clock %d, t %v: AllowN admitted %d, want the burst 20", eng, start, far, n)
				}
				if l.Allow("k") {
					t.Errorf("%v clock %d, t %v: after the burst the short form admits", eng, start, far)
				}
				d := l.DecideN(far, "k", 1)
				ahead := far.After(clk.Now())
				switch {
				case d.Allowed || d.RetryAfter < 100*time.Millisecond || d.RetryAfter > limit.InfDuration:
					t.Errorf("%v clock %d, t %v (#%d): DecideN after the burst %+v", eng, start, far, i, d)
				case ahead && d.RetryAfter != 100*time.Millisecond:
					t.Errorf("%v clock %d, t %v ahead of the clock: RetryAfter %v, want 100ms", eng, start, far, d.RetryAfter)
				}
				if tok := l.TokensAt(far, "k"); tok != 0 {
					t.Errorf("%v clock %d, t %v: TokensAt %v, want 0", eng, start, far, tok)
				}
				r := l.ReserveN(far, "k", 1)
				if !r.OK() || r.DelayFrom(clk.Now()) != 100*time.Millisecond {
					t.Errorf("%v clock %d, t %v: ReserveN after the burst: OK %v, DelayFrom(clk.Now()) %v, want 100ms", eng, start, far, r.OK(), r.DelayFrom(clk.Now()))
				}
			}
		}
	}
}
