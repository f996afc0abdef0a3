// Package check drives an example server's handler through the behaviour
// every example shares (see package examples).
package check

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/lfgrudge/grudge/limit/httplimit"
)

// Server checks h: /healthz is never limited and carries no fields; a
// client's first GET / carries both windows of the Multi; POST /login is
// limited on its own (burst 2, then 429 with Retry-After), while GET /
// still admits the same client.
func Server(t *testing.T, h http.Handler) {
	t.Helper()
	do := func(method, path string) *http.Response {
		r := httptest.NewRequest(method, path, nil)
		r.RemoteAddr = "[2001:db8::7]:4242"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		resp := w.Result()
		io.Copy(io.Discard, resp.Body)
		return resp
	}
	for range 30 {
		if resp := do("GET", "/healthz"); resp.StatusCode != 200 || resp.Header.Get("RateLimit-Policy") != "" {
			t.Fatalf("/healthz: %d %v", resp.StatusCode, resp.Header)
		}
	}
	resp := do("GET", "/")
	if got, want := resp.Header.Get("RateLimit-Policy"), `"per-second";q=20;w=2, "per-hour";q=1000;w=3600`; resp.StatusCode != 200 || got != want {
		t.Fatalf("GET /: %d RateLimit-Policy %q; want %q", resp.StatusCode, got, want)
	}
	for i := range 2 {
		if resp := do("POST", "/login"); resp.StatusCode != 200 || resp.Header.Get("RateLimit-Policy") != `"per-second";q=20;w=2, "per-hour";q=1000;w=3600, "login";q=2;w=24` {
			t.Fatalf("login %d: %d %v", i, resp.StatusCode, resp.Header)
		}
	}
	if resp := do("POST", "/login"); resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "12" ||
		resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("third login: %d %v", resp.StatusCode, resp.Header)
	}
	if resp := do("GET", "/"); resp.StatusCode != 200 {
		t.Fatalf("GET / after the logins: %d", resp.StatusCode)
	}
}

// serve drives h as a client at remote would, with the given
// extra header pairs.
func serve(h http.Handler, method, path, remote string, hdr ...string) *http.Response {
	r := httptest.NewRequest(method, path, nil)
	r.RemoteAddr = remote
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Result()
}

// Doc checks what package examples' doc says every server does,
// with the fields the library now sets for stacked middlewares (the
// package doc of httplimit: "the answer lists every policy that decided
// it"): /healthz never limited and without fields (even from a Unix
// socket); GET / carries both windows of the Multi; POST /login is
// limited by its own limiter (5/min, bursts of 2) per client, IPv6 per
// /64 and IPv4 whole, X-Forwarded-For not trusted; its denial is 429
// problem+json of the quota-exceeded type naming "login", Retry-After 12
// (never earlier than the listed t); a key-less request is 500 with the
// status text only.
func Doc(t *testing.T, h http.Handler) {
	t.Helper()
	const multi = `"per-second";q=20;w=2, "per-hour";q=1000;w=3600`
	for _, remote := range []string{"[2001:db8::7]:1", "@", ""} {
		resp := serve(h, "GET", "/healthz", remote)
		if resp.StatusCode != 200 || resp.Header.Get("RateLimit-Policy") != "" || resp.Header.Get("RateLimit") != "" {
			t.Fatalf("/healthz from %q: %d %v", remote, resp.StatusCode, resp.Header)
		}
	}
	resp := serve(h, "GET", "/", "[2001:db8::7]:1")
	if resp.StatusCode != 200 || resp.Header.Get("RateLimit-Policy") != multi || resp.Header.Get("RateLimit") != `"per-second";r=19;t=1` {
		t.Fatalf("GET /: %d %v", resp.StatusCode, resp.Header)
	}
	// Two logins from one /64, the third from another address of it.
	for i, remote := range []string{"[2001:db8::7]:1", "[2001:db8::8]:2"} {
		resp := serve(h, "POST", "/login", remote)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || string(body) != "welcome\n" || resp.Header.Get("RateLimit-Policy") != multi+`, "login";q=2;w=24` ||
			!strings.HasSuffix(resp.Header.Get("RateLimit"), fmt.Sprintf(`, "login";r=%d;t=12`, 1-i)) {
			t.Fatalf("login %d: %d %q %v", i, resp.StatusCode, body, resp.Header)
		}
	}
	resp = serve(h, "POST", "/login", "[2001:db8::9]:3", "X-Forwarded-For", "198.51.100.1")
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "12" || resp.Header.Get("Content-Type") != "application/problem+json" ||
		!strings.HasSuffix(resp.Header.Get("RateLimit"), `, "login";r=0;t=12`) {
		t.Fatalf("third login of the /64: %d %v", resp.StatusCode, resp.Header)
	}
	var p httplimit.Problem
	if err := json.Unmarshal(body, &p); err != nil || p.Type != httplimit.ProblemType || p.Title != httplimit.ProblemTitle ||
		p.Status != 429 || len(p.ViolatedPolicies) != 1 || p.ViolatedPolicies[0] != "login" || p.RetryAfter == nil || *p.RetryAfter != 12 {
		t.Fatalf("problem %q: %+v %v", body, p, err)
	}
	// Another /64, with X-Forwarded-For naming the limited client: not trusted.
	if resp := serve(h, "POST", "/login", "[2001:db8:0:1::7]:1", "X-Forwarded-For", "2001:db8::7"); resp.StatusCode != 200 {
		t.Fatalf("login from another /64: %d", resp.StatusCode)
	}
	// IPv4 kept whole.
	for i, remote := range []string{"192.0.2.1:1", "192.0.2.1:2", "192.0.2.2:1"} {
		if resp := serve(h, "POST", "/login", remote); resp.StatusCode != 200 {
			t.Fatalf("IPv4 login %d from %s: %d", i, remote, resp.StatusCode)
		}
	}
	// The denied client still gets GET /.
	if resp := serve(h, "GET", "/", "[2001:db8::7]:1"); resp.StatusCode != 200 {
		t.Fatalf("GET / after the logins: %d", resp.StatusCode)
	}
	// No client IP: 500, the status text only.
	resp = serve(h, "GET", "/", "@")
	body, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != 500 || strings.TrimSpace(string(body)) != http.StatusText(500) || resp.Header.Get("RateLimit") != "" {
		t.Fatalf("Unix-socket peer: %d %q", resp.StatusCode, body)
	}
}
