package httplimit_test

// Contract conformance (audit11): limit/httplimit as issues 15, 24 and 28
// state it: a small interface that *limit.Limiter and *limit.Multi
// implement, key extractors, hooks, 429 with Retry-After and the draft -10
// fields, errors instead of nil crashes.

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"github.com/lfgrudge/grudge/sketch"
)

var (
	_ httplimit.Limiter = (*limit.Limiter)(nil)
	_ httplimit.Limiter = (*limit.Multi)(nil)
	_ httplimit.Limiter = (*limit.Tier)(nil)

	_ func(string) httplimit.KeyFunc                                          = httplimit.Header
	_ func(func(*http.Request) string) httplimit.KeyFunc                      = httplimit.Func
	_ func(...httplimit.IPOption) httplimit.KeyFunc                           = httplimit.RemoteIP
	_ func(int) httplimit.IPOption                                            = httplimit.WithTrustedProxies
	_ func(int) httplimit.IPOption                                            = httplimit.WithIPv6Prefix
	_ func(httplimit.Limiter, http.Handler, ...httplimit.Option) http.Handler = httplimit.Wrap
)

func TestAudit11APIHTTPLimitDenial(t *testing.T) {
	fc := limittest.NewFakeClock()
	l, err := limit.New(limit.Every(1500*time.Millisecond), 2, limit.WithClock(fc), limit.WithName("default"))
	if err != nil {
		t.Fatal(err)
	}
	var hooked int
	m, err := httplimit.New(l,
		httplimit.WithKey(httplimit.Header("X-User")),
		httplimit.WithHook(func(r *http.Request, key string, d limit.Decision) { hooked++ }),
		httplimit.WithLegacyHeaders(true),
	)
	if err != nil {
		t.Fatal(err)
	}
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	do := func() *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", "/", nil)
		req.Header.Set("X-User", "alice")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	for i := range 2 {
		if rec := do(); rec.Code != 204 {
			t.Fatalf("request %d: %d", i, rec.Code)
		}
	}
	rec := do()
	if rec.Code != http.StatusTooManyRequests {
		t.Fatalf("third request: %d, want 429", rec.Code)
	}
	// 1.5 s per token: Retry-After whole seconds rounded up.
	if ra := rec.Header().Get("Retry-After"); ra != "2" {
		t.Errorf("Retry-After %q, want 2 (1.5 s rounded up)", ra)
	}
	if p := rec.Header().Get("RateLimit-Policy"); !strings.HasPrefix(p, `"default";q=2;w=`) {
		t.Errorf("RateLimit-Policy %q", p)
	}
	if p := rec.Header().Get("RateLimit"); !strings.HasPrefix(p, `"default";r=0;t=2`) {
		t.Errorf("RateLimit %q, want r=0;t=2", p)
	}
	if rec.Header().Get("X-RateLimit-Limit") == "" {
		t.Error("WithLegacyHeaders(true): no X-RateLimit-Limit")
	}
	if hooked != 3 {
		t.Errorf("hook saw %d decisions, want 3", hooked)
	}
}

// Issue 24: httplimit.New(l, nil) returns an error (no nil dereference);
// RemoteAddr "" or "@" is a documented answer with no internal text.
func TestAudit11APIHTTPLimitErrors(t *testing.T) {
	l := limit.MustNew(10, 20)
	if _, err := httplimit.New(l, nil); err == nil || !errors.Is(err, sketch.ErrInvalidConfig) {
		t.Errorf("httplimit.New(l, nil) = %v, want a *sketch.ConfigError", err)
	}
	if _, err := httplimit.New(nil); err == nil {
		t.Error("httplimit.New(nil): no error")
	}
	h := httplimit.Wrap(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for _, addr := range []string{"", "@"} {
		req := httptest.NewRequest("GET", "/", nil)
		req.RemoteAddr = addr
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 500 || strings.Contains(rec.Body.String(), "httplimit") {
			t.Errorf("RemoteAddr %q: %d %q", addr, rec.Code, rec.Body.String())
		}
	}
}
