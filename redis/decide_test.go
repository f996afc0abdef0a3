package redis

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// The Redis Limiter is an httplimit.Limiter as it is: no adapter.
var _ httplimit.Limiter = (*Limiter)(nil)

func TestToDecision(t *testing.T) {
	lim := PerSecond(2, 5)
	// Without exact units (eu zero), NextAfter counts tokens in float64
	// and is widened by 2^-40 before its ceiling: a whole quotient comes
	// out 1 ms late, so that one a few ulps short of the server's is
	// never early (audits 98, 99). The exact units path is exact.
	for _, tt := range []struct {
		name string
		d    Decision
		n    float64
		want limit.Decision
	}{
		{"admitted, full", Decision{Allowed: true, Limit: lim, Remaining: 5, RetryAfter: -1},
			1, limit.Decision{Allowed: true, Limit: 2, Burst: 5, Policy: "p", Remaining: 5}},
		{"admitted", Decision{Allowed: true, Limit: lim, Remaining: 3.25, RetryAfter: -1, ResetAfter: 875 * time.Millisecond},
			1, limit.Decision{Allowed: true, Limit: 2, Burst: 5, Policy: "p", Remaining: 3, ResetAfter: 875 * time.Millisecond, NextAfter: 376 * time.Millisecond}},
		{"denied", Decision{Limit: lim, Remaining: 0.5, RetryAfter: 250 * time.Millisecond, ResetAfter: 2250 * time.Millisecond},
			1, limit.Decision{Limit: 2, Burst: 5, Policy: "p", RetryAfter: 250 * time.Millisecond, ResetAfter: 2250 * time.Millisecond, NextAfter: 250 * time.Millisecond}},
		{"denied, n = 3", Decision{Limit: lim, Remaining: 0.5, RetryAfter: 1250 * time.Millisecond, ResetAfter: 2250 * time.Millisecond},
			3, limit.Decision{Limit: 2, Burst: 5, Policy: "p", RetryAfter: 1250 * time.Millisecond, ResetAfter: 2250 * time.Millisecond, NextAfter: 251 * time.Millisecond}},
		{"never", Decision{Limit: lim, Remaining: 5, RetryAfter: -1},
			6, limit.Decision{Limit: 2, Burst: 5, Policy: "p", Remaining: 5, Never: true, RetryAfter: limit.InfDuration}},
		{"fail closed: no decision", Decision{Limit: lim, RetryAfter: -1},
			1, limit.Decision{Limit: 2, Burst: 5, Policy: "p"}},
		// Remaining == Burst (whole): no whole token can come (audit 96;
		// NextAfter was 300 ms, the time until the bucket is full).
		{"fractional burst", Decision{Allowed: true, Limit: PerSecond(1, 2.5), Remaining: 2.2, RetryAfter: -1},
			1, limit.Decision{Allowed: true, Limit: 1, Burst: 2, Policy: "p", Remaining: 2}},
		{"fractional burst, a token short", Decision{Allowed: true, Limit: PerSecond(1, 2.5), Remaining: 1.2, RetryAfter: -1},
			1, limit.Decision{Allowed: true, Limit: 1, Burst: 2, Policy: "p", Remaining: 1, NextAfter: 801 * time.Millisecond}},
	} {
		if got := toDecision(tt.d, tt.n, "p", 0, exactUnits{}, false); got != tt.want {
			t.Errorf("%s:\n got %+v\nwant %+v", tt.name, got, tt.want)
		}
	}
	// FailClosed above Burst (audit 96): Never, and no NextAfter from the
	// Remaining of 0 a policy's denial carries.
	blind := toDecision(Decision{Limit: lim, RetryAfter: -1}, 6, "p", 0, exactUnits{}, true)
	if want := (limit.Decision{Limit: 2, Burst: 5, Policy: "p", Never: true, RetryAfter: limit.InfDuration}); blind != want {
		t.Errorf("fail closed, n above Burst:\n got %+v\nwant %+v", blind, want)
	}
	if (*Limiter)(nil).Policies() != nil {
		t.Fatal("a nil Limiter has policies")
	}
}

// TestHTTPLimit: httplimit over the Redis Limiter: the draft's fields from
// the server's answers, and with the server down, FailClosed answers 503
// (no decision, no internal text) while FailOpen admits.
func TestHTTPLimit(t *testing.T) {
	forEachClient(t, func(t *testing.T, e *env) {
		clk := sketchtest.NewFakeClock()
		clk.Set(5_000)
		ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
		key := httplimit.WithKey(httplimit.Header("X-User"))
		var logged []error
		onErr := httplimit.WithLimiterError(func(_ *http.Request, _ string, err error) { logged = append(logged, err) })
		closed := e.limiter(t, LimiterConfig{Name: "http", Limit: PerSecond(1, 2), Clock: clk, Timeout: 200 * time.Millisecond})
		open := e.limiter(t, LimiterConfig{Name: "http-open", Limit: PerSecond(1, 2), Clock: clk, Timeout: 200 * time.Millisecond, Policy: FailOpen})
		hClosed := httplimit.Wrap(closed, ok, key, onErr)
		hOpen := httplimit.Wrap(open, ok, key, onErr)
		get := func(h http.Handler) *httptest.ResponseRecorder {
			r := httptest.NewRequestWithContext(context.Background(), "GET", "/", nil)
			r.Header.Set("X-User", "ann")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			return w
		}
		for i, want := range []struct {
			code             int
			rateLimit, retry string
		}{{200, `"http";r=1;t=1`, ""}, {200, `"http";r=0;t=1`, ""}, {429, `"http";r=0;t=1`, "1"}} {
			w := get(hClosed)
			if w.Code != want.code || w.Header().Get("RateLimit") != want.rateLimit || w.Header().Get("Retry-After") != want.retry ||
				w.Header().Get("RateLimit-Policy") != `"http";q=2;w=2` {
				t.Fatalf("request %d: %d %v", i, w.Code, w.Header())
			}
		}
		clk.Advance(time.Second)
		if w := get(hClosed); w.Code != 200 {
			t.Fatalf("after 1 s: %d", w.Code)
		}
		if len(logged) != 0 {
			t.Fatalf("errors with the server up: %v", logged)
		}

		e.srv.kill()
		defer e.srv.start()
		if w := get(hClosed); w.Code != 503 || w.Body.String() != "Service Unavailable\n" || w.Header().Get("RateLimit") != "" {
			t.Fatalf("FailClosed, server down: %d %q %v", w.Code, w.Body.String(), w.Header())
		}
		if w := get(hOpen); w.Code != 200 || w.Header().Get("RateLimit") != `"http-open";r=2` {
			t.Fatalf("FailOpen, server down: %d %v", w.Code, w.Header())
		}
		if len(logged) != 2 || !errors.Is(logged[0], ErrDegraded) || !errors.Is(logged[1], ErrDegraded) {
			t.Fatalf("WithLimiterError got %v", logged)
		}
		if strings.Contains(get(hClosed).Body.String(), "redis") {
			t.Fatal("internal error text in a response")
		}
	})
}
