package httplimit_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// migrating.md Stop 46 (row 1): "a denial's Retry-After is the latest of its
// own, one already set (seconds or an HTTP-date) and the `t` of every listed
// item with `r=0`"; (row 5): "every spelling of the field merged under the
// canonical key". An outer middleware that set Retry-After under another
// spelling (h["retry-after"]) gets a second, earlier Retry-After beside it.
func TestAudit64FixedRetryAfterNonCanonicalKey(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	m, l := a64Mw(t, clk, "route", 10, 5)
	for i := 0; i < 5; i++ {
		l.Allow("k")
	}
	deny := l.Decide("k") // own Retry-After: 1
	h := http.Header{}
	h["retry-after"] = []string{"90"} // set by an outer layer, not through Set
	m.SetHeaders(h, deny)
	var all []string
	for k, vs := range h {
		if strings.EqualFold(k, "Retry-After") {
			all = append(all, vs...)
		}
	}
	if len(all) != 1 || all[0] != "90" {
		t.Fatalf("Retry-After lines under every spelling: %q (header %v); want one, \"90\" (the latest already set): migrating.md Stop 46: \"a denial's Retry-After is the latest of its own, one already set ...\"", all, h)
	}
}

// migrating.md Stop 46 (row 5): "the problem+json body's `retryAfter` ignored
// the stacked Retry-After" -> "the body says the header's value". With a
// listed t (or a Retry-After already set) beyond 15 digits, the header says
// one number and the body another.
func TestAudit64FixedProblemBodyRetryAfterClamped(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	m, l := a64Mw(t, clk, "route", 10, 1, httplimit.WithProblemJSON(true))
	_ = l
	outer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "99999999999999999999") // 20 digits, kept (Stop 46: out-of-range digits as the largest)
		m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(w, r)
	})
	m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(httptest.NewRecorder(), a64Req()) // spends the burst of 1
	w := httptest.NewRecorder()
	outer.ServeHTTP(w, a64Req())
	if w.Code != 429 {
		t.Fatalf("want 429, got %d", w.Code)
	}
	ra := w.Header().Get("Retry-After")
	var p httplimit.Problem
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatal(err)
	}
	if p.RetryAfter == nil || strconv.FormatInt(*p.RetryAfter, 10) != ra {
		got := "nil"
		if p.RetryAfter != nil {
			got = strconv.FormatInt(*p.RetryAfter, 10)
		}
		t.Fatalf("header Retry-After %q, body retryAfter %s; migrating.md Stop 46: \"the body says the header's value\"", ra, got)
	}
}

// migrating.md Stop 46 (row 1): "the legacy fields keep the least
// Remaining". An outer layer's X-RateLimit-Remaining set under another
// spelling is not read: the answer carries two X-RateLimit-Remaining
// fields (0 and 4) and two X-RateLimit-Limit fields (100 and 5).
func TestAudit64FixedLegacyFieldsNonCanonicalKey(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	m, l := a64Mw(t, clk, "route", 10, 5, httplimit.WithLegacyHeaders(true))
	d := l.Decide("k") // Remaining 4
	h := http.Header{}
	h["x-ratelimit-remaining"] = []string{"0"}
	h["x-ratelimit-limit"] = []string{"100"}
	h["x-ratelimit-reset"] = []string{"60"}
	m.SetHeaders(h, d)
	var rem []string
	for k, vs := range h {
		if strings.EqualFold(k, "X-RateLimit-Remaining") {
			rem = append(rem, vs...)
		}
	}
	if len(rem) != 1 || rem[0] != "0" {
		t.Fatalf("X-RateLimit-Remaining under every spelling: %q (header %v); want one, \"0\" (the least): migrating.md Stop 46: \"the legacy fields keep the least Remaining\"", rem, h)
	}
}
