package httplimit_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

var ok = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })

func get(h http.Handler, remote string, hdr ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = remote
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Add(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestDenialHeaders(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	l := limit.MustNew(2, 3, limit.WithClock(clk), limit.WithName("api"))
	var hooked atomic.Int64
	h := httplimit.Wrap(l, ok, httplimit.WithLegacyHeaders(true),
		httplimit.WithHook(func(_ *http.Request, key string, d limit.Decision) {
			if !strings.HasPrefix(key, "192.0.2.") || !strings.HasSuffix(key, "/32") {
				t.Errorf("hook key %q", key)
			}
			hooked.Add(1)
		}))
	for i := range 3 {
		w := get(h, "192.0.2.1:1234")
		if w.Code != 200 {
			t.Fatalf("request %d: %d", i, w.Code)
		}
		if got := w.Header().Get("RateLimit-Policy"); got != `"api";q=3;w=2` {
			t.Fatalf("RateLimit-Policy %q", got)
		}
	}
	clk.Advance(100 * time.Millisecond)
	w := get(h, "192.0.2.1:1234")
	if w.Code != http.StatusTooManyRequests {
		t.Fatalf("4th request: %d", w.Code)
	}
	// debt 3 - 0.2 = 2.8; needs 2: 0.4 s -> Retry-After 1; the next token
	// also in 0.4 s -> t=1; full in 1.4 s -> X-RateLimit-Reset 2.
	for k, want := range map[string]string{
		"Retry-After": "1", "RateLimit": `"api";r=0;t=1`,
		"X-RateLimit-Limit": "3", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "2",
	} {
		if got := w.Header().Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if hooked.Load() != 4 {
		t.Fatalf("hook called %d times", hooked.Load())
	}
	if get(h, "192.0.2.2:1").Code != 200 {
		t.Fatal("another client denied")
	}
}

// Retry-After is the RetryAfter rounded up to whole seconds: a retry at
// that many seconds is admitted.
func TestRetryAfterSeconds(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	l := limit.MustNew(limit.Every(1500*time.Millisecond), 1, limit.WithClock(clk))
	h := httplimit.Wrap(l, ok)
	get(h, "[2001:db8::1]:80")
	w := get(h, "[2001:db8::1]:80")
	if w.Code != 429 || w.Header().Get("Retry-After") != "2" {
		t.Fatalf("%d Retry-After %q", w.Code, w.Header().Get("Retry-After"))
	}
	clk.Advance(2 * time.Second)
	if get(h, "[2001:db8::1]:80").Code != 200 {
		t.Fatal("retry at Retry-After denied")
	}
}

func TestIPv6Folding(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	l := limit.MustNew(1, 1, limit.WithClock(clk))
	h := httplimit.Wrap(l, ok)
	if get(h, "[2001:db8:1:2::1]:80").Code != 200 {
		t.Fatal("first denied")
	}
	if get(h, "[2001:db8:1:2:ffff::9]:80").Code != 429 {
		t.Fatal("same /64 not folded")
	}
	if get(h, "[2001:db8:1:3::1]:80").Code != 200 {
		t.Fatal("another /64 denied")
	}
	h128 := httplimit.Wrap(limit.MustNew(1, 1, limit.WithClock(clk)), ok,
		httplimit.WithKey(httplimit.RemoteIP(httplimit.WithIPv6Prefix(128))))
	get(h128, "[2001:db8::1]:80")
	if get(h128, "[2001:db8::2]:80").Code != 200 {
		t.Fatal("/128 folded")
	}
}

func TestForwardedFor(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	plain := httplimit.Wrap(limit.MustNew(1, 1, limit.WithClock(clk)), ok)
	get(plain, "10.0.0.1:1", "X-Forwarded-For", "198.51.100.1")
	if get(plain, "10.0.0.1:1", "X-Forwarded-For", "198.51.100.2").Code != 429 {
		t.Fatal("X-Forwarded-For trusted by default")
	}
	key := httplimit.RemoteIP(httplimit.WithTrustedProxies(2))
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Add("X-Forwarded-For", "6.6.6.6, 198.51.100.7")
	r.Header.Add("X-Forwarded-For", "10.0.0.2")
	if k, err := key(r); err != nil || k != "198.51.100.7/32" {
		t.Fatalf("2 trusted proxies: %q %v", k, err)
	}
	r.Header.Del("X-Forwarded-For")
	r.Header.Set("X-Forwarded-For", "198.51.100.7")
	if _, err := key(r); err == nil {
		t.Fatal("fewer entries than trusted proxies accepted")
	}
}

func TestBadRequests(t *testing.T) {
	l := limit.MustNew(1, 1)
	h := httplimit.Wrap(l, ok)
	for _, remote := range []string{"", "@", "not-an-ip:80", "/run/app.sock"} {
		if w := get(h, remote); w.Code != 500 || w.Body.String() != "Internal Server Error\n" {
			t.Fatalf("RemoteAddr %q: %d %q", remote, w.Code, w.Body.String())
		}
	}
	hh := httplimit.Wrap(l, ok, httplimit.WithKey(httplimit.Header("X-Api-Key")))
	if w := get(hh, "192.0.2.1:1"); w.Code != 400 || w.Body.String() != "Bad Request\n" {
		t.Fatalf("missing header: %d %q", w.Code, w.Body.String())
	}
	hx := httplimit.Wrap(l, ok, httplimit.WithKey(httplimit.RemoteIP(httplimit.WithTrustedProxies(1))))
	if w := get(hx, "192.0.2.1:1", "X-Forwarded-For", "junk<script>"); w.Code != 400 || w.Body.String() != "Bad Request\n" {
		t.Fatalf("bad X-Forwarded-For: %d %q", w.Code, w.Body.String())
	}
	if _, err := httplimit.RemoteIP()(nil); !errors.Is(err, httplimit.ErrNilRequest) {
		t.Fatalf("nil request: %v", err)
	}
	if _, err := httplimit.New(limit.MustNew(1, 1, limit.WithName("bad\nname"))); err == nil {
		t.Fatal("non-ASCII policy name accepted")
	}
	for name, f := range map[string]func(){
		"prefix": func() { httplimit.RemoteIP(httplimit.WithIPv6Prefix(129)) },
		"proxy":  func() { httplimit.RemoteIP(httplimit.WithTrustedProxies(-1)) },
		"next":   func() { httplimit.Wrap(l, nil) },
	} {
		func() {
			defer func() {
				if s, _ := recover().(string); !strings.HasPrefix(s, "httplimit: ") {
					t.Errorf("%s: panic %q", name, s)
				}
			}()
			f()
		}()
	}
	var costErr error
	hc := httplimit.Wrap(l, ok, httplimit.WithCost(func(*http.Request) int { return 0 }))
	if w := get(hc, "192.0.2.9:1"); w.Code != 500 || w.Body.String() != "Internal Server Error\n" {
		t.Fatalf("cost 0: %d %q", w.Code, w.Body.String())
	}
	hc = httplimit.Wrap(l, ok, httplimit.WithCost(func(*http.Request) int { return -1 }),
		httplimit.WithErrorHandler(func(w http.ResponseWriter, _ *http.Request, err error) { costErr = err; w.WriteHeader(503) }))
	if w := get(hc, "192.0.2.9:1"); w.Code != 503 || !errors.Is(costErr, httplimit.ErrBadCost) {
		t.Fatalf("cost -1 to the error handler: %d %v", w.Code, costErr)
	}
}

func TestProblemJSONAndNever(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	l := limit.MustNew(1, 2, limit.WithClock(clk))
	h := httplimit.Wrap(l, ok, httplimit.WithProblemJSON(true),
		httplimit.WithCost(func(r *http.Request) int {
			if r.URL.Path == "/big" {
				return 3
			}
			return 2
		}))
	get(h, "192.0.2.1:1")
	w := get(h, "192.0.2.1:1")
	if w.Code != 429 || w.Header().Get("Content-Type") != "application/problem+json" {
		t.Fatalf("%d %q", w.Code, w.Header().Get("Content-Type"))
	}
	var p httplimit.Problem
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatal(err)
	}
	if p.Type != httplimit.ProblemType || p.Status != 429 || p.Title != httplimit.ProblemTitle || p.RetryAfter == nil || *p.RetryAfter != 2 ||
		len(p.ViolatedPolicies) != 1 || p.ViolatedPolicies[0] != "default" {
		t.Fatalf("problem %+v", p)
	}
	r := httptest.NewRequest("GET", "/big", nil)
	r.RemoteAddr = "192.0.2.3:1"
	w = httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != 429 || w.Header().Get("Retry-After") != "" || !strings.Contains(w.Body.String(), "never") {
		t.Fatalf("never: %d Retry-After %q %s", w.Code, w.Header().Get("Retry-After"), w.Body.String())
	}
}

// Against a listening server on 127.0.0.1, with a real http.Client.
func TestRealServer(t *testing.T) {
	l := limit.MustNew(limit.Every(time.Hour), 5)
	srv := httptest.NewServer(httplimit.Wrap(l, ok))
	defer srv.Close()
	if !strings.HasPrefix(srv.URL, "http://127.0.0.1:") {
		t.Fatalf("server at %s", srv.URL)
	}
	codes := map[int]int{}
	var last *http.Response
	for range 8 {
		resp, err := srv.Client().Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		codes[resp.StatusCode]++
		last = resp
	}
	if codes[200] != 5 || codes[429] != 3 {
		t.Fatalf("codes %v", codes)
	}
	if ra := last.Header.Get("Retry-After"); ra != "3600" { // 1 token at 1/h
		t.Fatalf("Retry-After %q", ra)
	}
	if got := last.Header.Get("RateLimit-Policy"); got != `"default";q=5;w=18000` {
		t.Fatalf("RateLimit-Policy %q", got)
	}
}
