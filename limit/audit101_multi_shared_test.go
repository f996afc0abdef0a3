package limit_test

import (
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// a101Engines are the two engines every Multi finding is checked on.
var a101Engines = []limit.Engine{limit.Buckets, limit.CountMin}

// TestAudit101MultiFixedSharedLimiterRetryAfterEarly (audit 101; fixed at stop 60, the text
// below says what was wrong; Multi's state counts the windows that are
// one limiter with one key together): one limiter as two
// windows of a Multi with one key (NewMulti(l, l), which Multi's doc
// supports: "windows that are one limiter with one key are read with all
// of their costs"). limit/multi.go, DecideKeys: "RetryAfter (on a
// denial) the time when every window admits the request, so a retry at
// t+RetryAfter is admitted by all of them (if nothing else happens to
// the keys) and one 1 ms earlier is not". The precheck sums the two
// windows' costs (the request takes 2 tokens of l), but the Decision's
// durations come from Limiter.state, which reads each window alone with
// its own cost: each window "fits" one token, so RetryAfter is 0 and
// the "raced a drain" fallback reports 1 ms.
//
// Repro: New(1, 2), Multi(l, l). Admit one request (debt 2). After 1 s
// (debt 1), a request is denied (1 + 2 > 2) with RetryAfter 1 ms; a
// retry then is denied again (RetryAfter 1 ms again), and only a retry
// 1 s after the denial is admitted: RetryAfter is early by 999 ms, and a
// client obeying it spins at 1 ms. Both engines.
func TestAudit101MultiFixedSharedLimiterRetryAfterEarly(t *testing.T) {
	for _, e := range a101Engines {
		t.Run(e.String(), func(t *testing.T) {
			clk := limittest.NewFakeClock()
			clk.Set(1 << 30)
			l := limit.MustNew(1, 2, limit.WithClock(clk), limit.WithEngine(e), limit.WithSeed(1))
			m, err := limit.NewMulti(l, l)
			if err != nil {
				t.Fatal(err)
			}
			if d := m.DecideKeys(clk.Now(), 1, "k"); !d.Allowed {
				t.Fatalf("setup: first request denied: %+v", d)
			}
			clk.Advance(time.Second)
			t1 := clk.Now()
			d := m.DecideKeys(t1, 1, "k")
			if d.Allowed {
				t.Fatalf("setup: admitted 2 tokens against a debt of 1 of a burst of 2: %+v", d)
			}
			ra := d.RetryAfter
			// The truth: the key needs its whole debt (1 token, 1 s) drained.
			const want = time.Second
			clk.Set(t1.Add(ra).UnixMilli())
			retry := m.DecideKeys(t1.Add(ra), 1, "k")
			if !retry.Allowed || ra != want {
				t.Errorf("denied with RetryAfter %v (want %v); a retry at t+RetryAfter: Allowed=%v "+
					"(multi.go DecideKeys: \"a retry at t+RetryAfter is admitted by all of them ... and one 1 ms earlier is not\")",
					ra, want, retry.Allowed)
			}
		})
	}
}

// TestAudit101MultiFixedSharedLimiterRemainingOverstated (audit 101; fixed at stop 60, the text
// below says what was wrong; Multi's state counts the windows that are
// one limiter with one key together): the same Multi(l, l)
// on an admission. limit/decision.go, Decision.Remaining: "how many
// one-token requests the key could make right after this decision";
// multi.go: "The Decision is the conjunction of the windows': Remaining
// is the least". Each window reports l's Remaining alone (burst - debt),
// but every request of the Multi takes 2 tokens of l, so the key can
// make only half as many.
//
// Repro: New(1, 4), Multi(l, l), fresh key: the first request is
// admitted (debt 2) with Remaining 2; the next request is admitted (debt
// 4) and the one after is denied: 1 more request, not 2. NextAfter
// ("the time until Remaining grows by one") is off the same way. Both
// engines.
func TestAudit101MultiFixedSharedLimiterRemainingOverstated(t *testing.T) {
	for _, e := range a101Engines {
		t.Run(e.String(), func(t *testing.T) {
			clk := limittest.NewFakeClock()
			clk.Set(1 << 30)
			l := limit.MustNew(1, 4, limit.WithClock(clk), limit.WithEngine(e), limit.WithSeed(1))
			m, _ := limit.NewMulti(l, l)
			now := clk.Now()
			d := m.DecideKeys(now, 1, "k")
			if !d.Allowed {
				t.Fatalf("setup: first request denied: %+v", d)
			}
			more := 0
			for m.DecideKeys(now, 1, "k").Allowed {
				more++
			}
			if d.Remaining != more {
				t.Errorf("Remaining %d after the first request, but the key made %d more one-token requests "+
					"(Decision.Remaining: \"how many one-token requests the key could make right after this decision\")",
					d.Remaining, more)
			}
		})
	}
}

// TestAudit101MultiFixedSharedLimiterNeverMissing (audit 101; fixed at stop 60, the text
// below says what was wrong; Multi's state counts the windows that are
// one limiter with one key together): the same root cause for a
// request no retry can ever admit. limit/decision.go, Decision.Never:
// "set when n > burst: the request can never be admitted and must not be
// retried"; multi.go DecideKeys: "Never if n exceeds any window's burst",
// and RetryAfter "the time when every window admits the request, so a
// retry at t+RetryAfter is admitted". In Multi(l, l) with one key a
// request of n takes 2n of l's burst (the precheck sums the costs), so
// 2n > burst >= n can never be admitted; but each window alone fits n,
// so the Decision says Never false with a finite RetryAfter, and a
// client that obeys it retries forever.
//
// Repro: New(1, 2), Multi(l, l), fresh key, n = 2: denied (2 + 2 > 2)
// with Never false and RetryAfter 1 ms; retrying at every RetryAfter
// for a minute of fake time never admits it. Both engines.
func TestAudit101MultiFixedSharedLimiterNeverMissing(t *testing.T) {
	for _, e := range a101Engines {
		t.Run(e.String(), func(t *testing.T) {
			clk := limittest.NewFakeClock()
			clk.Set(1 << 30)
			l := limit.MustNew(1, 2, limit.WithClock(clk), limit.WithEngine(e), limit.WithSeed(1))
			m, _ := limit.NewMulti(l, l)
			start := clk.Now()
			d := m.DecideKeys(start, 2, "k")
			if d.Allowed {
				t.Fatalf("admitted 2 x 2 against a burst of 2: %+v", d)
			}
			if d.Never {
				return // the contract holds
			}
			tries := 0
			for !d.Allowed && !d.Never && clk.Now().Sub(start) < time.Minute && tries < 1000 {
				if d.RetryAfter == limit.InfDuration {
					break
				}
				clk.Advance(d.RetryAfter)
				d = m.DecideKeys(clk.Now(), 2, "k")
				tries++
			}
			if !d.Allowed {
				t.Errorf("a request of 2 on Multi(l, l) with burst 2 can never be admitted, yet its Decision said Never=false "+
					"with RetryAfter; %d retries at RetryAfter over %v were all denied (last %+v)",
					tries, clk.Now().Sub(start), d)
			}
		})
	}
}
