package httplimit_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit121StackedNeverRetryAfter (audit 121; holds, a regression
// test). SetHeaders: "On a denial that can never be admitted (d.Never) it
// removes any Retry-After already set". With stacked middlewares an
// outer one that denies answers the request itself (Handler calls next
// only when Allow returns true), so its Retry-After reaches an inner
// middleware only through a denied handler that passes the request on
// (a shadow mode). Then the inner Never denial drops it, in every
// spelling, the problem+json body has no retryAfter, and the legacy
// fields and the outer policy's RateLimit item stay. An outer denial
// with the default handler never reaches the inner middleware.
func TestAudit121StackedNeverRetryAfter(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	var innerRan int
	inner, err := httplimit.New(limit.MustNew(1, 2, limit.WithClock(clk), limit.WithName("inner")),
		httplimit.WithCost(func(*http.Request) int { return 3 }), httplimit.WithProblemJSON(true),
		httplimit.WithLegacyHeaders(true), httplimit.WithHook(func(*http.Request, string, limit.Decision) { innerRan++ }))
	if err != nil {
		t.Fatal(err)
	}
	outerL := limit.MustNew(1, 1, limit.WithClock(clk), limit.WithName("outer"))
	shadow, err := httplimit.New(outerL, httplimit.WithLegacyHeaders(true),
		httplimit.WithDeniedHandler(func(w http.ResponseWriter, r *http.Request, d limit.Decision) {
			w.Header()["retry-after"] = []string{"9"} // another spelling beside the canonical one
			inner.Handler(ok).ServeHTTP(w, r)
		}))
	if err != nil {
		t.Fatal(err)
	}
	req := func() *http.Request {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "192.0.2.1:1"
		return r
	}
	h := shadow.Handler(inner.Handler(ok))
	h.ServeHTTP(httptest.NewRecorder(), req()) // the outer's one token
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req()) // outer denies (Retry-After set), passes on; inner: Never
	if w.Code != http.StatusTooManyRequests || innerRan != 2 {
		t.Fatalf("status %d, inner ran %d times; want 429 and 2", w.Code, innerRan)
	}
	for k := range w.Header() {
		if http.CanonicalHeaderKey(k) == "Retry-After" {
			t.Errorf("a Never 429 carries %s: %q", k, w.Header()[k])
		}
	}
	var p httplimit.Problem
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || p.RetryAfter != nil || p.ViolatedPolicies[0] != "inner" {
		t.Errorf("problem %+v, %v: want no retryAfter, policy inner", p, err)
	}
	if w.Header().Get("X-RateLimit-Remaining") == "" || len(w.Header().Values("RateLimit")) == 0 {
		t.Errorf("legacy or RateLimit fields gone: %v", w.Header())
	}
	// The default denied handler answers the outer denial itself.
	plain, err := httplimit.New(outerL)
	if err != nil {
		t.Fatal(err)
	}
	w = httptest.NewRecorder()
	plain.Handler(inner.Handler(ok)).ServeHTTP(w, req())
	if w.Code != http.StatusTooManyRequests || innerRan != 2 || w.Header().Get("Retry-After") == "" {
		t.Errorf("outer denial: status %d, inner ran %d times, Retry-After %q; want 429, 2, set", w.Code, innerRan, w.Header().Get("Retry-After"))
	}
}
