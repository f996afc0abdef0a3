package limit_test

import (
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit13StaleSubMsRetryAfter: a Decision's durations are measured
// from the request's t; for a stale t with a sub-millisecond part the
// lag to the time decided at must round up, so that t + RetryAfter (and
// t + ResetAfter) is never early: a retry at t+RetryAfter is admitted
// (the exact bucket: 10/s, burst 1, one token taken at T0 frees at
// T0+100 ms). Mutation audit13 M09 (gap rounded down) admits nothing at
// t+RetryAfter.
func TestAudit13StaleSubMsRetryAfter(t *testing.T) {
	for _, eng := range []limit.Engine{limit.Buckets, limit.CountMin} {
		for _, frac := range []time.Duration{500 * time.Microsecond, 1, time.Millisecond - 1} {
			clk := sketchtest.NewFakeClock()
			const t0 = 1_000_000
			clk.Set(t0)
			l, err := limit.New(10, 1, limit.WithClock(clk), limit.WithSeed(7), limit.WithEngine(eng))
			if err != nil {
				t.Fatal(err)
			}
			if !l.Exact() {
				t.Fatalf("%v: not exact", eng)
			}
			if !l.Allow("k") {
				t.Fatalf("%v: first request denied", eng)
			}
			clk.Set(t0 + 10)
			l.Allow("other") // the limiter's time is now T0+10 ms
			stale := clk.Now().Add(-2*time.Millisecond - frac)
			d := l.DecideN(stale, "k", 1)
			if d.Allowed {
				t.Fatalf("%v: admitted with a token in debt", eng)
			}
			// The exact bucket: the debt of one token taken at T0 is 0 at
			// T0+100 ms. Measured from stale, the decision time T0+10 ms
			// lies 2 ms + frac after it, so the least whole-ms RetryAfter
			// that is never early is ceil(2 ms + frac) + 90 ms.
			want := 93 * time.Millisecond
			if d.RetryAfter != want || d.ResetAfter != want {
				t.Fatalf("%v frac %v: RetryAfter %v ResetAfter %v, want %v (never early, whole ms from t)", eng, frac, d.RetryAfter, d.ResetAfter, want)
			}
			// The instant stale+RetryAfter is at or after T0+100 ms.
			at := stale.Add(d.RetryAfter)
			free := time.UnixMilli(t0 + 100)
			if at.Before(free) {
				t.Fatalf("%v: t+RetryAfter %v is before the token frees at %v", eng, at, free)
			}
			clk.Set(t0 + 200)
			if l.PeekN(stale.Add(d.RetryAfter-time.Millisecond), "k", 1).Allowed {
				t.Fatalf("%v: admitted 1 ms before t+RetryAfter", eng)
			}
			if !l.AllowN(at, "k", 1) {
				t.Fatalf("%v frac %v: denied at t+RetryAfter (%v)", eng, frac, at)
			}
		}
	}
}
