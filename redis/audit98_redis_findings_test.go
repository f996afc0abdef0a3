package redis

// Audit 98: review of DecideContext's NextAfter (commit a5960ad). decide.go:
// "NextAfter is the time until Remaining grows by one, rounded up to the
// millisecond, and 0 when Remaining equals Burst"; limit.Decision:
// "NextAfter is the time until Remaining grows by one (the next whole
// token); 0 when the bucket is full (Remaining == Burst)".

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit98RedisDecideDocumentedFallbackNeverNextAfter (audit 98;
// documented at stop 59, the text below says what was wrong; decide.go
// now says "above its Burst/N but within Burst", and that a Never under
// LocalFallback carries the fallback's NextAfter; the test asserts it).
// decide.go,
// DecideContext: "FailClosed's denial, and LocalFallback's for n above
// its Burst/N, say no retry time, RetryAfter 0 and NextAfter 0, and are
// not Never; ...; a request above Burst is Never, as always, and its
// NextAfter is 0 there too". LocalFallback over 2 instances (10/s x 5:
// 5/s x 2.5 locally), the fallback holding 2 tokens of the key: n = 6 is
// above Burst/N and above Burst. It is Never (as the doc says), but its
// NextAfter is 100 ms, the fallback's next token (the code's blind flag
// covers only n within Burst). Either the doc's "for n above its
// Burst/N" should read "above its Burst/N but within Burst" (as
// Decision.RetryAfter's doc in limiter.go does) and "its NextAfter is 0
// there too" be limited to FailClosed, or NextAfter should be 0.
func TestAudit98RedisDecideDocumentedFallbackNeverNextAfter(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	clk := sketchtest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	l := e.limiter(t, LimiterConfig{Name: "a98fbnever", Limit: PerSecond(10, 5), Clock: clk, Policy: LocalFallback, Instances: 2})
	down, cancel := context.WithCancel(context.Background())
	cancel()
	if d, err := l.DecideContext(down, "k", 2); !errors.Is(err, ErrDegraded) || !d.Allowed {
		t.Fatalf("fallback's admission of 2: %+v, %v", d, err)
	}
	d, err := l.DecideContext(down, "k", 6)
	if !errors.Is(err, ErrDegraded) || d.Allowed || !d.Never || d.RetryAfter != limit.InfDuration {
		t.Fatalf("fallback, n = 6 > Burst 5: %+v, %v; want Never", d, err)
	}
	if d.NextAfter != 100*time.Millisecond {
		t.Errorf("LocalFallback's denial of n = 6 (above Burst/N 2.5 and Burst 5): %+v; NextAfter %v, want the fallback's next token, 100ms (decide.go)",
			d, d.NextAfter)
	}
}

// TestAudit98RedisNextAfterFixedSnapEarly (audit 98; fixed at stop 59,
// the text below says what was wrong; the snap is taken only where the
// drain over the snapped ms reaches the token). NextAfter 1 ms early where
// it is computed in float64 tokens (no exact units of a whole Burst) and
// the quotient lies just above a whole ms: common.SnapWhole, meant for a
// whole ms a few ulps off (audit 60's Every(13ms)), rounds a quotient
// that truly lies above it down to it.
//   - The server, 10/s x 2.3 (exact units, 100 a token, but Burst x 100 is
//     229.99999999999997, not whole: the token path). DecideContext(1)
//     on a fresh key: Remaining 1 (1.2999999999999998 left), NextAfter 70
//     ms; the next whole token needs 0.7000000000000002 token, 70.00000000000002
//     ms. At +70 ms the server's Remaining is 1.9999999999999998 and
//     DecideContext(2) is denied with RetryAfter 1 ms.
//   - The LocalFallback (one instance, the context cancelled), 10/s x
//     7.3: DecideContext(7) leaves 0.2999999999999998, NextAfter 70 ms;
//     at +70 ms the fallback's Remaining is 0.9999999999999991 and
//     DecideContext(1) is denied with RetryAfter 1 ms.
//
// decide.go: "NextAfter is the time until Remaining grows by one, rounded
// up to the millisecond"; docs/migrating.md (audit 86): the LocalFallback's
// and token-counting limits' NextAfter "never early". Found by a sweep of
// rates {10, 3, 7, Pi, 0.7, 1000/7} x Bursts 1.1 .. 9.8: 6 of the server's
// NextAfters (10/s x 2.3 and x 4.1) and 35 of the LocalFallback's early.
func TestAudit98RedisNextAfterFixedSnapEarly(t *testing.T) {
	for _, c := range []struct {
		name      string
		lim       Limit
		fallback  bool
		take, try int
	}{
		{"server", PerSecond(10, 2.3), false, 1, 2},
		{"fallback", PerSecond(10, 7.3), true, 7, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, "rueidis", "standalone")
			clk := sketchtest.NewFakeClock()
			clk.Set(1_700_000_000_000)
			l := e.limiter(t, LimiterConfig{Name: "a98snap", Limit: c.lim, Clock: clk, Policy: LocalFallback})
			ctx := context.Background()
			if c.fallback {
				down, cancel := context.WithCancel(ctx)
				cancel()
				ctx = down
			}
			d, err := l.DecideContext(ctx, "k", c.take)
			if (err == nil) == c.fallback || !d.Allowed || d.Remaining != c.try-1 || d.NextAfter <= 0 {
				t.Fatalf("DecideContext(%d): %+v, %v", c.take, d, err)
			}
			clk.Advance(d.NextAfter)
			p, _ := l.AllowN(ctx, "k", 0)
			again, _ := l.DecideContext(ctx, "k", c.try)
			if p.Remaining < float64(c.try) || !again.Allowed {
				t.Errorf("%v x %v: DecideContext(%d) %+v; at +NextAfter (%v) Remaining is %v and DecideContext(%d) is %+v; want Remaining grown to %d (decide.go: \"NextAfter is the time until Remaining grows by one, rounded up to the millisecond\")",
					c.lim.Rate, c.lim.Burst, c.take, d, d.NextAfter, p.Remaining, c.try, again, c.try)
			}
		})
	}
}

// TestAudit98RedisDecideDocumentedBurstAbove2p53 (audit 98; fixed and
// documented at stop 59, the text below says what was wrong; NextAfter
// now compares the uncapped Remaining and Burst, a token past 2^53 comes
// within 1 ms, and decide.go states the cap; the test asserts both).
// 1e10/s x 1e17 (a Burst
// the server takes: Hi within float32, Burst/Rate 1e7 s). decide.go:
// "Burst and Remaining are rounded down to whole tokens"; both are capped
// at 2^53 (wholeTokens), so a key owing half its Burst (Remaining about
// 5e16) reads Burst 9007199254740992 and Remaining 9007199254740992, and
// since a5960ad (NextAfter from out.Remaining < out.Burst) NextAfter 0,
// with ResetAfter 1388 h: limit.Decision says NextAfter is 0 "when the
// bucket is full (Remaining == Burst)", and this bucket is half empty.
func TestAudit98RedisDecideDocumentedBurstAbove2p53(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	clk := sketchtest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	l := e.limiter(t, LimiterConfig{Name: "a98big", Limit: PerSecond(1e10, 1e17), Clock: clk})
	ctx := context.Background()
	if d, err := l.AllowN(ctx, "k", 5e16); err != nil || !d.Allowed {
		t.Fatalf("AllowN(5e16): %+v, %v", d, err)
	}
	d, err := l.DecideContext(ctx, "k", 1)
	if err != nil || !d.Allowed || d.ResetAfter < time.Hour {
		t.Fatalf("DecideContext(1): %+v, %v", d, err)
	}
	if d.Burst != 1<<53 || d.Remaining != 1<<53 {
		t.Errorf("1e10/s x 1e17, 5e16 owed: DecideContext %+v; want Burst and Remaining capped at 2^53 (decide.go)", d)
	}
	if d.NextAfter != time.Millisecond {
		t.Errorf("1e10/s x 1e17, 5e16 owed (ResetAfter %v): NextAfter %v; want the next whole token, within the first ms: 1ms", d.ResetAfter, d.NextAfter)
	}
}
