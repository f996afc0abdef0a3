package httplimit_test

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/lfgrudge/grudge/internal/testpanic"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/sketch"
)

// TestAudit125MisuseTypedOrClearPanic: New's misuse is a *sketch.ConfigError
// prefixed "httplimit: " (nil, typed-nil and zero limiters included); the
// key helpers' misuse panics "httplimit:"; the zero Middleware panics with
// its documented message; a cost above the burst is a 429 without
// Retry-After.
func TestAudit125MisuseTypedOrClearPanic(t *testing.T) {
	l, err := limit.New(10, 5, limit.WithSize(2, 16))
	if err != nil {
		t.Fatal(err)
	}
	badName, err := limit.New(10, 5, limit.WithSize(2, 16), limit.WithName("a\nb"))
	if err != nil {
		t.Fatal(err)
	}
	var zero limit.Limiter
	var typedNil *limit.Limiter
	for _, c := range []struct {
		name string
		lim  httplimit.Limiter
		opts []httplimit.Option
	}{
		{"nil limiter", nil, nil},
		{"typed nil limiter", typedNil, nil},
		{"zero limiter", &zero, nil},
		{"nil option", l, []httplimit.Option{nil}},
		{"nil WithKey", l, []httplimit.Option{httplimit.WithKey(nil)}},
		{"nil WithErrorHandler", l, []httplimit.Option{httplimit.WithErrorHandler(nil)}},
		{"unprintable policy name", badName, nil},
	} {
		m, err := httplimit.New(c.lim, c.opts...)
		var ce *sketch.ConfigError
		if m != nil || !errors.As(err, &ce) || !errors.Is(err, sketch.ErrInvalidConfig) || !strings.HasPrefix(fmt.Sprint(err), "httplimit: ") {
			t.Errorf("%s: New = %v, %v; want nil and a *sketch.ConfigError prefixed \"httplimit: \"", c.name, m, err)
		}
	}
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"WithIPv4Prefix(-1)", func() { httplimit.RemoteIP(httplimit.WithIPv4Prefix(-1)) }},
		{"WithIPv4Prefix(33)", func() { httplimit.RemoteIP(httplimit.WithIPv4Prefix(33)) }},
		{"WithIPv6Prefix(129)", func() { httplimit.RemoteIP(httplimit.WithIPv6Prefix(129)) }},
		{"WithIPv6Prefix(MaxInt64)", func() { httplimit.RemoteIP(httplimit.WithIPv6Prefix(math.MaxInt64)) }},
		{"WithTrustedProxies(-1)", func() { httplimit.RemoteIP(httplimit.WithTrustedProxies(-1)) }},
		{"Header(\"\")", func() { httplimit.Header("") }},
		{"Func(nil)", func() { httplimit.Func(nil) }},
		{"zero Middleware", func() {
			var m httplimit.Middleware
			m.Allow(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
		}},
	} {
		if got := testpanic.Message(c.f); !strings.HasPrefix(got, "httplimit:") {
			t.Errorf("%s: panic %q, want one starting \"httplimit:\"", c.name, got)
		}
	}
	m, err := httplimit.New(l, httplimit.WithCost(func(*http.Request) int { return math.MaxInt64 }))
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	m.Handler(http.NotFoundHandler()).ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "" {
		t.Errorf("cost MaxInt64: %d Retry-After %q, want 429 without Retry-After", w.Code, w.Header().Get("Retry-After"))
	}
	for _, cost := range []int{0, -1, math.MinInt64} {
		m, err := httplimit.New(l, httplimit.WithCost(func(*http.Request) int { return cost }))
		if err != nil {
			t.Fatal(err)
		}
		w := httptest.NewRecorder()
		m.Handler(http.NotFoundHandler()).ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		if w.Code != http.StatusInternalServerError {
			t.Errorf("cost %d: status %d, want 500 (ErrBadCost to the default error handler)", cost, w.Code)
		}
	}
}
