package httplimit_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestIPv4Folding: WithIPv4Prefix folds IPv4 addresses (and IPv4-mapped
// IPv6 ones) to the given prefix; the default keeps whole addresses.
func TestIPv4Folding(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	h := httplimit.Wrap(limit.MustNew(1, 1, limit.WithClock(clk)), ok,
		httplimit.WithKey(httplimit.RemoteIP(httplimit.WithIPv4Prefix(24))))
	if get(h, "203.0.113.7:80").Code != 200 {
		t.Fatal("first denied")
	}
	if get(h, "203.0.113.200:80").Code != 429 {
		t.Fatal("same /24 not folded")
	}
	if get(h, "[::ffff:203.0.113.9]:80").Code != 429 {
		t.Fatal("an IPv4-mapped address of the same /24 not folded")
	}
	if get(h, "203.0.114.7:80").Code != 200 {
		t.Fatal("another /24 denied")
	}
	key := httplimit.RemoteIP(httplimit.WithIPv4Prefix(24))
	r, _ := http.NewRequest("GET", "/", nil)
	r.RemoteAddr = "203.0.113.7:80"
	if k, err := key(r); err != nil || k != "203.0.113.0/24" {
		t.Fatalf("key %q, %v; want 203.0.113.0/24", k, err)
	}
	plain := httplimit.Wrap(limit.MustNew(1, 1, limit.WithClock(clk)), ok)
	get(plain, "203.0.113.7:80")
	if get(plain, "203.0.113.8:80").Code != 200 {
		t.Fatal("the default folded IPv4 addresses")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("WithIPv4Prefix(33) accepted")
		}
	}()
	httplimit.RemoteIP(httplimit.WithIPv4Prefix(33))
}

// TestFuncKey: Func keys requests by what the function returns, refuses a
// nil request with ErrNilRequest, and panics on a nil function.
func TestFuncKey(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	byPath := httplimit.Func(func(r *http.Request) string { return r.URL.Path })
	h := httplimit.Wrap(limit.MustNew(1, 1, limit.WithClock(clk)), ok, httplimit.WithKey(byPath))
	req := func(path string) int {
		r, _ := http.NewRequest("GET", path, nil)
		r.RemoteAddr = "192.0.2.1:1"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	if req("/a") != 200 || req("/a") != 429 || req("/b") != 200 {
		t.Fatal("Func did not key by path")
	}
	if _, err := byPath(nil); !errors.Is(err, httplimit.ErrNilRequest) {
		t.Fatalf("nil request: %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Func(nil) accepted")
		}
	}()
	httplimit.Func(nil)
}

// TestErrorHandlerKeyError: a key that cannot be extracted goes to the
// error handler with its error (and the limiter is not consulted).
func TestErrorHandlerKeyError(t *testing.T) {
	l := limit.MustNew(1, 1)
	var got error
	h := httplimit.Wrap(l, ok, httplimit.WithKey(httplimit.Header("X-Api-Key")),
		httplimit.WithErrorHandler(func(w http.ResponseWriter, _ *http.Request, err error) {
			got = err
			w.WriteHeader(401)
		}))
	if w := get(h, "192.0.2.9:1"); w.Code != 401 || !errors.Is(got, httplimit.ErrNoHeader) {
		t.Fatalf("missing header: %d, handler got %v", w.Code, got)
	}
	if w := get(h, "192.0.2.9:1", "X-Api-Key", "k"); w.Code != 200 {
		t.Fatalf("with the header: %d", w.Code)
	}
}
