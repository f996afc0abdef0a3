package httplimit

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// limit/httplimit/doc.go:55-56: the example fields for limit.MustNew(10, 20)
// after 7 requests: RateLimit-Policy: "default";q=20;w=2 and
// RateLimit: "default";r=13;t=1.
func TestAudit72DocExampleFields(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	l := limit.MustNew(10, 20, limit.WithClock(clk))
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	h := Wrap(l, ok, WithProblemJSON(true)) // README.md:127's spelling
	var rec *httptest.ResponseRecorder
	for i := 0; i < 7; i++ {
		rec = httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/", nil)
		req.RemoteAddr = "192.0.2.1:1234"
		h.ServeHTTP(rec, req)
	}
	if rec.Code != 200 {
		t.Fatalf("code %d", rec.Code)
	}
	if got := rec.Header().Get("RateLimit-Policy"); got != `"default";q=20;w=2` {
		t.Errorf(`doc.go:55: RateLimit-Policy %q, doc shows "default";q=20;w=2`, got)
	}
	if got := rec.Header().Get("RateLimit"); got != `"default";r=13;t=1` {
		t.Errorf(`doc.go:56: RateLimit %q, doc shows "default";r=13;t=1`, got)
	}
	if Draft != "draft-ietf-httpapi-ratelimit-headers-10" {
		t.Errorf("README.md:123 names -10, Draft is %q", Draft)
	}
}

// doc.go:41-45: RemoteAddr "" or "@" is answered 500 with status text only;
// doc.go:33-34: IPv6 folded to /64.
func TestAudit72NoClientIPAndIPv6(t *testing.T) {
	l := limit.MustNew(10, 20, limit.WithClock(sketchtest.NewFakeClock()))
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	h := Wrap(l, ok)
	for _, ra := range []string{"", "@"} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/", nil)
		req.RemoteAddr = ra
		h.ServeHTTP(rec, req)
		if rec.Code != 500 {
			t.Errorf("doc.go:43: RemoteAddr %q answered %d, want 500", ra, rec.Code)
		}
		if b := strings.TrimSpace(rec.Body.String()); b != http.StatusText(500) {
			t.Errorf("doc.go:44: body %q, want the status text only", b)
		}
	}
	req := httptest.NewRequest("GET", "/", nil)
	req.RemoteAddr = "@"
	if _, err := RemoteIP()(req); !errors.Is(err, ErrNoClientIP) {
		t.Errorf("doc.go:42: RemoteIP on \"@\": %v, want ErrNoClientIP", err)
	}
	a := httptest.NewRequest("GET", "/", nil)
	a.RemoteAddr = "[2001:db8:1:2:3:4:5:6]:80"
	b := httptest.NewRequest("GET", "/", nil)
	b.RemoteAddr = "[2001:db8:1:2:ffff::1]:81"
	ka, _ := RemoteIP()(a)
	kb, _ := RemoteIP()(b)
	if ka != kb {
		t.Errorf("doc.go:33: same /64 keys differ: %q %q", ka, kb)
	}
}

// doc.go:76-78: a cost above the burst: 429 without Retry-After.
func TestAudit72AboveBurst(t *testing.T) {
	l := limit.MustNew(10, 20, limit.WithClock(sketchtest.NewFakeClock()))
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	h := Wrap(l, ok, WithCost(func(*http.Request) int { return 21 }))
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/", nil)
	req.RemoteAddr = "192.0.2.1:1"
	h.ServeHTTP(rec, req)
	if rec.Code != 429 || rec.Header().Get("Retry-After") != "" {
		t.Errorf("doc.go:77: cost 21 > burst 20: %d, Retry-After %q; want 429 without Retry-After", rec.Code, rec.Header().Get("Retry-After"))
	}
}
