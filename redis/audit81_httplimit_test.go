package redis

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit81HTTPLimitFaultPolicies: the Redis Limiter behind httplimit
// with the server down. doc.go of httplimit: "a request ... the limiter
// could not decide (ErrLimiter ...) ... 503 for the limiter's ... A
// limiter that errs but still decides (the Redis module's FailOpen and
// LocalFallback policies) is followed." redis decide.go: "FailClosed's
// denial, and LocalFallback's for n above its Burst/N, say no retry
// time ... httplimit answers them through its error handler, 503".
func TestAudit81HTTPLimitFaultPolicies(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	mk := func(name string, p Policy) *Limiter {
		return e.limiter(t, LimiterConfig{Name: name, Limit: PerSecond(1, 9), Clock: clk, Policy: p, Instances: 3,
			ServerCheck: CheckSkip, Timeout: 300 * time.Millisecond})
	}
	closed, open, fb := mk("a81c", FailClosed), mk("a81o", FailOpen), mk("a81f", LocalFallback)
	e.srv.kill()
	var cost atomic.Int64
	cost.Store(1)
	var limErrs atomic.Int64
	wrap := func(l *Limiter) http.Handler {
		return httplimit.Wrap(l, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}),
			httplimit.WithLegacyHeaders(true),
			httplimit.WithCost(func(*http.Request) int { return int(cost.Load()) }),
			httplimit.WithLimiterError(func(_ *http.Request, _ string, err error) {
				if errors.Is(err, ErrDegraded) {
					limErrs.Add(1)
				}
			}))
	}
	do := func(h http.Handler) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "192.0.2.1:1"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	w := do(wrap(closed))
	if w.Code != 503 || w.Header().Get("RateLimit") != "" || w.Body.String() != "Service Unavailable\n" {
		t.Errorf("FailClosed, server down: %d %v %q; want 503, status text", w.Code, w.Header(), w.Body.String())
	}
	w = do(wrap(open))
	if w.Code != 200 || w.Header().Get("RateLimit") == "" {
		t.Errorf("FailOpen, server down: %d %v; want 200 with the fields", w.Code, w.Header())
	}
	t.Logf("FailOpen fields: %v", w.Header())
	h := wrap(fb)
	for i := range 3 {
		if w := do(h); w.Code != 200 {
			t.Errorf("LocalFallback request %d of the fallback's burst 3: %d %v", i, w.Code, w.Header())
		}
	}
	w = do(h)
	ra, err := strconv.ParseInt(w.Header().Get("Retry-After"), 10, 64)
	if w.Code != 429 || err != nil || ra < 1 {
		t.Fatalf("LocalFallback 4th: %d %v; want 429 with Retry-After", w.Code, w.Header())
	}
	t.Logf("LocalFallback denial fields: %v", w.Header())
	clk.Advance(time.Duration(ra) * time.Second)
	if w := do(h); w.Code != 200 {
		t.Errorf("LocalFallback retry at Retry-After %d s: %d %v; want 200", ra, w.Code, w.Header())
	}
	cost.Store(5) // above the fallback's burst 3, within the server's 9
	if w := do(h); w.Code != 503 {
		t.Errorf("LocalFallback, cost 5 > Burst/N 3: %d %v; want 503", w.Code, w.Header())
	}
	cost.Store(10) // above the burst 9: never
	if w := do(h); w.Code != 429 || w.Header().Get("Retry-After") != "" {
		t.Errorf("LocalFallback, cost 10 > burst 9: %d %v; want 429 without Retry-After", w.Code, w.Header())
	}
	if limErrs.Load() == 0 {
		t.Errorf("WithLimiterError saw no ErrDegraded")
	}
}

var _ = limit.Inf
