package httplimit_test

// Audit 85: stacked middlewares and per-request costs. The package doc
// (limit/httplimit/doc.go, "Answers") promises of a stacked denial:
// "A denial's Retry-After is never earlier than the t of any listed item
// with no quota left (r=0), nor than a Retry-After already set: a retry
// at that second is not denied again by a policy the answer lists as
// empty." t is the next whole token (NextAfter), so with WithCost above 1
// an outer policy listed as empty can still deny the retry at that second
// (audit 85). The doc now says the promise is for one-token retries and
// that a costlier one may be denied by such a policy; these tests assert
// both halves.

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

func audit85httpServe(h http.Handler, remote string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = remote
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// audit85httpStack builds outer (global, one key for everyone) around
// inner (per client), both charging cost tokens a request.
func audit85httpStack(t *testing.T, clk *limittest.FakeClock, cost int, outerRate limit.Limit, outerBurst int, innerRate limit.Limit, innerBurst int) http.Handler {
	t.Helper()
	c := httplimit.WithCost(func(*http.Request) int { return cost })
	outer, err := httplimit.New(limit.MustNew(outerRate, outerBurst, limit.WithName("global"), limit.WithClock(clk)),
		httplimit.WithKey(httplimit.Func(func(*http.Request) string { return "all" })), c)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := httplimit.New(limit.MustNew(innerRate, innerBurst, limit.WithName("route"), limit.WithClock(clk)), c)
	if err != nil {
		t.Fatal(err)
	}
	return outer.Handler(inner.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(200) })))
}

// Cost 3: the outer (1/s, burst 6) admits the second request and is left
// empty (r=0, t=1); the inner (10/s, burst 3) denies it for 300 ms. The
// answer lists "global";r=0;t=1 and Retry-After: 1; the retry at 1 s is
// denied again by "global", which now has one token (r=1) of the 3 it
// needs, as the doc says a costlier retry may be; it fits at 3 s.
func TestAudit85HTTPFixedDocStackedCostRetry(t *testing.T) {
	clk := limittest.NewFakeClock()
	h := audit85httpStack(t, clk, 3, 1, 6, 10, 3)
	if w := audit85httpServe(h, "192.0.2.1:1"); w.Code != 200 {
		t.Fatalf("first: %d", w.Code)
	}
	w := audit85httpServe(h, "192.0.2.1:1")
	if w.Code != 429 {
		t.Fatalf("second: %d, want 429 by the inner", w.Code)
	}
	rl, ra := w.Header().Get("RateLimit"), w.Header().Get("Retry-After")
	if rl != `"global";r=0;t=1, "route";r=0;t=1` || ra != "1" {
		t.Fatalf("denial: RateLimit %q, Retry-After %q", rl, ra)
	}
	clk.Advance(time.Second)
	w = audit85httpServe(h, "192.0.2.1:1")
	if w.Code != 429 || w.Header().Get("RateLimit") != `"global";r=1;t=1` {
		t.Fatalf("retry at Retry-After: %d, RateLimit %q; want 429 by \"global\" with its next token (r=1)", w.Code, w.Header().Get("RateLimit"))
	}
	if s, err := strconv.Atoi(w.Header().Get("Retry-After")); err != nil || s != 2 {
		t.Fatalf("its Retry-After %q; want 2 (3 tokens at 1/s, one held)", w.Header().Get("Retry-After"))
	}
	clk.Advance(2 * time.Second)
	if w = audit85httpServe(h, "192.0.2.1:1"); w.Code != 200 {
		t.Fatalf("retry when \"global\" holds 3 tokens: %d, RateLimit %q", w.Code, w.Header().Get("RateLimit"))
	}
}

// The same stack at cost 1 keeps the promise: the retry at Retry-After
// is admitted by both (control).
func TestAudit85HTTPStackedCostOneRetryAdmitted(t *testing.T) {
	clk := limittest.NewFakeClock()
	h := audit85httpStack(t, clk, 1, 1, 2, 10, 1)
	if w := audit85httpServe(h, "192.0.2.1:1"); w.Code != 200 {
		t.Fatalf("first: %d", w.Code)
	}
	w := audit85httpServe(h, "192.0.2.1:1")
	if w.Code != 429 || w.Header().Get("RateLimit") != `"global";r=0;t=1, "route";r=0;t=1` || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("second: %d RateLimit %q Retry-After %q", w.Code, w.Header().Get("RateLimit"), w.Header().Get("Retry-After"))
	}
	clk.Advance(time.Second - time.Millisecond)
	clk.Advance(time.Millisecond)
	if w = audit85httpServe(h, "192.0.2.1:1"); w.Code != 200 {
		t.Fatalf("retry at Retry-After: %d %q", w.Code, w.Header().Get("RateLimit"))
	}
}
