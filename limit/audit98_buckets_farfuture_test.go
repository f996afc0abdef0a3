package limit_test

import (
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// a98bkLineTime is the first millisecond after New that the Buckets
// engine's 47-bit line time cannot hold (internal/bucket/layout.go,
// lwMask: "47 bits, 4,400 years of ms").
const a98bkLineTime = int64(1) << 47

// TestAudit98BucketsDocumentedTimeStopsAfter47Bits (audit 98; documented
// at stop 59, the text below says what was wrong; limit's doc now states
// the Buckets engine's 4,460-year horizon, and the test asserts both
// engines agree inside it and the documented behaviour past it).
// TestAudit98BucketsFindingTimeStopsAfter47Bits: the Buckets engine keeps
// every time as milliseconds after New in 47 bits (a line's lw) and clamps
// a later time to 2^47 - 1 ms (Engine.rel), about 4,460 years after New.
// From there on time stands still for every key: a debt taken after it
// never drains, a key that took its burst is denied forever, and the
// Decision's RetryAfter (100 ms for one token at 10/s) names a retry that
// is denied. A fake clock reaches it in one Set; the count-min engine,
// built the same way, drains as the model says. Repro: limit.New(10, 20,
// WithClock(fake), WithSeed(1)) (Buckets); fake.Set(start + 2^47 + 10 s);
// AllowN(now, k, 20) true; after 100 ms (its RetryAfter), 10 s and 1 h:
// AllowN(now, k, 1) false (RetryAfter 100 ms each time); on
// WithEngine(CountMin) all true. And a reservation's time to act is
// counted from the clamped time, early by as much as the clock is past
// it: right after the burst, ReserveN(now, k, 10) is OK with Delay 0
// (the count-min: 1 s), so its requests act at once, 1 s before the
// key's own bucket lets them.
//
// Contradicts limit/doc.go:9-10 ("the debt drains at Limit per second and
// never goes below 0"), limit/doc.go:126-128 ("RetryAfter predicts the
// limiter's own next decision to the millisecond: a retry at
// t+RetryAfter is admitted"), limit/reserve.go:105-106 (ReserveN "returns
// a Reservation whose Delay says when the requests may act (debt drained
// back to the burst)"), limit/doc.go:154-157 ("The durations of a
// Decision and a Reservation ... are exact for a key alone in its cells
// and only late, never early") and limit/doc.go:71-72 ("Both engines give
// the same decisions for a key alone in its cells"); no doc states the
// engine's time range as a limit of package limit (only docs/design.md's
// "lw keeps 47 bits, 4,400 years of ms" about the line header).
func TestAudit98BucketsDocumentedTimeStopsAfter47Bits(t *testing.T) {
	const start = 1_700_000_000_000
	for _, eng := range []limit.Engine{limit.CountMin, limit.Buckets} {
		for _, far := range []int64{a98bkLineTime - 2_000, a98bkLineTime + 10_000, 4 * a98bkLineTime} {
			clk := limittest.NewFakeClock()
			clk.Set(start)
			l, err := limit.New(10, 20, limit.WithClock(clk), limit.WithSeed(1), limit.WithEngine(eng))
			if err != nil {
				t.Fatal(err)
			}
			clk.Set(start + far)
			if !l.AllowN(l.Now(), "k", 20) {
				t.Fatalf("%v, %d ms after New: a fresh key's burst denied", eng, far)
			}
			now := l.Now()
			d := l.DecideN(now, "k", 1)
			if d.Allowed || d.RetryAfter != 100*time.Millisecond {
				t.Fatalf("%v, %d ms after New: right after the burst: %+v; want denied, RetryAfter 100ms", eng, far, d)
			}
			past := eng == limit.Buckets && far > a98bkLineTime
			r := l.ReserveN(now, "k", 10)
			if past {
				// Documented: time stops at the horizon; Delay from it.
				if !r.OK() || r.DelayFrom(now) != 0 {
					t.Errorf("%v, %d ms after New (past the horizon): ReserveN(10): OK %v, Delay %v; limit's doc: measured from the horizon, 0", eng, far, r.OK(), r.DelayFrom(now))
				}
				r.Cancel()
				clk.Advance(time.Hour)
				if got := l.DecideN(l.Now(), "k", 1); got.Allowed {
					t.Errorf("%v, %d ms after New (past the horizon): an hour after the burst one token admitted; limit's doc: debts stop draining there", eng, far)
				}
				continue
			}
			if !r.OK() || r.DelayFrom(now) != time.Second {
				t.Errorf("%v, %d ms after New: ReserveN(10) right after the burst: OK %v, Delay %v; want OK, 1s (the debt of 3 s drains to the burst's 2 s)", eng, far, r.OK(), r.DelayFrom(now))
			}
			r.Cancel() // nothing written since: the debt is the burst's again
			for _, wait := range []time.Duration{d.RetryAfter, 10 * time.Second, time.Hour} {
				clk.Advance(wait)
				if got := l.DecideN(l.Now(), "k", 1); !got.Allowed {
					t.Errorf("%v, %d ms after New: burst taken, then %v later one token is denied (%+v); the debt of 2 s should have drained", eng, far, wait, got)
					break
				}
			}
		}
	}
}
