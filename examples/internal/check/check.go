// Package check drives an example server's handler through the behaviour
// every example shares (see package examples).
package check

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
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
