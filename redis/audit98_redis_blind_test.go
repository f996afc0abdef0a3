package redis

// Audit 98: the blind flag of DecideContext (decide.go: "FailClosed's
// denial, and LocalFallback's for n above its Burst/N, say no retry time,
// RetryAfter 0 and NextAfter 0, and are not Never; ... a request above
// Burst is Never, as always, and its NextAfter is 0 there too"), per
// policy and n, with the round trip failing (a cancelled context), then
// the server answering again; httplimit's RateLimit field for a
// fractional Burst (fields.go: r the Decision's Remaining, t "the next
// whole token: NextAfter rounded up ..., left out when the bucket is
// full"); and every configuration error NewLimiter takes from a core
// sketch wrapping the core's *sketch.ConfigError (config.go,
// ErrInvalidConfig).

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit98RedisBlindPolicies: 10/s x 5, LocalFallback over 2
// instances (5/s x 2.5 locally). Each policy's Decision for n = 1, 2, 3
// (above Burst/N), 5 (Burst) and 6 (above Burst) with the round trip
// failing, then the server's (exact, Burst 5) for the same key.
func TestAudit98RedisBlindPolicies(t *testing.T) {
	forEachClient(t, audit98BlindPolicies)
}

func audit98BlindPolicies(t *testing.T, e *env) {
	const ms = time.Millisecond
	inf := limit.InfDuration
	type want = limit.Decision
	server := limit.Limit(10)
	local := limit.Limit(5)
	for _, c := range []struct {
		pol  Policy
		n    []int
		down []want // the policy's, in order, one key
	}{
		{FailClosed, []int{1, 2, 3, 5, 6}, []want{
			{Limit: server, Burst: 5}, {Limit: server, Burst: 5}, {Limit: server, Burst: 5}, {Limit: server, Burst: 5},
			{Limit: server, Burst: 5, Never: true, RetryAfter: inf},
		}},
		{FailOpen, []int{1, 2, 3, 5}, []want{
			{Allowed: true, Limit: server, Burst: 5, Remaining: 5}, {Allowed: true, Limit: server, Burst: 5, Remaining: 5},
			{Allowed: true, Limit: server, Burst: 5, Remaining: 5}, {Allowed: true, Limit: server, Burst: 5, Remaining: 5},
		}},
		// the fallback: 2 of 2.5 taken (0.5 left: the next whole token
		// 100 ms away), then 3 and 5 blind, 1 denied for 100 ms.
		{LocalFallback, []int{2, 3, 5, 1}, []want{
			{Allowed: true, Limit: local, Burst: 2, Remaining: 0, ResetAfter: 400 * ms, NextAfter: 100 * ms},
			{Limit: server, Burst: 5}, {Limit: server, Burst: 5},
			{Limit: local, Burst: 2, RetryAfter: 100 * ms, ResetAfter: 400 * ms, NextAfter: 100 * ms},
		}},
	} {
		t.Run(c.pol.String(), func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			clk.Set(1_700_000_000_000)
			name := "a98blind" + c.pol.String()
			l := e.limiter(t, LimiterConfig{Name: name, Limit: PerSecond(10, 5), Clock: clk, Policy: c.pol, Instances: 2})
			down, cancel := context.WithCancel(context.Background())
			cancel()
			for i, n := range c.n {
				d, err := l.DecideContext(down, "k", n)
				w := c.down[i]
				w.Policy = name
				if !errors.Is(err, ErrDegraded) || !errors.Is(err, context.Canceled) || d != w {
					t.Errorf("%v down, n=%d: %+v, %v\nwant %+v", c.pol, n, d, err, w)
				}
			}
			// The server answers again: its decisions, none blind (3 and
			// 5 are above Burst/N; 6 is Never with the server's next
			// token).
			ctx := context.Background()
			for _, s := range []struct {
				n int
				w want
			}{
				{3, want{Allowed: true, Limit: server, Burst: 5, Remaining: 2, ResetAfter: 300 * ms, NextAfter: 100 * ms}},
				{6, want{Limit: server, Burst: 5, Remaining: 2, Never: true, RetryAfter: inf, ResetAfter: 300 * ms, NextAfter: 100 * ms}},
				{5, want{Limit: server, Burst: 5, Remaining: 2, RetryAfter: 300 * ms, ResetAfter: 300 * ms, NextAfter: 100 * ms}},
				{2, want{Allowed: true, Limit: server, Burst: 5, Remaining: 0, ResetAfter: 500 * ms, NextAfter: 100 * ms}},
			} {
				d, err := l.DecideContext(ctx, "k", s.n)
				s.w.Policy = name
				if err != nil || d != s.w || l.Degraded() {
					t.Errorf("%v back, n=%d: %+v, %v (Degraded %v)\nwant %+v", c.pol, s.n, d, err, l.Degraded(), s.w)
				}
			}
		})
	}
}

// TestAudit98RedisBlindFailOpenAboveBurst pins FailOpen's answer to a
// request above Burst while the round trip fails: admitted (policy.go:
// "FailOpen admits"; docs/distributed.md: "FailOpen admits everything
// during an outage"), not Never, whatever decide.go's "a request above
// Burst is Never, as always" says of the policies' denials.
func TestAudit98RedisBlindFailOpenAboveBurst(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	l := e.limiter(t, LimiterConfig{Name: "a98open", Limit: PerSecond(10, 2.5), Policy: FailOpen})
	down, cancel := context.WithCancel(context.Background())
	cancel()
	d, err := l.DecideContext(down, "k", 3)
	if w := (limit.Decision{Allowed: true, Limit: 10, Burst: 2, Policy: "a98open", Remaining: 2}); !errors.Is(err, ErrDegraded) || d != w {
		t.Fatalf("FailOpen down, n=3 > Burst 2.5: %+v, %v; want %+v", d, err, w)
	}
}

// TestAudit98RedisHTTPFractionalBurst: httplimit over a Limiter of 10/s x
// 2.5 (exact units). RateLimit-Policy q=2 (the whole Burst), w=1; an
// admission at Remaining 1.5 says r=1;t=1 (the second whole token 50 ms
// away); a request of 3 (Never) at Remaining 2.2 says r=2 and no t (no
// whole token can come: the bucket is full as whole tokens go); a
// request of 2 at Remaining 1.2 is denied for 80 ms: r=1;t=1,
// Retry-After 1. With the round trip failing (FailClosed), n = 1 goes to
// the error handler (503) and n = 3 is Never (429), r=0 and no t. The
// LocalFallback's decisions likewise, from its Burst/N of 2.5.
func TestAudit98RedisHTTPFractionalBurst(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	clk := sketchtest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	l := e.limiter(t, LimiterConfig{Name: "a98http", Limit: PerSecond(10, 2.5), Clock: clk})
	h := httplimit.Wrap(l, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}),
		httplimit.WithKey(httplimit.Header("X-User")),
		httplimit.WithCost(func(r *http.Request) int { n, _ := strconv.Atoi(r.Header.Get("X-Cost")); return n }))
	do := func(ctx context.Context, user string, cost int) *httptest.ResponseRecorder {
		r := httptest.NewRequestWithContext(ctx, "GET", "/", nil)
		r.Header.Set("X-User", user)
		r.Header.Set("X-Cost", strconv.Itoa(cost))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	check := func(what string, w *httptest.ResponseRecorder, code int, rl, retry string) {
		t.Helper()
		if w.Code != code || w.Header().Get("RateLimit") != rl || w.Header().Get("Retry-After") != retry {
			t.Errorf("%s: %d RateLimit %q Retry-After %q; want %d %q %q (policy %q)", what, w.Code,
				w.Header().Get("RateLimit"), w.Header().Get("Retry-After"), code, rl, retry, w.Header().Get("RateLimit-Policy"))
		}
	}
	ctx := context.Background()
	w := do(ctx, "a", 1)
	check("first", w, 200, `"a98http";r=1;t=1`, "")
	if p := w.Header().Get("RateLimit-Policy"); p != `"a98http";q=2;w=1` {
		t.Errorf("RateLimit-Policy %q", p)
	}
	clk.Advance(70 * time.Millisecond) // 0.3 owed: Remaining 2.2
	check("n=3 at Remaining 2.2", do(ctx, "a", 3), 429, `"a98http";r=2`, "")
	check("n=2 at Remaining 2.2", do(ctx, "a", 2), 200, `"a98http";r=0;t=1`, "")
	clk.Advance(100 * time.Millisecond) // 1.3 owed: Remaining 1.2
	check("n=2 at Remaining 1.2", do(ctx, "a", 2), 429, `"a98http";r=1;t=1`, "1")

	down, cancel := context.WithCancel(context.Background())
	cancel()
	check("down, n=1", do(down, "b", 1), 503, "", "")
	check("down, n=3", do(down, "b", 3), 429, `"a98http";r=0`, "")

	// The LocalFallback over 2 instances of 10/s x 5 (5/s x 2.5 locally):
	// its decisions are answered with its Remaining and next token; n = 3
	// (above Burst/N, within Burst) is no decision: 503.
	fl := e.limiter(t, LimiterConfig{Name: "a98httpfb", Limit: PerSecond(10, 5), Clock: clk, Policy: LocalFallback, Instances: 2})
	h = httplimit.Wrap(fl, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}),
		httplimit.WithKey(httplimit.Header("X-User")),
		httplimit.WithCost(func(r *http.Request) int { n, _ := strconv.Atoi(r.Header.Get("X-Cost")); return n }))
	check("fallback, n=1", do(down, "c", 1), 200, `"a98httpfb";r=1;t=1`, "")
	check("fallback, n=3", do(down, "c", 3), 503, "", "")
	clk.Advance(60 * time.Millisecond) // 0.7 owed: Remaining 1.8
	check("fallback, n=2", do(down, "c", 2), 429, `"a98httpfb";r=1;t=1`, "1")
	clk.Advance(940 * time.Millisecond) // empty: Remaining 2.5, two whole tokens
	check("fallback, n=2 full", do(down, "c", 2), 200, `"a98httpfb";r=0;t=1`, "")
	// Never on a fresh key: Remaining 2.5, as whole tokens full: no t.
	check("fallback, n=6 fresh", do(down, "d", 6), 429, `"a98httpfb";r=2`, "")
}

// TestAudit98RedisConfigErrorsWrapCore: every NewLimiter error about a
// field a core sketch validates (the server sketch's, the deny cache's,
// the LocalFallback's) matches ErrInvalidConfig and sketch.ErrInvalidConfig
// and is a *sketch.ConfigError for errors.As, naming the field.
func TestAudit98RedisConfigErrorsWrapCore(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	nilFor := func(bad func(seed uint64) bool) sketch.HasherFactory {
		return func(seed uint64) sketch.Hasher {
			if bad(seed) {
				return nil
			}
			return sketch.XXH3()(seed)
		}
	}
	const seed = 7
	for _, c := range []struct {
		what, field string
		cfg         LimiterConfig
	}{
		{"Levels 9", "Levels", LimiterConfig{Levels: 9}},
		{"CellsPerLevel 2^31", "CellsPerLevel", LimiterConfig{CellsPerLevel: 1 << 31}},
		{"DenyCacheCells 2^31", "CellsPerLevel", LimiterConfig{DenyCacheCells: 1 << 31}},
		{"FallbackCells 2^31", "CellsPerLevel", LimiterConfig{Policy: LocalFallback, FallbackCells: 1 << 31}},
		{"Hasher nil", "Hasher", LimiterConfig{Hasher: nilFor(func(uint64) bool { return true })}},
		{"Hasher nil for the deny cache", "Hasher", LimiterConfig{DenyCacheCells: 64,
			Hasher: nilFor(func(s uint64) bool { return s == seed^0xD1E5CAC4E })}},
		{"Hasher nil for the fallback", "Hasher", LimiterConfig{Policy: LocalFallback,
			Hasher: nilFor(func(s uint64) bool { return s == seed^0xFA11BAC })}},
		{"Burst above float32", "Hi", LimiterConfig{Limit: PerSecond(1e38, 1e39)}},
		// "Burst/N rounds to 0" (5e-324 / 2) left this table at stop 63: a
		// Burst or Burst/N below 2^-126 is refused by NewLimiter itself
		// (TestAudit123FixedSubnormalBurst), before any core sketch sees it.
	} {
		cfg := c.cfg
		cfg.Name, cfg.Seed, cfg.ServerCheck = "a98cfg", seed, CheckSkip
		if cfg.Limit == (Limit{}) {
			cfg.Limit = PerSecond(1, 1)
		}
		l, err := NewLimiter(e.admin, cfg)
		var ce *sketch.ConfigError
		if l != nil || !errors.Is(err, ErrInvalidConfig) || !errors.Is(err, sketch.ErrInvalidConfig) || !errors.As(err, &ce) || ce.Field != c.field {
			t.Errorf("%s: %v, %v; want ErrInvalidConfig wrapping a *sketch.ConfigError of %s", c.what, l, err, c.field)
		}
	}
}
