package httplimit_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testpanic"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/sketch"
)

func audit130IsConfigError(err error) bool {
	var ce *sketch.ConfigError
	return errors.As(err, &ce) && errors.Is(err, sketch.ErrInvalidConfig) && strings.HasPrefix(fmt.Sprint(err), "httplimit: ")
}

// audit130Lim is a custom httplimit.Limiter answering fixed policies and a
// fixed decision (or error).
type audit130Lim struct {
	pols []limit.Policy
	d    limit.Decision
	err  error
}

func (a *audit130Lim) DecideContext(context.Context, string, int) (limit.Decision, error) {
	return a.d, a.err
}
func (a *audit130Lim) Policies() []limit.Policy { return a.pols }

var audit130OK = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) })

func audit130Do(h http.Handler, remote string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = remote
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// TestAudit130NilFunctionsRemoveTheirHook: WithHook, WithSkip,
// WithExcludedKey, WithLimiterError and WithDeniedHandler with nil remove the
// function ("nil removes it" / "nil restores the default"); WithCost(nil) is
// either refused or the default cost 1; nothing panics at request time.
func TestAudit130NilFunctionsRemoveTheirHook(t *testing.T) {
	l := limit.MustNew(1, 1, limit.WithCapacity(100, 0.001))
	i := 0
	for _, c := range []struct {
		name string
		opt  httplimit.Option
	}{
		{"WithHook(nil)", httplimit.WithHook(nil)},
		{"WithSkip(nil)", httplimit.WithSkip(nil)},
		{"WithExcludedKey(nil)", httplimit.WithExcludedKey(nil)},
		{"WithLimiterError(nil)", httplimit.WithLimiterError(nil)},
		{"WithDeniedHandler(nil)", httplimit.WithDeniedHandler(nil)},
		{"WithCost(nil)", httplimit.WithCost(nil)},
	} {
		i++
		m, err := httplimit.New(l, c.opt)
		if err != nil {
			if c.name == "WithCost(nil)" && audit130IsConfigError(err) {
				continue
			}
			t.Errorf("%s: New = %v, want accepted", c.name, err)
			continue
		}
		remote := "192.0.2." + strconv.Itoa(i) + ":1"
		var w1, w2 *httptest.ResponseRecorder
		if msg := testpanic.Message(func() {
			h := m.Handler(audit130OK)
			w1, w2 = audit130Do(h, remote), audit130Do(h, remote)
		}); msg != "" {
			t.Errorf("%s: a request panicked: %s", c.name, msg)
			continue
		}
		if w1.Code != 204 || w2.Code != http.StatusTooManyRequests || w2.Header().Get("Retry-After") == "" {
			t.Errorf("%s: burst 1: codes %d %d (Retry-After %q), want 204 then 429 with Retry-After", c.name, w1.Code, w2.Code, w2.Header().Get("Retry-After"))
		}
	}
}

// TestAudit130HandlerNilAndZeroMiddleware: Handler(nil) panics "httplimit:"
// ("It panics if next is nil"); the zero Middleware's Handler panics with
// "httplimit: zero Middleware" and its With is a *sketch.ConfigError; With
// refuses a nil limiter and a nil option as New does, leaving m working.
func TestAudit130HandlerNilAndZeroMiddleware(t *testing.T) {
	l := limit.MustNew(10, 5, limit.WithSize(2, 16))
	m, err := httplimit.New(l)
	if err != nil {
		t.Fatal(err)
	}
	if got := testpanic.Message(func() { m.Handler(nil) }); !strings.HasPrefix(got, "httplimit:") {
		t.Errorf("Handler(nil): panic %q, want one starting \"httplimit:\"", got)
	}
	var z httplimit.Middleware
	if got := testpanic.Message(func() { z.Handler(audit130OK) }); !strings.HasPrefix(got, "httplimit: zero Middleware") {
		t.Errorf("zero Middleware Handler: panic %q", got)
	}
	if mm, err := z.With(l); mm != nil || !audit130IsConfigError(err) {
		t.Errorf("zero Middleware With = %v, %v; want a *sketch.ConfigError", mm, err)
	}
	var zl limit.Limiter
	var zm limit.Multi
	for _, c := range []struct {
		name string
		l    httplimit.Limiter
		opts []httplimit.Option
	}{
		{"nil", nil, nil},
		{"zero Limiter", &zl, nil},
		{"zero Multi", &zm, nil},
		{"nil option", l, []httplimit.Option{httplimit.WithLegacyHeaders(true), nil}},
		{"nil WithKey", l, []httplimit.Option{httplimit.WithKey(nil)}},
	} {
		if mm, err := m.With(c.l, c.opts...); mm != nil || !audit130IsConfigError(err) {
			t.Errorf("With(%s) = %v, %v; want nil and a *sketch.ConfigError", c.name, mm, err)
		}
	}
	if w := audit130Do(m.Handler(audit130OK), "192.0.2.1:1"); w.Code != 204 {
		t.Errorf("m after refused Withs: %d, want 204", w.Code)
	}
	if got := testpanic.Message(func() {
		var zz httplimit.Middleware
		zz.SetHeaders(http.Header{}, limit.Decision{})
	}); got != "" && !strings.HasPrefix(got, "httplimit:") {
		t.Errorf("zero Middleware SetHeaders: panic %q, want none or one starting \"httplimit:\"", got)
	}
}

// TestAudit130BadPolicies: a custom Limiter whose Policies hold a NaN, zero,
// negative or -Inf limit, a negative burst, a duplicate, empty-list or
// unprintable name is refused by New with a *sketch.ConfigError (New doc).
func TestAudit130BadPolicies(t *testing.T) {
	for _, c := range []struct {
		name string
		pols []limit.Policy
	}{
		{"empty list", []limit.Policy{}},
		{"NaN limit", []limit.Policy{{Name: "a", Limit: limit.Limit(math.NaN()), Burst: 1}}},
		{"zero limit", []limit.Policy{{Name: "a", Limit: 0, Burst: 1}}},
		{"-0 limit", []limit.Policy{{Name: "a", Limit: limit.Limit(math.Copysign(0, -1)), Burst: 1}}},
		{"-Inf limit", []limit.Policy{{Name: "a", Limit: limit.Limit(math.Inf(-1)), Burst: 1}}},
		{"negative burst", []limit.Policy{{Name: "a", Limit: 1, Burst: -1}}},
		{"MinInt burst", []limit.Policy{{Name: "a", Limit: 1, Burst: math.MinInt}}},
		{"duplicate", []limit.Policy{{Name: "a", Limit: 1, Burst: 1}, {Name: "a", Limit: 2, Burst: 1}}},
		{"tab in name", []limit.Policy{{Name: "a\tb", Limit: 1, Burst: 1}}},
		{"non-ASCII name", []limit.Policy{{Name: "é", Limit: 1, Burst: 1}}},
		{"invalid UTF-8 name", []limit.Policy{{Name: "\xff", Limit: 1, Burst: 1}}},
	} {
		var m *httplimit.Middleware
		var err error
		if msg := testpanic.Message(func() { m, err = httplimit.New(&audit130Lim{pols: c.pols}) }); msg != "" {
			t.Errorf("%s: New panicked: %s", c.name, msg)
			continue
		}
		if m != nil || !audit130IsConfigError(err) {
			t.Errorf("%s: New = %v, %v; want nil and a *sketch.ConfigError prefixed \"httplimit: \"", c.name, m, err)
		}
	}
}

// TestAudit130ExtremeDecisionsHeaders: a custom Limiter may answer any
// Decision; on extreme policies (rate 5e-324, 1e300, +Inf, burst 0 and
// MaxInt) and decisions (RetryAfter InfDuration, MaxInt64, negative;
// Remaining negative and MaxInt; ResetAfter negative) the answer is 204 or
// 429, never a panic, and every header field holds no NaN, Inf, sign or
// exponent, with Retry-After, when present, a whole number in [1,
// 999999999999999] (SetHeaders doc); a negative Remaining (a limiter
// breaking Decision's contract) is written as 0.
func TestAudit130ExtremeDecisionsHeaders(t *testing.T) {
	pols := [][]limit.Policy{
		{{Name: "tiny", Limit: 5e-324, Burst: 1}},
		{{Name: "huge", Limit: 1e300, Burst: math.MaxInt}},
		{{Name: "inf", Limit: limit.Limit(math.Inf(1)), Burst: 0}},
		{{Name: "zero-burst", Limit: 1, Burst: 0}},
	}
	decs := []limit.Decision{
		{Allowed: false, RetryAfter: limit.InfDuration, ResetAfter: limit.InfDuration, Remaining: 0},
		{Allowed: false, RetryAfter: -time.Second, ResetAfter: -time.Hour, Remaining: -5},
		{Allowed: false, RetryAfter: 1, ResetAfter: 1, Remaining: math.MinInt},
		{Allowed: true, Remaining: math.MaxInt, ResetAfter: math.MaxInt64, NextAfter: math.MaxInt64},
		{Allowed: true, Remaining: -1, ResetAfter: math.MinInt64, NextAfter: math.MinInt64},
		{Allowed: false, Never: true, RetryAfter: limit.InfDuration},
	}
	for _, p := range pols {
		for i, d := range decs {
			d.Policy, d.Limit, d.Burst = p[0].Name, p[0].Limit, p[0].Burst
			m, err := httplimit.New(&audit130Lim{pols: p, d: d}, httplimit.WithLegacyHeaders(true))
			if err != nil {
				t.Errorf("%s: New = %v", p[0].Name, err)
				continue
			}
			var w *httptest.ResponseRecorder
			if msg := testpanic.Message(func() { w = audit130Do(m.Handler(audit130OK), "192.0.2.7:1") }); msg != "" {
				t.Errorf("%s decision %d: panicked: %s", p[0].Name, i, msg)
				continue
			}
			if want := map[bool]int{true: 204, false: 429}[d.Allowed]; w.Code != want {
				t.Errorf("%s decision %d: code %d, want %d", p[0].Name, i, w.Code, want)
			}
			for name, vs := range w.Header() {
				for _, v := range vs {
					lv := strings.ToLower(v)
					if strings.Contains(lv, "nan") || strings.Contains(lv, "inf") || strings.Contains(lv, "e+") {
						t.Errorf("%s decision %d: %s: %q holds a non-integer number", p[0].Name, i, name, v)
					}
					if strings.Contains(v, "=-") || name == "X-Ratelimit-Remaining" && strings.HasPrefix(v, "-") {
						// Decision.Remaining is documented "at least 0"; a
						// limiter answering less breaks its own contract,
						// and SetHeaders writes 0 (since stop 64: it passed
						// the sign through before).
						t.Errorf("%s decision %d: %s: %q holds a negative number", p[0].Name, i, name, v)
					}
				}
			}
			if ra := w.Header().Get("Retry-After"); ra != "" {
				n, err := strconv.ParseInt(ra, 10, 64)
				if err != nil || n < 1 || n > 999999999999999 {
					t.Errorf("%s decision %d: Retry-After %q, want a whole number in [1, 999999999999999]", p[0].Name, i, ra)
				}
				if d.Never {
					t.Errorf("%s decision %d: Never decision got Retry-After %q", p[0].Name, i, ra)
				}
			}
		}
	}
}

// TestAudit130LimiterErrorWithoutDecision: a limiter error with no decision
// (the zero Decision) goes to the error handler wrapped in ErrLimiter (503
// by default), consumes nothing and writes no Retry-After; a nil error with
// the zero Decision (not Allowed, not Never, RetryAfter 0) is still a 429
// (never admitted silently).
func TestAudit130LimiterErrorWithoutDecision(t *testing.T) {
	pols := []limit.Policy{{Name: "p", Limit: 1, Burst: 1}}
	boom := errors.New("store down")
	var got error
	m, err := httplimit.New(&audit130Lim{pols: pols, err: boom},
		httplimit.WithErrorHandler(func(w http.ResponseWriter, _ *http.Request, err error) { got = err; w.WriteHeader(503) }))
	if err != nil {
		t.Fatal(err)
	}
	w := audit130Do(m.Handler(audit130OK), "192.0.2.8:1")
	if w.Code != 503 || !errors.Is(got, httplimit.ErrLimiter) || !errors.Is(got, boom) || w.Header().Get("Retry-After") != "" {
		t.Errorf("limiter error: code %d err %v Retry-After %q, want 503, ErrLimiter wrapping the cause, none", w.Code, got, w.Header().Get("Retry-After"))
	}
	m2, err := httplimit.New(&audit130Lim{pols: pols})
	if err != nil {
		t.Fatal(err)
	}
	if w := audit130Do(m2.Handler(audit130OK), "192.0.2.8:1"); w.Code == 204 {
		t.Errorf("zero Decision with nil error admitted (code %d)", w.Code)
	}
}

// TestAudit130KeyFuncsOnJunk: RemoteIP on empty, portless, bracketed,
// zoned and garbage RemoteAddrs returns an error (ErrNoClientIP: 500 by
// default) or a CIDR key, never panics; prefixes 0 fold everything to one
// key; a huge WithTrustedProxies refuses a short X-Forwarded-For with
// ErrForwardedFor; Header on an empty header value and Func returning ""
// or a 1 MiB key never panic, and the middleware answers each.
func TestAudit130KeyFuncsOnJunk(t *testing.T) {
	rip := httplimit.RemoteIP()
	for _, ra := range []string{"", "garbage", ":", ":1", "[::1]", "1.2.3.4", "[fe80::1%eth0]:1", "1.2.3.4:99999",
		"[::ffff:1.2.3.4]:1", strings.Repeat("9", 1<<16), "[" + strings.Repeat(":", 100) + "]:1", "\x00:1"} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = ra
		var k string
		var err error
		if msg := testpanic.Message(func() { k, err = rip(r) }); msg != "" {
			t.Errorf("RemoteIP on %.30q: panicked: %s", ra, msg)
			continue
		}
		if err == nil && !strings.Contains(k, "/") {
			t.Errorf("RemoteIP on %.30q: key %q, want a CIDR prefix", ra, k)
		}
	}
	zero := httplimit.RemoteIP(httplimit.WithIPv4Prefix(0), httplimit.WithIPv6Prefix(0))
	r1 := httptest.NewRequest("GET", "/", nil)
	r1.RemoteAddr = "203.0.113.9:1"
	r2 := httptest.NewRequest("GET", "/", nil)
	r2.RemoteAddr = "198.51.100.1:2"
	r3 := httptest.NewRequest("GET", "/", nil)
	r3.RemoteAddr = "[2001:db8::1]:3"
	k1, e1 := zero(r1)
	k2, e2 := zero(r2)
	k3, e3 := zero(r3)
	if e1 != nil || e2 != nil || e3 != nil || k1 != k2 || k1 != "0.0.0.0/0" || k3 != "::/0" {
		t.Errorf("prefix 0: keys %q %q %q (%v %v %v), want 0.0.0.0/0 twice and ::/0", k1, k2, k3, e1, e2, e3)
	}
	far := httplimit.RemoteIP(httplimit.WithTrustedProxies(math.MaxInt))
	r4 := httptest.NewRequest("GET", "/", nil)
	r4.Header.Set("X-Forwarded-For", "1.2.3.4, 5.6.7.8")
	if _, err := far(r4); !errors.Is(err, httplimit.ErrForwardedFor) {
		t.Errorf("WithTrustedProxies(MaxInt) on 2 entries: %v, want ErrForwardedFor", err)
	}
	r5 := httptest.NewRequest("GET", "/", nil)
	r5.Header["X-Api-Key"] = []string{""}
	if msg := testpanic.Message(func() { _, _ = httplimit.Header("X-Api-Key")(r5) }); msg != "" {
		t.Errorf("Header on an empty value panicked: %s", msg)
	}
	if msg := testpanic.Message(func() { _, _ = httplimit.Header("not a header name\x00")(r5) }); msg != "" {
		t.Errorf("Header with an invalid name panicked at request time: %s", msg)
	}
	if _, err := httplimit.Header("X-Api-Key")(nil); !errors.Is(err, httplimit.ErrNilRequest) {
		t.Errorf("Header on a nil request: %v, want ErrNilRequest", err)
	}
	if _, err := httplimit.Func(func(*http.Request) string { return "x" })(nil); err != nil && !errors.Is(err, httplimit.ErrNilRequest) {
		t.Errorf("Func on a nil request: %v, want nil or ErrNilRequest", err)
	}
	l := limit.MustNew(1, 1, limit.WithSize(4, 1024), limit.WithSeed(130))
	for _, key := range []string{"", strings.Repeat("k", 1<<20)} {
		h := httplimit.Wrap(l, audit130OK, httplimit.WithKey(httplimit.Func(func(*http.Request) string { return key })))
		w1, w2 := audit130Do(h, "192.0.2.1:1"), audit130Do(h, "192.0.2.1:1")
		if w1.Code != 204 || w2.Code != 429 {
			t.Errorf("key len %d: codes %d %d, want 204 429", len(key), w1.Code, w2.Code)
		}
	}
}
