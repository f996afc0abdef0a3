package httplimit_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

func a64Mw(t *testing.T, clk *sketchtest.FakeClock, name string, r limit.Limit, b int, opts ...httplimit.Option) (*httplimit.Middleware, *limit.Limiter) {
	t.Helper()
	l := limit.MustNew(r, b, limit.WithClock(clk), limit.WithName(name))
	m, err := httplimit.New(l, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return m, l
}

func a64Req() *http.Request {
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "192.0.2.7:1234"
	return r
}

// README and migrating.md Stop 46, row 1: stacked middlewares each append
// their items; the legacy fields keep the least Remaining; a denial's
// Retry-After is the latest of its own, one already set and the t of every
// listed item with r=0.
func TestAudit64Stop46Stacked(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	outer, _ := a64Mw(t, clk, "global", 1, 3, httplimit.WithLegacyHeaders(true)) // 1/s burst 3
	inner, _ := a64Mw(t, clk, "route", 10, 5, httplimit.WithLegacyHeaders(true)) // 10/s burst 5
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	h := outer.Handler(inner.Handler(ok))

	do := func() *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, a64Req())
		return w
	}
	w := do()
	if w.Code != 200 {
		t.Fatalf("first request %d", w.Code)
	}
	pol := w.Header().Values("RateLimit-Policy")
	if len(pol) != 1 || !strings.Contains(pol[0], `"global";q=3;w=3`) || !strings.Contains(pol[0], `"route";q=5;w=1`) {
		t.Fatalf("RateLimit-Policy %q: want one List naming both", pol)
	}
	rl := w.Header().Values("RateLimit")
	if len(rl) != 1 || !strings.Contains(rl[0], `"global";r=2`) || !strings.Contains(rl[0], `"route";r=4`) {
		t.Fatalf("RateLimit %q: want both items", rl)
	}
	if got := w.Header().Get("X-RateLimit-Remaining"); got != "2" {
		t.Fatalf("X-RateLimit-Remaining %q, want the least, 2 (global)", got)
	}
	if got := w.Header().Get("X-RateLimit-Limit"); got != "3" {
		t.Fatalf("X-RateLimit-Limit %q, want global's 3 beside its Remaining", got)
	}
	do()
	w = do() // global: 0 left, t=1; route: 2 left
	rl = w.Header().Values("RateLimit")
	if w.Code != 200 || !strings.Contains(rl[0], `"global";r=0;t=1`) {
		t.Fatalf("third request %d RateLimit %q", w.Code, rl)
	}
	w = do() // outer denies: 429 with its own Retry-After
	if w.Code != 429 || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("fourth: %d Retry-After %q", w.Code, w.Header().Get("Retry-After"))
	}
}

// A denial by the inner middleware while the outer listed a policy with no
// quota left: Retry-After is at least the outer's t.
func TestAudit64Stop46RetryAfterListedT(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	// outer: 1 per 30 s burst 2; inner: 10/s burst 2, spent by the
	// outer's two admissions.
	outer, _ := a64Mw(t, clk, "global", limit.Every(30*time.Second), 2)
	inner, _ := a64Mw(t, clk, "route", 10, 2, httplimit.WithProblemJSON(true))
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	// the inner middleware is hit directly once first, to spend its burst.
	h := outer.Handler(inner.Handler(ok))
	w0 := httptest.NewRecorder()
	inner.Handler(ok).ServeHTTP(w0, a64Req())
	w := httptest.NewRecorder()
	h.ServeHTTP(w, a64Req()) // outer 1 left, inner 0 left (admitted)
	w = httptest.NewRecorder()
	h.ServeHTTP(w, a64Req()) // outer 0 left t=30 (admitted), inner denies
	if w.Code != 429 {
		t.Fatalf("want the inner's denial, got %d (RateLimit %q)", w.Code, w.Header().Values("RateLimit"))
	}
	ra := w.Header().Get("Retry-After")
	if ra != "30" {
		t.Fatalf("Retry-After %q; want 30: the outer lists \"global\";r=0;t=30 (RateLimit %q)", ra, w.Header().Values("RateLimit"))
	}
	var p httplimit.Problem
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatal(err)
	}
	if p.RetryAfter == nil || strconv.FormatInt(*p.RetryAfter, 10) != ra {
		t.Fatalf("problem retryAfter %v, header %q; Stop 46: the body says the header's value", p.RetryAfter, ra)
	}
	// "a retry at Retry-After is not denied again by a policy it lists as empty"
	clk.Advance(29 * time.Second)
	w = httptest.NewRecorder()
	h.ServeHTTP(w, a64Req())
	if w.Code != 429 {
		t.Fatalf("retry 1 s before Retry-After admitted (%d): the outer had no token", w.Code)
	}
	clk.Advance(time.Second)
	w = httptest.NewRecorder()
	h.ServeHTTP(w, a64Req())
	if w.Code != 200 {
		t.Fatalf("retry at Retry-After (30 s) denied: %d, RateLimit %q", w.Code, w.Header().Values("RateLimit"))
	}
}

// SetHeaders directly, for the merge rules as worded.
func TestAudit64Stop46SetHeadersMerge(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	m, l := a64Mw(t, clk, "route", 10, 5)
	for i := 0; i < 5; i++ {
		l.Allow("k")
	}
	deny := l.Decide("k") // RetryAfter 100 ms: own Retry-After 1
	if deny.Allowed {
		t.Fatal("want a denial")
	}
	allow := l.Decide("other")

	type tc struct {
		name   string
		set    func(h http.Header)
		d      limit.Decision
		wantRL string // exact RateLimit, "" to skip
		wantRA string
	}
	cases := []tc{
		{"second call does not repeat", func(h http.Header) { m.SetHeaders(h, allow) }, allow, `"route";r=4;t=1`, ""},
		{"lines joined", func(h http.Header) { h.Add("RateLimit", `"a";r=1`); h.Add("RateLimit", `"b";r=2`) }, allow, `"a";r=1, "b";r=2, "route";r=4;t=1`, ""},
		{"unclosed replaced", func(h http.Header) { h.Set("RateLimit", `"a;r=0;t=9`) }, allow, `"route";r=4;t=1`, ""},
		{"non-canonical key merged", func(h http.Header) { h["ratelimit"] = []string{`"a";r=1`} }, allow, `"a";r=1, "route";r=4;t=1`, ""},
		{"last parameter counts", func(h http.Header) { h.Set("RateLimit", `"a";r=0;t=50;t=40`) }, deny, "", "40"},
		{"last r counts", func(h http.Header) { h.Set("RateLimit", `"a";r=0;t=50;r=3`) }, deny, "", "1"},
		{"inner list skipped whole", func(h http.Header) { h.Set("RateLimit", `("x;r=1" y);r=0;t=45`) }, deny, "", "45"},
		{"display string skipped whole", func(h http.Header) { h.Set("RateLimit", `"a";n=%"x\";r=0;t=44`) }, deny, "", "44"},
		{"same name: t read before replace", func(h http.Header) { h.Set("RateLimit", `"route";r=0;t=33`) }, deny, "", "33"},
		{"Retry-After seconds kept", func(h http.Header) { h.Set("Retry-After", "77") }, deny, "", "77"},
		// Kept, as a sender writes it: a plain integer (stop 60, audit 103).
		{"Retry-After padded kept", func(h http.Header) { h.Set("Retry-After", " 0077 ") }, deny, "", "77"},
		{"Retry-After 20 digits kept as the largest Integer", func(h http.Header) { h.Set("Retry-After", "99999999999999999999") }, deny, "", "999999999999999"},
		{"Retry-After earlier replaced", func(h http.Header) { h.Set("Retry-After", "0") }, deny, "", "1"},
		{"Retry-After date kept", func(h http.Header) {
			h.Set("Retry-After", time.Now().Add(time.Hour).UTC().Format(http.TimeFormat))
		}, deny, "", "date"},
		{"Retry-After past date replaced", func(h http.Header) {
			h.Set("Retry-After", time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat))
		}, deny, "", "1"},
	}
	for _, c := range cases {
		h := http.Header{}
		c.set(h)
		m.SetHeaders(h, c.d)
		if c.wantRL != "" {
			if got := h.Values("RateLimit"); len(got) != 1 || got[0] != c.wantRL {
				t.Errorf("%s: RateLimit %q, want %q", c.name, got, c.wantRL)
			}
			if got := h.Values("RateLimit-Policy"); len(got) != 1 || got[0] != `"route";q=5;w=1` {
				t.Errorf("%s: RateLimit-Policy %q, want one item", c.name, got)
			}
			if len(h) != 2 {
				t.Errorf("%s: header keys %v, want RateLimit-Policy and RateLimit only", c.name, h)
			}
		}
		if c.wantRA != "" {
			got := h.Values("Retry-After")
			switch {
			case c.wantRA == "date":
				if len(got) != 1 || !strings.HasSuffix(got[0], "GMT") {
					t.Errorf("%s: Retry-After %q, want the later HTTP-date kept", c.name, got)
				}
			case len(got) != 1 || got[0] != c.wantRA:
				t.Errorf("%s: Retry-After %q, want %q", c.name, got, c.wantRA)
			}
		}
	}
}
