package redis

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// audit52Window runs, for the Redis Limiter with lim behind httplimit:
// a full burst (floor(Burst) tokens) from a fresh key, the clock advanced
// by the RateLimit-Policy's w, the same full burst again. It returns the
// policy field, the second answer's status and Retry-After, and the
// second decision.
func audit52Window(t *testing.T, e *env, name string, lim Limit) (string, int, string, limit.Decision) {
	t.Helper()
	clk := sketchtest.NewFakeClock()
	clk.Set(5_000)
	l := e.limiter(t, LimiterConfig{Name: name, Limit: lim, Clock: clk, Timeout: 2 * time.Second})
	burst := l.Policies()[0].Burst
	var last limit.Decision
	h := httplimit.Wrap(l, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}),
		httplimit.WithKey(httplimit.Header("X-User")),
		httplimit.WithCost(func(*http.Request) int { return burst }),
		httplimit.WithHook(func(_ *http.Request, _ string, d limit.Decision) { last = d }))
	get := func() *httptest.ResponseRecorder {
		r := httptest.NewRequestWithContext(context.Background(), "GET", "/", nil)
		r.Header.Set("X-User", "ann")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	w1 := get()
	pol := w1.Header().Get("RateLimit-Policy")
	if w1.Code != 200 {
		t.Fatalf("%v: first full burst: %d %v", lim, w1.Code, w1.Header())
	}
	i := strings.Index(pol, ";w=")
	ws, err := strconv.ParseInt(pol[i+3:], 10, 64)
	if i < 0 || err != nil {
		t.Fatalf("%v: RateLimit-Policy %q", lim, pol)
	}
	clk.Advance(time.Duration(ws) * time.Second)
	w2 := get()
	return pol, w2.Code, w2.Header().Get("Retry-After"), last
}

// TestAudit52HTTPLimitWindowRedisExact: for a Redis limiter at an exact
// short-window policy, a full burst w seconds after emptying the bucket
// is admitted.
func TestAudit52HTTPLimitWindowRedisExact(t *testing.T) {
	forEachClient(t, func(t *testing.T, e *env) {
		for i, lim := range []Limit{PerSecond(2, 5), PerSecond(0.5, 7), PerSecond(10, 100)} {
			pol, code, ra, d := audit52Window(t, e, "a52x"+strconv.Itoa(i), lim)
			if code != 200 {
				t.Errorf("%v: RateLimit-Policy %s; a full burst w seconds after emptying: %d (Retry-After %q, %+v)", lim, pol, code, ra, d)
			}
		}
	})
}

// Finding: httplimit's doc.go says RateLimit-Policy's w is "the time to
// refill it from empty as the limiter holds it (ceil(burst/rate) for an
// exact policy, a little more for an inexact one of package limit;
// ceil(burst/rate) for other limiters)", and this module's doc offers
// its Limiter to httplimit "as it is". But a Redis Limiter whose Burst
// is above 2^24 holds debt as float32 tokens rounded up
// (docs/migrating.md: "for short-fraction rates whose units hold Burst
// in 2^24, debt in limit's exact units", float32 otherwise), so its
// bucket refills more slowly than Burst/Rate, and w, ceil(burst/rate),
// is shorter than the refill: a client that takes the full quota and
// comes back w seconds later is denied.
//
//	0.3/s x 30000001:  burst/rate 100000003.33 s, w=100000004, denied (RetryAfter 2.668 s)
//	0.3/s x 170000002: burst/rate 566666673.33 s, w=566666673 (httplimit's
//	                   windowSeconds also snaps the quotient DOWN: within a
//	                   relative 1e-9 of a whole number), denied (RetryAfter 47.001 s)
//
// Expected: a full burst exactly w seconds after emptying the bucket is
// admitted (w at least the refill as the limiter holds it).
// (Fixed: the Limiter registers its refill for httplimit.)
func TestAudit52FixedHTTPLimitWindowShorterThanRedisRefill(t *testing.T) {
	forEachClient(t, func(t *testing.T, e *env) {
		for i, lim := range []Limit{PerSecond(0.3, 30000001), PerSecond(0.3, 170000002)} {
			pol, code, ra, d := audit52Window(t, e, "a52f"+strconv.Itoa(i), lim)
			if code != 200 {
				t.Errorf("%v: RateLimit-Policy %s, yet a full burst w seconds after emptying the bucket is %d (Retry-After %q, RetryAfter %v); burst/rate = %.3f s; httplimit doc.go: w is \"the time to refill it from empty as the limiter holds it\"",
					lim, pol, code, ra, d.RetryAfter, lim.Burst/lim.Rate)
			}
		}
	})
}

// TestAudit52HTTPLimitCanceledRequestContext records what a canceled
// request context does behind httplimit (documented: a round trip that
// fails is the Policy's, and httplimit follows a decision made with an
// error): with the server up and the key spent, a request whose context
// is already canceled (net/http cancels it when the client disconnects)
// is admitted under FailOpen, answered 503 under FailClosed, and the
// limiter reports itself Degraded until its next successful round trip.
// Not a broken promise; see the report (a disconnecting client's request
// still runs the handler under FailOpen).
func TestAudit52HTTPLimitCanceledRequestContext(t *testing.T) {
	forEachClient(t, func(t *testing.T, e *env) {
		for _, pol := range []Policy{FailOpen, FailClosed} {
			l := e.limiter(t, LimiterConfig{Name: "a52c" + pol.String(), Limit: PerSecond(0.001, 2), Policy: pol, Timeout: 2 * time.Second})
			ran := 0
			h := httplimit.Wrap(l, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran++ }),
				httplimit.WithKey(httplimit.Header("X-User")))
			do := func(ctx context.Context) int {
				r := httptest.NewRequestWithContext(ctx, "GET", "/", nil)
				r.Header.Set("X-User", "mallory")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				return w.Code
			}
			for i, want := range []int{200, 200, 429} {
				if c := do(context.Background()); c != want {
					t.Fatalf("%v: request %d: %d; want %d", pol, i, c, want)
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			c := do(ctx)
			want := map[Policy]int{FailOpen: 200, FailClosed: 503}[pol]
			if c != want || !l.Degraded() {
				t.Fatalf("%v: canceled request: %d (want %d), Degraded %v", pol, c, want, l.Degraded())
			}
			t.Logf("%v: spent key, canceled request context: %d, handler runs %d, Degraded %v, Stats %+v", pol, c, ran, l.Degraded(), l.Stats())
			if c := do(context.Background()); c != 429 || l.Degraded() {
				t.Fatalf("%v: after: %d, Degraded %v", pol, c, l.Degraded())
			}
		}
	})
}
