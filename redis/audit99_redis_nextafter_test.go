package redis

// Audit 99: review of the redis NextAfter changes (a5960ad, be468c1).
// decide.go, DecideContext: "NextAfter is the time until Remaining grows
// by one, rounded up to the millisecond"; limit.Decision: "NextAfter is
// the time until Remaining grows by one (the next whole token)". Each
// test peeks (AllowN of 0: reads only) at +NextAfter, where Remaining
// must have grown by one whole token (never early), and, where the wait
// is exact, at +NextAfter-1ms, where it must not have.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// audit99Peek peeks key at the limiter's clock and reports its
// Remaining.
func audit99Peek(t *testing.T, l *Limiter, ctx context.Context, key string) float64 {
	t.Helper()
	d, err := l.AllowN(ctx, key, 0)
	if !d.Allowed || err != nil && !errors.Is(err, ErrDegraded) {
		t.Fatalf("peek: %+v, %v", d, err)
	}
	return d.Remaining
}

// TestAudit99RedisNextAfterFixedServerEarly (audit 99; fixed at stop 59, the text below says what was
// wrong; the token path widens its quotient by 2^-40 before the ceiling,
// and the LocalFallback finds the token as Remaining reads its cells): the server path's
// NextAfter for limits whose NextAfter is worked out in float64 tokens
// (no exact units of a whole Burst) is 1 ms early.
//   - 10/s x 5.1 (exact units of 1/100 token, but 5.1 x 100 is
//     509.99999999999994, not whole: the token path). DecideContext(1)
//     on a fresh key: Remaining 4 (4.1 left), NextAfter 90 ms. At +90 ms
//     the server's Remaining is 4.999999999999999 and DecideContext(5) is
//     denied with RetryAfter 1 ms: the whole token comes at 91 ms. The
//     quotient is 90.00000000000004 ms (ceil 91); the snap (be468c1) takes
//     90 because its guard r + 90 x 10/1000 >= 5 is itself rounded:
//     4.0999999999999996 + 0.9 rounds to 5.
//   - 0.6/s x 704187 (counts tokens: Burst past 2^24 units). AllowN of
//     631439.75, then DecideContext(1): Remaining 72746 (72746.25 left),
//     NextAfter 1250 ms. (72747 - 72746.25)/0.6 x 1000 comes out exactly
//     1250.0 while the float64 rate 0.59999999999999998 needs a hair more:
//     at +1250 ms Remaining is 72746.99999999988 and DecideContext(72747)
//     is denied with RetryAfter 1 ms. No snap involved: ceil of a
//     quotient rounded down onto a whole ms.
func TestAudit99RedisNextAfterFixedServerEarly(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	ctx := context.Background()
	for _, c := range []struct {
		lim  Limit
		pre  float64
		rem  int
		next time.Duration
	}{
		{PerSecond(10, 5.1), 0, 4, 91 * time.Millisecond},
		{PerSecond(0.6, 704187), 631439.75, 72746, 1251 * time.Millisecond},
	} {
		t.Run(fmt.Sprintf("%v/s x %v", c.lim.Rate, c.lim.Burst), func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			clk.Set(1_700_000_000_000)
			l := e.limiter(t, LimiterConfig{Name: fmt.Sprintf("a99srv%v", c.lim.Rate), Limit: c.lim, Clock: clk, CellsPerLevel: 64})
			if c.pre > 0 {
				if d, err := l.AllowN(ctx, "k", c.pre); err != nil || !d.Allowed {
					t.Fatalf("AllowN(%v): %+v, %v", c.pre, d, err)
				}
			}
			d, err := l.DecideContext(ctx, "k", 1)
			if err != nil || !d.Allowed || d.Remaining != c.rem {
				t.Fatalf("DecideContext(1): %+v, %v; want admitted, Remaining %d", d, err, c.rem)
			}
			clk.Advance(d.NextAfter)
			r := audit99Peek(t, l, ctx, "k")
			again, _ := l.DecideContext(ctx, "k", c.rem+1)
			if math.Floor(r) < float64(c.rem+1) || d.NextAfter != c.next {
				t.Errorf("%v/s x %v: DecideContext(1) %+v; at +NextAfter (%v) Remaining is %v and DecideContext(%d) is %+v; want NextAfter %v, the first ms at which Remaining reaches %d (decide.go: \"NextAfter is the time until Remaining grows by one, rounded up to the millisecond\")",
					c.lim.Rate, c.lim.Burst, d, d.NextAfter, r, c.rem+1, again, c.next, c.rem+1)
			}
		})
	}
}

// TestAudit99RedisNextAfterFixedFallbackEarly (audit 99; fixed at stop 59, the text below says what was
// wrong; the token path widens its quotient by 2^-40 before the ceiling,
// and the LocalFallback finds the token as Remaining reads its cells): the LocalFallback's
// NextAfter (be468c1: found on its cells, o.FitsIn(floor(Remaining)+1,
// Burst/N, ...)) is 1 ms early where the search's test, debt + next <=
// Burst/N (what TryUpdate admits), and Remaining's, Burst/N - debt >=
// next, round differently. 0.6/s x 12.7, one instance, the round trip
// failing: DecideContext(8) on a fresh key: Remaining 4 (4.7 left),
// NextAfter 500 ms. At +500 ms the debt reads 7.7000000000000002 (the
// float64 rate 0.59999999999999998 drains a hair under 0.3 in 500 ms),
// 7.7000000000000002 + 5 rounds (a tie, to even) to 12.7, so the search
// says the 5th token fits; but 12.7 - 7.7000000000000002 is
// 4.999999999999999: Remaining is still 4 there (the same call's
// DecideContext(5) is admitted all the same). Remaining reaches 5 at
// +501 ms. A seeded sweep of 300 fallback configurations (N = 1..3,
// irrational and decimal rates, fractional Bursts) found 295 of 98,186
// NextAfters early this way and 3 late (Remaining already grown at
// NextAfter - 1 ms: 3/s x 15.6 over 2 instances, 0.7/s x 20.2 over 3).
func TestAudit99RedisNextAfterFixedFallbackEarly(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	clk := sketchtest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	l := e.limiter(t, LimiterConfig{Name: "a99fbearly", Limit: PerSecond(0.6, 12.7), Clock: clk, Policy: LocalFallback})
	down, cancel := context.WithCancel(context.Background())
	cancel()
	d, err := l.DecideContext(down, "k", 8)
	if !errors.Is(err, ErrDegraded) || !d.Allowed || d.Remaining != 4 {
		t.Fatalf("fallback DecideContext(8): %+v, %v; want admitted, Remaining 4", d, err)
	}
	clk.Advance(d.NextAfter)
	if r := audit99Peek(t, l, down, "k"); math.Floor(r) < 5 || d.NextAfter != 501*time.Millisecond {
		t.Errorf("0.6/s x 12.7, LocalFallback: DecideContext(8) %+v; at +NextAfter (%v) Remaining is %v; want NextAfter 501ms, the first ms at which Remaining reaches 5 (decide.go: \"NextAfter is the time until Remaining grows by one, rounded up to the millisecond\")",
			d, d.NextAfter, r)
	}
}

// TestAudit99RedisNextAfterFixedFallbackHTTPT (audit 99; fixed at stop 59, the text below says what was
// wrong; the token path widens its quotient by 2^-40 before the ceiling,
// and the LocalFallback finds the token as Remaining reads its cells): the same early
// NextAfter reaches httplimit's RateLimit t (fields.go: "t the seconds
// until additional quota is available (the next whole token: NextAfter
// rounded up)") where it lands on a whole second. 0.3/s x 12.7, the
// LocalFallback, a request of cost 8 on a fresh key: NextAfter 1 s,
// RateLimit r=4;t=1; at +1 s the fallback's Remaining is
// 4.999999999999999, the 5th token comes at 1.001 s: t should be 2.
func TestAudit99RedisNextAfterFixedFallbackHTTPT(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	clk := sketchtest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	l := e.limiter(t, LimiterConfig{Name: "a99fbt", Limit: PerSecond(0.3, 12.7), Clock: clk, Policy: LocalFallback})
	h := httplimit.Wrap(l, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}),
		httplimit.WithKey(func(*http.Request) (string, error) { return "k", nil }),
		httplimit.WithCost(func(*http.Request) int { return 8 }))
	down, cancel := context.WithCancel(context.Background())
	cancel()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequestWithContext(down, "GET", "/", nil))
	clk.Advance(time.Second)
	r := audit99Peek(t, l, down, "k")
	if got := w.Header().Get("RateLimit"); w.Code != 200 || got != `"a99fbt";r=4;t=2` {
		t.Errorf("0.3/s x 12.7, LocalFallback, cost 8: %d RateLimit %q; at +1 s Remaining is %v (the 5th token at 1.001 s); want %q (fields.go: t \"the next whole token: NextAfter rounded up\")",
			w.Code, got, r, `"a99fbt";r=4;t=2`)
	}
}

// TestAudit99RedisFallbackNextAfterLag: after LimiterConfig.Clock steps
// back 1 s, the LocalFallback's NextAfter carries the lag (its waits run
// from its high-water time: limiter.go's wait(), "later(..., lag)"), so
// it is never early: on a denial (10/s x 5, the key emptied before the
// step) NextAfter is 1.1 s, RetryAfter too; on an admission of a fresh
// key (3 of 5) NextAfter is 1.1 s. At +NextAfter - 1 ms Remaining has not
// grown, at +NextAfter it has. (docs/distributed.md, "Waits from a clock
// that stepped back", still says DecideContext's NextAfter "can be early
// by it" since the client computes it "without knowing the lag": no
// longer so for the LocalFallback's.)
func TestAudit99RedisFallbackNextAfterLag(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	const t0 = 1_700_000_000_000
	clk := sketchtest.NewFakeClock()
	clk.Set(t0)
	l := e.limiter(t, LimiterConfig{Name: "a99fblag", Limit: PerSecond(10, 5), Clock: clk, Policy: LocalFallback})
	down, cancel := context.WithCancel(context.Background())
	cancel()
	if d, err := l.DecideContext(down, "k", 5); !errors.Is(err, ErrDegraded) || !d.Allowed || d.NextAfter != 100*time.Millisecond {
		t.Fatalf("DecideContext(5): %+v, %v", d, err)
	}
	for _, c := range []struct {
		key     string
		n, rem  int
		allowed bool
	}{
		{"k", 1, 0, false},
		{"j", 3, 2, true},
	} {
		clk.Set(clk.NowMillis() - 1000) // 1 s behind the fallback's time
		d, err := l.DecideContext(down, c.key, c.n)
		if !errors.Is(err, ErrDegraded) || d.Allowed != c.allowed || d.Remaining != c.rem || d.NextAfter != 1100*time.Millisecond ||
			!c.allowed && d.RetryAfter != 1100*time.Millisecond {
			t.Fatalf("1 s behind, DecideContext(%s, %d): %+v, %v; want Remaining %d, NextAfter 1.1s (100 ms and the lag)", c.key, c.n, d, err, c.rem)
		}
		clk.Advance(d.NextAfter - time.Millisecond)
		if r := audit99Peek(t, l, down, c.key); math.Floor(r) != float64(c.rem) {
			t.Errorf("%s: at +NextAfter-1ms Remaining %v; want %d", c.key, r, c.rem)
		}
		clk.Advance(time.Millisecond)
		if r := audit99Peek(t, l, down, c.key); math.Floor(r) != float64(c.rem+1) {
			t.Errorf("%s: at +NextAfter Remaining %v; want %d", c.key, r, c.rem+1)
		}
	}
}

// TestAudit99RedisFallbackNeverAndCap: over 3 instances. 9/s x 7.5 (3/s
// x 2.5 locally): a request above Burst (8) is Never and carries the
// fallback's NextAfter (decide.go: "under LocalFallback with the
// fallback's NextAfter"), the same as the admission just before it,
// and it is exact. 10/s x 100 (3.333/s x 33.333 locally, a Burst/N no
// float32 holds): a key filled to the cap (AllowN of Burst/N) is denied
// one token with NextAfter = RetryAfter, exact on the capped cell.
func TestAudit99RedisFallbackNeverAndCap(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	down, cancel := context.WithCancel(context.Background())
	cancel()
	check := func(t *testing.T, l *Limiter, clk *sketchtest.FakeClock, d limit.Decision) {
		t.Helper()
		clk.Advance(d.NextAfter - time.Millisecond)
		if r := audit99Peek(t, l, down, "k"); math.Floor(r) != float64(d.Remaining) {
			t.Errorf("%+v: at +NextAfter-1ms Remaining %v", d, r)
		}
		clk.Advance(time.Millisecond)
		if r := audit99Peek(t, l, down, "k"); math.Floor(r) != float64(d.Remaining+1) {
			t.Errorf("%+v: at +NextAfter Remaining %v", d, r)
		}
	}
	t.Run("never", func(t *testing.T) {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_700_000_000_000)
		l := e.limiter(t, LimiterConfig{Name: "a99fbnever", Limit: PerSecond(9, 7.5), Clock: clk, Policy: LocalFallback, Instances: 3})
		a, err := l.DecideContext(down, "k", 2)
		if !errors.Is(err, ErrDegraded) || !a.Allowed || a.Remaining != 0 || a.NextAfter != 167*time.Millisecond {
			t.Fatalf("DecideContext(2): %+v, %v", a, err)
		}
		clk.Advance(50 * time.Millisecond)
		d, err := l.DecideContext(down, "k", 8)
		if !errors.Is(err, ErrDegraded) || d.Allowed || !d.Never || d.RetryAfter != limit.InfDuration || d.Burst != 2 ||
			d.Remaining != 0 || d.NextAfter != 117*time.Millisecond {
			t.Fatalf("DecideContext(8) above Burst 7.5: %+v, %v; want Never with the fallback's NextAfter 117ms", d, err)
		}
		check(t, l, clk, d)
	})
	t.Run("cap", func(t *testing.T) {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_700_000_000_000)
		l := e.limiter(t, LimiterConfig{Name: "a99fbcap", Limit: PerSecond(10, 100), Clock: clk, Policy: LocalFallback, Instances: 3})
		if d, err := l.AllowN(down, "k", divDown(100, 3)); !errors.Is(err, ErrDegraded) || !d.Allowed || d.Remaining != 0 { // the fallback's Burst, rounded down (audit 149)
			t.Fatalf("AllowN(Burst/N): %+v, %v", d, err)
		}
		d, err := l.DecideContext(down, "k", 1)
		if !errors.Is(err, ErrDegraded) || d.Allowed || d.Remaining != 0 || d.NextAfter != d.RetryAfter || d.NextAfter < 300*time.Millisecond {
			t.Fatalf("DecideContext(1) at the cap: %+v, %v", d, err)
		}
		check(t, l, clk, d)
	})
}

// TestAudit99RedisFallbackSweepWalk: 0.001/s x 1000 (a full bucket
// drains in 1e6 s, past core.SweepKeep, 2^29 ms: the fallback's waits
// carry 1 ms of sweep slack) over 1 and 2 instances, a seeded walk of
// steps of up to 2^30 ms (so the key's cells often go unwritten past
// SweepKeep, for the horizon sweep to re-stamp): every NextAfter is never early (Remaining grown at
// +NextAfter) and late by at most the slack (not grown at
// +NextAfter - 2 ms).
func TestAudit99RedisFallbackSweepWalk(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	down, cancel := context.WithCancel(context.Background())
	cancel()
	for _, n := range []uint32{1, 2} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			clk.Set(1_700_000_000_000)
			l := e.limiter(t, LimiterConfig{Name: "a99fbsweep", Limit: PerSecond(0.001, 1000), Clock: clk, Policy: LocalFallback, Instances: n})
			rng := rand.New(rand.NewPCG(99, uint64(n)))
			fbBurst := 1000 / float64(n)
			checked := 0
			for i := range 60 {
				clk.Advance(time.Duration(rng.Int64N(1<<30)) * time.Millisecond)
				k := 1 + rng.IntN(int(fbBurst))
				d, err := l.DecideContext(down, "k", k)
				if !errors.Is(err, ErrDegraded) {
					t.Fatalf("step %d: %v", i, err)
				}
				if d.NextAfter == 0 || !d.Allowed && d.NextAfter == d.RetryAfter {
					continue
				}
				checked++
				clk.Advance(d.NextAfter - 2*time.Millisecond)
				if r := audit99Peek(t, l, down, "k"); math.Floor(r) != float64(d.Remaining) {
					t.Fatalf("step %d, n=%d: %+v; at +NextAfter-2ms Remaining %v (late past the 1 ms slack)", i, k, d, r)
				}
				clk.Advance(2 * time.Millisecond)
				if r := audit99Peek(t, l, down, "k"); math.Floor(r) < float64(d.Remaining+1) {
					t.Fatalf("step %d, n=%d: %+v; at +NextAfter Remaining %v (early)", i, k, d, r)
				}
			}
			if checked < 10 {
				t.Fatalf("only %d NextAfters checked", checked)
			}
		})
	}
}

// TestAudit99RedisDenyCacheNextAfterFractionalBurst: 10/s x 5.1 (the
// token path: 5.1 x 100 units is not whole) with the deny cache. Five
// tokens taken, the server denies one (91 ms), then the cache does
// (CacheDenials 1): both say Remaining 0 and NextAfter 91 ms, at most
// RetryAfter; at +90 ms Remaining is still 0, at +91 ms it is 1.
func TestAudit99RedisDenyCacheNextAfterFractionalBurst(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	ctx := context.Background()
	clk := sketchtest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	l := e.limiter(t, LimiterConfig{Name: "a99cache", Limit: PerSecond(10, 5.1), Clock: clk, DenyCacheCells: 64})
	if d, err := l.DecideContext(ctx, "k", 5); err != nil || !d.Allowed {
		t.Fatalf("DecideContext(5): %+v, %v", d, err)
	}
	var d limit.Decision
	for i := range 2 {
		var err error
		d, err = l.DecideContext(ctx, "k", 1)
		if err != nil || d.Allowed || d.Remaining != 0 || d.NextAfter != 91*time.Millisecond || d.RetryAfter != 91*time.Millisecond {
			t.Fatalf("denial %d: %+v, %v; want Remaining 0, NextAfter and RetryAfter 91ms", i, d, err)
		}
	}
	if s := l.Stats(); s.CacheDenials != 1 {
		t.Fatalf("CacheDenials %d; want 1", s.CacheDenials)
	}
	clk.Advance(d.NextAfter - time.Millisecond)
	if r := audit99Peek(t, l, ctx, "k"); r >= 1 {
		t.Errorf("at +90ms Remaining %v; want below 1", r)
	}
	clk.Advance(time.Millisecond)
	if r := audit99Peek(t, l, ctx, "k"); r < 1 {
		t.Errorf("at +91ms Remaining %v; want >= 1 (never early)", r)
	}
}
