package httplimit_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// README: "l := limit.MustNew(10, 20)
// h := httplimit.Wrap(l, mux, httplimit.WithProblemJSON(true))": per client
// IP (IPv6 per /64), 429 with Retry-After and the IETF fields.
func TestAudit64ReadmeWrapSnippet(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	l := limit.MustNew(10, 20, limit.WithClock(clk))
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	h := httplimit.Wrap(l, mux, httplimit.WithProblemJSON(true))
	req := func(addr string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = addr
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	// two addresses of one /64 share a bucket: 20 between them
	for i := 0; i < 20; i++ {
		addr := "[2001:db8:1:2::1]:5000"
		if i%2 == 1 {
			addr = "[2001:db8:1:2:ffff:ffff:ffff:ffff]:6000"
		}
		if w := req(addr); w.Code != 200 {
			t.Fatalf("request %d: %d", i, w.Code)
		}
	}
	w := req("[2001:db8:1:2::abcd]:1")
	if w.Code != 429 {
		t.Fatalf("21st request of the /64: %d, want 429", w.Code)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q", ct)
	}
	var p httplimit.Problem
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatal(err)
	}
	if p.Type != httplimit.ProblemType || p.Status != 429 || p.RetryAfter == nil || *p.RetryAfter != 1 || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("problem %+v, Retry-After %q", p, w.Header().Get("Retry-After"))
	}
	if len(p.ViolatedPolicies) != 1 || p.ViolatedPolicies[0] != "default" {
		t.Fatalf("violated-policies %q", p.ViolatedPolicies)
	}
	if got := w.Header().Get("RateLimit-Policy"); got != `"default";q=20;w=2` {
		t.Fatalf("RateLimit-Policy %q", got)
	}
	if got := w.Header().Get("RateLimit"); got != `"default";r=0;t=1` {
		t.Fatalf("RateLimit %q", got)
	}
	// another /64 is not affected
	if w := req("[2001:db8:1:3::1]:5000"); w.Code != 200 {
		t.Fatalf("another /64: %d", w.Code)
	}
	clk.Advance(100 * time.Millisecond)
	if w := req("[2001:db8:1:2::1]:5000"); w.Code != 200 {
		t.Fatalf("after 100 ms: %d", w.Code)
	}
}

// README: "a `limit.Multi` (10/s and 1000/h at once)" behind the middleware;
// RateLimit-Policy lists every window.
func TestAudit64ReadmeMultiMiddleware(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	perSec := limit.MustNew(10, 10, limit.WithClock(clk), limit.WithName("second"))
	perHour := limit.MustNew(limit.Every(time.Hour/1000), 1000, limit.WithClock(clk), limit.WithName("hour"))
	m, err := limit.NewMulti(perSec, perHour)
	if err != nil {
		t.Fatal(err)
	}
	h := httplimit.Wrap(m, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	var last *httptest.ResponseRecorder
	admitted := 0
	for i := 0; i < 1100; i++ {
		r := a64Req()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code == 200 {
			admitted++
		}
		last = w
		clk.Advance(100 * time.Millisecond)
	}
	if admitted != 1030 {
		t.Fatalf("10/s and 1000/h over 110 s at 10/s: admitted %d, want 1030 (the hour's burst; its refill is 1 per 3.6 s, 30 more in 110 s)", admitted)
	}
	_ = last
	pol := last.Header().Get("RateLimit-Policy")
	if !strings.Contains(pol, `"second";q=10;w=1`) || !strings.Contains(pol, `"hour";q=1000;w=3600`) {
		t.Fatalf("RateLimit-Policy %q", pol)
	}
	if rl := last.Header().Get("RateLimit"); !strings.HasPrefix(rl, `"hour";r=0`) {
		t.Fatalf("RateLimit %q: want the binding window, hour", rl)
	}
}
