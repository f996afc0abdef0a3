package httplimit_test

// Adversarial acceptance tests of httplimit over its Limiter interface,
// against its package documentation: Tiers behind the middleware, a
// limiter that errs (with and without a decision), hooks, and no error
// text in any response.

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAdvTierRoutes: a free tier and the limiter's own policy on two
// routes share each client's debt; on a 429 Retry-After (whole seconds,
// rounded up) is at least the RateLimit field's t, and a retry after
// Retry-After seconds is admitted on that route.
func TestAdvTierRoutes(t *testing.T) {
	for _, engine := range []limit.Engine{limit.Buckets, limit.CountMin} {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_700_000_000_000)
		l, err := limit.New(10, 20, limit.WithClock(clk), limit.WithEngine(engine), limit.WithMaxDebt(80), limit.WithName("paid"))
		if err != nil {
			t.Fatal(err)
		}
		free, err := l.Tier("free", 0.5, 3) // 2 s a token, burst 6 s
		if err != nil {
			t.Fatal(err)
		}
		paid := httplimit.Wrap(l, ok)
		freeH := httplimit.Wrap(free, ok)
		const ip = "203.0.113.9:1234"
		for i := range 3 {
			if w := get(freeH, ip); w.Code != 200 {
				t.Fatalf("%v: free request %d: %d", engine, i+1, w.Code)
			}
		}
		w := get(freeH, ip)
		if w.Code != 429 {
			t.Fatalf("%v: 4th free request: %d", engine, w.Code)
		}
		ra, err := strconv.Atoi(w.Header().Get("Retry-After"))
		if err != nil || ra != 2 {
			t.Fatalf("%v: Retry-After %q, want 2", engine, w.Header().Get("Retry-After"))
		}
		if !strings.Contains(w.Header().Get("RateLimit"), `"free"`) {
			t.Fatalf("%v: RateLimit %q does not name the free tier", engine, w.Header().Get("RateLimit"))
		}
		// The paid route sees 6 s of debt against its 2 s burst.
		if w := get(paid, ip); w.Code != 429 || w.Header().Get("Retry-After") != "5" {
			t.Fatalf("%v: paid route with 6 s of debt: %d, Retry-After %q (want 429, 5: 4.1 s rounded up)", engine, w.Code, w.Header().Get("Retry-After"))
		}
		clk.Advance(time.Duration(ra)*time.Second - time.Millisecond)
		if w := get(freeH, ip); w.Code != 429 {
			t.Fatalf("%v: admitted 1 ms before Retry-After", engine)
		}
		clk.Advance(time.Millisecond)
		if w := get(freeH, ip); w.Code != 200 {
			t.Fatalf("%v: denied at Retry-After: %d", engine, w.Code)
		}
	}
}

// fakeLimiter is an httplimit.Limiter whose answers the test sets.
type fakeLimiter struct {
	d   limit.Decision
	err error
	n   atomic.Int64
}

func (f *fakeLimiter) DecideContext(context.Context, string, int) (limit.Decision, error) {
	f.n.Add(1)
	return f.d, f.err
}

func (f *fakeLimiter) Policies() []limit.Policy {
	return []limit.Policy{{Name: "p", Limit: 1, Burst: 5}}
}

// TestAdvLimiterErrors: a limiter error without a decision goes to the
// error handler wrapped in ErrLimiter (default: 503, status text only);
// with a decision (a fallback's) the decision stands; WithLimiterError
// sees both; WithHook sees every decision and none of the undecided.
func TestAdvLimiterErrors(t *testing.T) {
	secret := errors.New("redis at 10.0.0.7:6379: secret-token-xyz refused")
	f := &fakeLimiter{err: secret}
	var limErrs, hooks atomic.Int64
	var handled error
	m, err := httplimit.New(f, httplimit.WithLimiterError(func(_ *http.Request, _ string, err error) {
		if !errors.Is(err, secret) {
			t.Errorf("WithLimiterError got %v", err)
		}
		limErrs.Add(1)
	}), httplimit.WithHook(func(*http.Request, string, limit.Decision) { hooks.Add(1) }))
	if err != nil {
		t.Fatal(err)
	}
	h := m.Handler(ok)
	w := get(h, "198.51.100.1:1")
	if w.Code != 503 || strings.Contains(w.Body.String(), "secret") || strings.Contains(w.Body.String(), "10.0.0.7") {
		t.Fatalf("undecided: %d %q", w.Code, w.Body.String())
	}
	if limErrs.Load() != 1 || hooks.Load() != 0 {
		t.Fatalf("undecided: LimiterError %d, hooks %d", limErrs.Load(), hooks.Load())
	}
	m2, err := m.With(f, httplimit.WithErrorHandler(func(w http.ResponseWriter, _ *http.Request, err error) {
		handled = err
		w.WriteHeader(599)
	}))
	if err != nil {
		t.Fatal(err)
	}
	if w := get(m2.Handler(ok), "198.51.100.1:1"); w.Code != 599 || !errors.Is(handled, httplimit.ErrLimiter) || !errors.Is(handled, secret) {
		t.Fatalf("error handler: %d, %v", w.Code, handled)
	}
	// A fallback's decisions stand: admitted, and denied with RetryAfter.
	f.d = limit.Decision{Allowed: true, Limit: 1, Burst: 5, Policy: "p", Remaining: 4}
	if w := get(h, "198.51.100.1:1"); w.Code != 200 {
		t.Fatalf("fallback admitted: %d", w.Code)
	}
	f.d = limit.Decision{Limit: 1, Burst: 5, Policy: "p", RetryAfter: 1500 * time.Millisecond, NextAfter: time.Second}
	if w := get(h, "198.51.100.1:1"); w.Code != 429 || w.Header().Get("Retry-After") != "2" {
		t.Fatalf("fallback denied: %d, Retry-After %q", w.Code, w.Header().Get("Retry-After"))
	}
	if limErrs.Load() != 4 || hooks.Load() != 2 {
		t.Fatalf("LimiterError %d (want 4), hooks %d (want 2)", limErrs.Load(), hooks.Load())
	}
	// No error: a denial with a sub-second RetryAfter still sends
	// Retry-After >= 1 and >= t.
	f.err = nil
	f.d = limit.Decision{Limit: 1, Burst: 5, Policy: "p", RetryAfter: time.Millisecond, NextAfter: time.Millisecond}
	if w := get(h, "198.51.100.1:1"); w.Code != 429 || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("1 ms RetryAfter: %d, Retry-After %q", w.Code, w.Header().Get("Retry-After"))
	}
	// Never: 429 without Retry-After.
	f.d = limit.Decision{Limit: 1, Burst: 5, Policy: "p", Never: true, RetryAfter: limit.InfDuration}
	if w := get(h, "198.51.100.1:1"); w.Code != 429 || w.Header().Get("Retry-After") != "" {
		t.Fatalf("Never: %d, Retry-After %q", w.Code, w.Header().Get("Retry-After"))
	}
}

// TestAdvSkipAndExclude: WithSkip and WithExcludedKey let requests
// through untouched: no header fields, nothing debited, the limiter not
// even asked.
func TestAdvSkipAndExclude(t *testing.T) {
	f := &fakeLimiter{d: limit.Decision{Allowed: true, Limit: 1, Burst: 5, Policy: "p", Remaining: 4}}
	h := httplimit.Wrap(f, ok,
		httplimit.WithSkip(func(r *http.Request) bool { return r.Header.Get("X-Health") != "" }),
		httplimit.WithKey(httplimit.Header("X-Key")),
		httplimit.WithExcludedKey(func(k string) bool { return k == "admin" }))
	for _, hdr := range [][]string{{"X-Health", "1"}, {"X-Key", "admin"}} {
		w := get(h, "192.0.2.1:1", hdr...)
		if w.Code != 200 || w.Header().Get("RateLimit") != "" || w.Header().Get("RateLimit-Policy") != "" {
			t.Fatalf("%v: %d, fields %v", hdr, w.Code, w.Header())
		}
	}
	if f.n.Load() != 0 {
		t.Fatalf("the limiter was asked %d times for skipped requests", f.n.Load())
	}
	// Missing header: 400 with the status text only.
	if w := get(h, "192.0.2.1:1"); w.Code != 400 || strings.Contains(w.Body.String(), "X-Key") || strings.Contains(w.Body.String(), "httplimit") {
		t.Fatalf("no key: %d %q", w.Code, w.Body.String())
	}
}
