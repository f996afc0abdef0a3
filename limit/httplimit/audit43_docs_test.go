package httplimit_test

import (
	"encoding/json"
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

func a43do(h http.Handler, remote string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = remote
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// httplimit/doc.go, "Answers": the example fields
//
//	RateLimit-Policy: "default";q=20;w=2
//	RateLimit: "default";r=13;t=1
//
// for limit.MustNew(10, 20) after 7 requests.
func TestAudit43DocHeaderExample(t *testing.T) {
	c := limittest.NewFakeClock()
	c.Set(1_000_000)
	l := limit.MustNew(10, 20, limit.WithClock(c))
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	h := httplimit.Wrap(l, ok)
	var w *httptest.ResponseRecorder
	for i := 0; i < 7; i++ {
		w = a43do(h, "192.0.2.1:1234")
	}
	if got := w.Header().Get("RateLimit-Policy"); got != `"default";q=20;w=2` {
		t.Errorf("RateLimit-Policy %q, doc shows %q", got, `"default";q=20;w=2`)
	}
	if got := w.Header().Get("RateLimit"); got != `"default";r=13;t=1` {
		t.Errorf("RateLimit %q, doc shows %q", got, `"default";r=13;t=1`)
	}
	// full bucket: t left out
	w = a43do(h, "192.0.2.2:1")
	if got := w.Header().Get("RateLimit"); got != `"default";r=19;t=1` {
		t.Logf("first request RateLimit %q", got)
	}
	// denial: 429, Retry-After whole seconds, never earlier than t
	for i := 0; i < 13; i++ {
		a43do(h, "192.0.2.1:1234")
	}
	w = a43do(h, "192.0.2.1:1234")
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "1" {
		t.Errorf("denial code %d Retry-After %q, want 429 and 1", w.Code, w.Header().Get("Retry-After"))
	}
	if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("denial Content-Type %q, doc: text/plain", ct)
	}
}

// "A request whose cost exceeds the burst can never be admitted: 429
// without Retry-After"; "IPv6 folded to its /64"; "a policy of burst 0
// announces w=1" is moot for New; ErrNoClientIP answered 500 with no
// internal text; WithProblemJSON: RFC 9457 body of the quota-exceeded type.
func TestAudit43DocAnswers(t *testing.T) {
	c := limittest.NewFakeClock()
	c.Set(1_000_000)
	l := limit.MustNew(10, 20, limit.WithClock(c))
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	m, err := httplimit.New(l, httplimit.WithCost(func(*http.Request) int { return 21 }))
	if err != nil {
		t.Fatal(err)
	}
	w := a43do(m.Handler(ok), "192.0.2.1:1")
	if w.Code != 429 || w.Header().Get("Retry-After") != "" {
		t.Errorf("cost > burst: code %d Retry-After %q; doc: 429 without Retry-After", w.Code, w.Header().Get("Retry-After"))
	}

	h := httplimit.Wrap(l, ok, httplimit.WithProblemJSON(true))
	for i := 0; i < 20; i++ {
		if w := a43do(h, "[2001:db8:1:2:aaaa::1]:80"); w.Code != 200 {
			t.Fatalf("request %d: %d", i, w.Code)
		}
	}
	w = a43do(h, "[2001:db8:1:2:bbbb::2]:80") // same /64
	if w.Code != 429 {
		t.Errorf("same /64 not limited together: %d", w.Code)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("problem Content-Type %q", ct)
	}
	var p map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || p["type"] != httplimit.ProblemType {
		t.Errorf("problem body %s (err %v), want type %s", w.Body.String(), err, httplimit.ProblemType)
	}
	if httplimit.ProblemType != "https://iana.org/assignments/http-problem-types#quota-exceeded" || httplimit.Draft != "draft-ietf-httpapi-ratelimit-headers-10" {
		t.Errorf("constants %q %q", httplimit.ProblemType, httplimit.Draft)
	}
	if w := a43do(h, "[2001:db8:1:3::1]:80"); w.Code != 200 {
		t.Errorf("other /64 limited: %d", w.Code)
	}
	for _, ra := range []string{"", "@"} {
		w := a43do(h, ra)
		if w.Code != 500 || strings.TrimSpace(w.Body.String()) != http.StatusText(500) {
			t.Errorf("RemoteAddr %q: %d %q; doc: 500, status text only", ra, w.Code, w.Body.String())
		}
	}
	if _, err := httplimit.RemoteIP()(&http.Request{RemoteAddr: "@"}); !errors.Is(err, httplimit.ErrNoClientIP) {
		t.Errorf("RemoteIP(@) err %v, doc: ErrNoClientIP", err)
	}
	if _, err := httplimit.New(nil); !errors.Is(err, sketch.ErrInvalidConfig) {
		t.Errorf("New(nil) err %v, doc: *sketch.ConfigError", err)
	}
	if _, err := httplimit.New(l, nil); !errors.Is(err, sketch.ErrInvalidConfig) {
		t.Errorf("New(l, nil option) err %v, doc: *sketch.ConfigError", err)
	}
	// Multi windows need distinct names: ConfigError Field "Name"
	a, b := limit.MustNew(10, 20), limit.MustNew(1000.0/3600, 1000)
	mu, _ := limit.NewMulti(a, b)
	_, err = httplimit.New(mu)
	var ce *sketch.ConfigError
	if !errors.As(err, &ce) || ce.Field != "Name" {
		t.Errorf("Multi without names: err %v, migrating.md: ConfigError Field \"Name\"", err)
	}
	_ = time.Second
}

func a43fields(t *testing.T, l httplimit.Limiter, opts ...httplimit.Option) http.Header {
	t.Helper()
	h := httplimit.Wrap(l, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), opts...)
	return a43do(h, "192.0.2.9:1").Header()
}

// httplimit/doc.go: "w (window, seconds) the time to refill it from empty
// as the limiter holds it (ceil(burst/rate) for an exact policy, a little
// more for an inexact one ...)"; migrating.md: "Every(140ms) x 50 announced
// 8" fixed: 7.
func TestAudit43PolicyWindow(t *testing.T) {
	cases := []struct {
		l    *limit.Limiter
		want string
	}{
		{limit.MustNew(limit.Every(140*time.Millisecond), 50), `"default";q=50;w=7`},
		{limit.MustNew(3, 10), `"default";q=10;w=4`},
		{limit.MustNew(1000.0/3600, 1000), `"default";q=1000;w=3600`},
		{limit.MustNew(5e-4, 1000), `"default";q=1000;w=2000128`},
		{limit.MustNew(10, 20, limit.WithName("api")), `"api";q=20;w=2`},
	}
	for _, c := range cases {
		if got := a43fields(t, c.l).Get("RateLimit-Policy"); got != c.want {
			t.Errorf("limit %v burst %d: RateLimit-Policy %q, want %q", c.l.Limit(), c.l.Burst(), got, c.want)
		}
	}
}

// Legacy fields: X-RateLimit-Limit (the burst), Remaining, Reset (seconds
// until the bucket is full, rounded up); a full bucket leaves t out.
func TestAudit43LegacyAndFullBucket(t *testing.T) {
	c := limittest.NewFakeClock()
	c.Set(1_000_000)
	l := limit.MustNew(10, 20, limit.WithClock(c))
	h := httplimit.Wrap(l, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), httplimit.WithLegacyHeaders(true))
	var w *httptest.ResponseRecorder
	for i := 0; i < 5; i++ {
		w = a43do(h, "192.0.2.1:1")
	}
	hd := w.Header()
	if hd.Get("X-RateLimit-Limit") != "20" || hd.Get("X-RateLimit-Remaining") != "15" || hd.Get("X-RateLimit-Reset") != "1" {
		t.Errorf("legacy fields %q %q %q; want 20, 15, 1 (0.5 s rounded up)", hd.Get("X-RateLimit-Limit"), hd.Get("X-RateLimit-Remaining"), hd.Get("X-RateLimit-Reset"))
	}
	// Peek-free full bucket: a Multi with an Inf window never binds.
	inf := limit.MustNew(limit.Inf, 5, limit.WithName("inf"))
	if got := a43fields(t, inf).Get("RateLimit"); strings.Contains(got, ";t=") {
		t.Errorf("Inf limiter RateLimit %q carries t, doc: left out when the bucket is full", got)
	}
	// X-Forwarded-For only with WithTrustedProxies(n): the n-th from the right
	k := httplimit.RemoteIP(httplimit.WithTrustedProxies(2))
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "10.0.0.1:5"
	r.Header.Set("X-Forwarded-For", "1.1.1.1, 203.0.113.7, 10.0.0.2")
	if key, err := k(r); err != nil || key != "203.0.113.7/32" {
		t.Errorf("WithTrustedProxies(2) key %q err %v, doc: the 2nd from the right, 203.0.113.7/32", key, err)
	}
	if key, _ := httplimit.RemoteIP()(r); key != "10.0.0.1/32" {
		t.Errorf("default key %q, doc: X-Forwarded-For never trusted by default", key)
	}
	r.Header.Set("X-Forwarded-For", "10.0.0.2")
	if _, err := k(r); !errors.Is(err, httplimit.ErrForwardedFor) {
		t.Errorf("short XFF: err %v, doc: ErrForwardedFor", err)
	}
}

// RemoteIP's doc: keys in CIDR form ("2001:db8:1:2::/64", "203.0.113.7/32");
// IPv4-mapped IPv6 counts as IPv4.
func TestAudit43RemoteIPKeyForms(t *testing.T) {
	for ra, want := range map[string]string{
		"[2001:db8:1:2:aaaa:bbbb:cccc:dddd]:443": "2001:db8:1:2::/64",
		"203.0.113.7:80":                         "203.0.113.7/32",
		"[::ffff:203.0.113.7]:80":                "203.0.113.7/32",
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = ra
		if key, err := httplimit.RemoteIP()(r); err != nil || key != want {
			t.Errorf("RemoteAddr %s: key %q err %v, doc: %q", ra, key, err, want)
		}
	}
}
