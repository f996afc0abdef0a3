package httplimit_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// Both limiters of package limit are httplimit.Limiters as they are.
var (
	_ httplimit.Limiter = (*limit.Limiter)(nil)
	_ httplimit.Limiter = (*limit.Multi)(nil)
)

// TestMulti: a Multi's windows are all announced in RateLimit-Policy, and
// RateLimit names the window that binds: the one with the least quota
// left, or the one that denied.
func TestMulti(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	sec := limit.MustNew(2, 2, limit.WithClock(clk), limit.WithName("sec"))
	min := limit.MustNew(limit.Every(12*time.Second), 3, limit.WithClock(clk), limit.WithName("min"))
	multi, err := limit.NewMulti(sec, min)
	if err != nil {
		t.Fatal(err)
	}
	h := httplimit.Wrap(multi, ok, httplimit.WithProblemJSON(true))
	type want struct {
		code      int
		rateLimit string // a regexp
	}
	step := func(i int, w want) *httptest.ResponseRecorder {
		t.Helper()
		rec := get(h, "192.0.2.1:1")
		if got := rec.Header().Get("RateLimit-Policy"); got != `"sec";q=2;w=1, "min";q=3;w=36` {
			t.Fatalf("request %d: RateLimit-Policy %q", i, got)
		}
		if rec.Code != w.code || !regexp.MustCompile("^"+w.rateLimit+"$").MatchString(rec.Header().Get("RateLimit")) {
			t.Fatalf("request %d: %d RateLimit %q; want %d %s", i, rec.Code, rec.Header().Get("RateLimit"), w.code, w.rateLimit)
		}
		return rec
	}
	step(1, want{200, `"sec";r=1;t=1`})
	step(2, want{200, `"sec";r=0;t=1`})
	if rec := step(3, want{429, `"sec";r=0;t=1`}); rec.Header().Get("Retry-After") != "1" {
		t.Fatalf("Retry-After %q", rec.Header().Get("Retry-After"))
	}
	clk.Advance(time.Second)
	step(4, want{200, `"min";r=0;t=\d+`})
	rec := step(5, want{429, `"min";r=0;t=\d+`})
	var p httplimit.Problem
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || len(p.ViolatedPolicies) != 1 || p.ViolatedPolicies[0] != "min" {
		t.Fatalf("problem %+v, %v", p, err)
	}

	// A Multi whose windows share a name cannot be told apart in the fields.
	alike, err := limit.NewMulti(limit.MustNew(1, 1), limit.MustNew(2, 2))
	if err != nil {
		t.Fatal(err)
	}
	_, err = httplimit.New(alike)
	var ce *sketch.ConfigError
	if !errors.As(err, &ce) || ce.Field != "Name" || !strings.HasPrefix(err.Error(), "httplimit: ") {
		t.Fatalf("windows named alike: %v", err)
	}
}

// fakeLimiter answers what it is told: a remote limiter, for the error paths.
type fakeLimiter struct {
	d   limit.Decision
	err error
	ctx atomic.Pointer[context.Context]
}

func (f *fakeLimiter) DecideContext(ctx context.Context, _ string, _ int) (limit.Decision, error) {
	f.ctx.Store(&ctx)
	return f.d, f.err
}

func (f *fakeLimiter) Policies() []limit.Policy {
	return []limit.Policy{{Name: "remote", Limit: 10, Burst: 5}}
}

type ctxKey struct{}

// TestLimiterErrors: a limiter error goes to WithLimiterError; with no
// decision the request goes to the error handler (ErrLimiter, 503 by
// default, no internal text); a fallback's decision stands.
func TestLimiterErrors(t *testing.T) {
	cause := errors.New("dial tcp 10.1.2.3:6379: connection refused")
	for _, c := range []struct {
		name  string
		d     limit.Decision
		code  int
		retry string
	}{
		{"no decision", limit.Decision{}, 503, ""},
		{"fallback admits", limit.Decision{Allowed: true, Burst: 5, Remaining: 5, Policy: "remote"}, 200, ""},
		{"fallback denies", limit.Decision{Burst: 5, RetryAfter: 1500 * time.Millisecond, Policy: "remote"}, 429, "2"},
		{"fallback never", limit.Decision{Burst: 5, Never: true, RetryAfter: limit.InfDuration}, 429, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeLimiter{d: c.d, err: cause}
			var logged atomic.Value
			h := httplimit.Wrap(f, ok, httplimit.WithLimiterError(func(_ *http.Request, key string, err error) {
				logged.Store(key + ": " + err.Error())
			}))
			r := httptest.NewRequest("GET", "/", nil).WithContext(context.WithValue(context.Background(), ctxKey{}, "req"))
			r.RemoteAddr = "192.0.2.7:1"
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != c.code || w.Header().Get("Retry-After") != c.retry {
				t.Fatalf("%d Retry-After %q; want %d %q", w.Code, w.Header().Get("Retry-After"), c.code, c.retry)
			}
			if strings.Contains(w.Body.String(), "10.1.2.3") || strings.Contains(w.Body.String(), "refused") {
				t.Fatalf("internal error text in the response: %q", w.Body.String())
			}
			if logged.Load() != "192.0.2.7/32: "+cause.Error() {
				t.Fatalf("WithLimiterError got %v", logged.Load())
			}
			if ctx := f.ctx.Load(); ctx == nil || (*ctx).Value(ctxKey{}) != "req" {
				t.Fatal("the limiter did not get the request's context")
			}
			decided := c.code != 503
			if got := w.Header().Get("RateLimit-Policy"); (got == `"remote";q=5;w=1`) != decided {
				t.Fatalf("RateLimit-Policy %q (decided %v)", got, decided)
			}
		})
	}
	var handled error
	h := httplimit.Wrap(&fakeLimiter{err: cause}, ok, httplimit.WithErrorHandler(func(w http.ResponseWriter, _ *http.Request, err error) {
		handled = err
		w.WriteHeader(http.StatusTeapot)
	}))
	if w := get(h, "192.0.2.7:1"); w.Code != http.StatusTeapot || !errors.Is(handled, httplimit.ErrLimiter) || !errors.Is(handled, cause) {
		t.Fatalf("%d, error handler got %v", w.Code, handled)
	}
	if w := get(httplimit.Wrap(&fakeLimiter{err: cause}, ok), "192.0.2.7:1"); w.Body.String() != "Service Unavailable\n" {
		t.Fatalf("default body %q", w.Body.String())
	}
}

// TestSkipAndExclude: skipped requests and excluded keys pass untouched:
// no header fields, nothing debited, and WithSkip runs before the key.
func TestSkipAndExclude(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	l := limit.MustNew(1, 1, limit.WithClock(clk))
	h := httplimit.Wrap(l, ok,
		httplimit.WithKey(httplimit.Header("X-Api-Key")),
		httplimit.WithSkip(func(r *http.Request) bool { return r.URL.Path == "/healthz" }),
		httplimit.WithExcludedKey(func(key string) bool { return key == "internal" }))
	req := func(path, key string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", path, nil)
		if key != "" {
			r.Header.Set("X-Api-Key", key)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	for range 3 {
		if w := req("/healthz", ""); w.Code != 200 || w.Header().Get("RateLimit-Policy") != "" {
			t.Fatalf("skipped request: %d %v", w.Code, w.Header())
		}
		if w := req("/", "internal"); w.Code != 200 || w.Header().Get("RateLimit") != "" {
			t.Fatalf("excluded key: %d %v", w.Code, w.Header())
		}
	}
	if req("/", "k").Code != 200 || req("/", "k").Code != 429 {
		t.Fatal("the limit does not apply to other keys")
	}
	if l.Tokens("internal") != 1 {
		t.Fatal("an excluded key was debited")
	}
}

// TestDeniedHandler: a custom denial sees the Decision with the header
// fields already set.
func TestDeniedHandler(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	l := limit.MustNew(1, 1, limit.WithClock(clk), limit.WithName("api"))
	var seen limit.Decision
	h := httplimit.Wrap(l, ok, httplimit.WithDeniedHandler(func(w http.ResponseWriter, _ *http.Request, d limit.Decision) {
		seen = d
		if w.Header().Get("Retry-After") != "1" || w.Header().Get("RateLimit") != `"api";r=0;t=1` {
			t.Errorf("fields not set before the denied handler: %v", w.Header())
		}
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, "slow down")
	}))
	get(h, "192.0.2.1:1")
	w := get(h, "192.0.2.1:1")
	if w.Code != 429 || w.Body.String() != "slow down" || seen.Allowed || seen.Policy != "api" || seen.RetryAfter != time.Second {
		t.Fatalf("%d %q %+v", w.Code, w.Body.String(), seen)
	}
}

// TestPerRoute: With gives each route its own limiter and keeps the
// shared options (here the key and the hook).
func TestPerRoute(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	var decisions atomic.Int64
	base, err := httplimit.New(limit.MustNew(10, 10, limit.WithClock(clk), limit.WithName("api")),
		httplimit.WithKey(httplimit.Header("X-User")),
		httplimit.WithHook(func(*http.Request, string, limit.Decision) { decisions.Add(1) }))
	if err != nil {
		t.Fatal(err)
	}
	login, err := base.With(limit.MustNew(limit.Every(time.Minute), 1, limit.WithClock(clk), limit.WithName("login")))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /login", login.Handler(ok))
	mux.Handle("/", base.Handler(ok))
	req := func(method, path string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, path, nil)
		r.Header.Set("X-User", "ann")
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		return w
	}
	if w := req("POST", "/login"); w.Code != 200 || w.Header().Get("RateLimit-Policy") != `"login";q=1;w=60` {
		t.Fatalf("login: %d %q", w.Code, w.Header().Get("RateLimit-Policy"))
	}
	if w := req("POST", "/login"); w.Code != 429 || w.Header().Get("Retry-After") != "60" {
		t.Fatalf("second login: %d %q", w.Code, w.Header().Get("Retry-After"))
	}
	if w := req("GET", "/items"); w.Code != 200 || w.Header().Get("RateLimit") != `"api";r=9;t=1` {
		t.Fatalf("api: %d %q", w.Code, w.Header().Get("RateLimit"))
	}
	if decisions.Load() != 3 {
		t.Fatalf("the shared hook saw %d decisions", decisions.Load())
	}
	if _, err := (&httplimit.Middleware{}).With(limit.MustNew(1, 1)); !errors.Is(err, sketch.ErrInvalidConfig) {
		t.Fatalf("With on the zero Middleware: %v", err)
	}
	if _, err := base.With(nil); !errors.Is(err, sketch.ErrInvalidConfig) {
		t.Fatalf("With(nil): %v", err)
	}
}

// TestAllow: the form for routers that are not http.Handler chains.
func TestAllow(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	m, err := httplimit.New(limit.MustNew(1, 1, limit.WithClock(clk)))
	if err != nil {
		t.Fatal(err)
	}
	call := func() (bool, *httptest.ResponseRecorder) {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "192.0.2.1:1"
		w := httptest.NewRecorder()
		return m.Allow(w, r), w
	}
	if ok, w := call(); !ok || w.Header().Get("RateLimit") == "" || w.Body.Len() != 0 {
		t.Fatalf("admitted: %v %v %q", ok, w.Header(), w.Body.String())
	}
	if ok, w := call(); ok || w.Code != 429 {
		t.Fatalf("denied: %v %d", ok, w.Code)
	}
}

// TestNewRefuses: nil and zero limiters of either kind, typed or not.
func TestNewRefuses(t *testing.T) {
	for name, l := range map[string]httplimit.Limiter{
		"nil":            nil,
		"nil Limiter":    (*limit.Limiter)(nil),
		"zero Limiter":   &limit.Limiter{},
		"nil Multi":      (*limit.Multi)(nil),
		"zero Multi":     &limit.Multi{},
		"no policies":    noPolicies{&fakeLimiter{}},
		"bad limit":      badPolicy{limit.Policy{Name: "x", Limit: 0, Burst: 1}},
		"negative burst": badPolicy{limit.Policy{Name: "x", Limit: 1, Burst: -1}},
		"bad name":       badPolicy{limit.Policy{Name: "a\tb", Limit: 1, Burst: 1}},
	} {
		if _, err := httplimit.New(l); !errors.Is(err, sketch.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "httplimit: ") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

type noPolicies struct{ *fakeLimiter }

func (noPolicies) Policies() []limit.Policy { return nil }

type badPolicy struct{ p limit.Policy }

func (b badPolicy) DecideContext(context.Context, string, int) (limit.Decision, error) {
	return limit.Decision{}, nil
}
func (b badPolicy) Policies() []limit.Policy { return []limit.Policy{b.p} }
