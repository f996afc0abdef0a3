package httplimit_test

import (
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// A global Multi around a per-route Tier, one key, one-token requests
// over a random walk: every denial's Retry-After readmits the retry at
// that second through both layers, unless the denial was the outer
// one's alone (the inner policy not listed, so the answer promised
// nothing of it): "a one-token retry at that second is not denied again
// by a policy the answer lists as empty" (doc.go, "Answers"). Each
// answer lists the outer window the Multi names and, when the inner
// middleware decided, the tier after it.
func TestAudit88HttpStackedMultiTierRetry(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(3_000_000)
	m, err := limit.NewMulti(
		limit.MustNew(2, 3, limit.WithName("m-fast"), limit.WithClock(clk)),
		limit.MustNew(limit.Every(700*time.Millisecond), 6, limit.WithName("m-slow"), limit.WithClock(clk)))
	if err != nil {
		t.Fatal(err)
	}
	base := limit.MustNew(1, 2, limit.WithName("base"), limit.WithClock(clk), limit.WithMaxDebt(10))
	tr, err := base.Tier("route", 1.5, 3)
	if err != nil {
		t.Fatal(err)
	}
	outer, err := httplimit.New(m)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := outer.With(tr)
	if err != nil {
		t.Fatal(err)
	}
	h := outer.Handler(inner.Handler(a88OK))
	x := uint64(88)
	var denials, innerDenials, outerOnly int
	for i := range 1500 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		clk.Advance(time.Duration(x>>11%1200) * time.Millisecond)
		w := a88Do(h, "GET")
		rl := w.Header().Get("RateLimit")
		items := strings.Split(rl, ", ")
		if len(items) < 1 || len(items) > 2 || !(strings.HasPrefix(items[0], `"m-fast";`) || strings.HasPrefix(items[0], `"m-slow";`)) {
			t.Fatalf("step %d: RateLimit %q", i, rl)
		}
		innerListed := len(items) == 2
		if innerListed && !strings.HasPrefix(items[1], `"route";`) {
			t.Fatalf("step %d: RateLimit %q", i, rl)
		}
		if pol := w.Header().Get("RateLimit-Policy"); innerListed && pol != `"m-fast";q=3;w=2, "m-slow";q=6;w=5, "route";q=3;w=2` ||
			!innerListed && pol != `"m-fast";q=3;w=2, "m-slow";q=6;w=5` {
			t.Fatalf("step %d: RateLimit-Policy %q", i, pol)
		}
		if w.Code == http.StatusOK {
			continue
		}
		if w.Code != http.StatusTooManyRequests {
			t.Fatalf("step %d: %d", i, w.Code)
		}
		denials++
		if innerListed {
			innerDenials++
		}
		secs, err := strconv.ParseInt(w.Header().Get("Retry-After"), 10, 64)
		if err != nil || secs < 1 {
			t.Fatalf("step %d: Retry-After %q", i, w.Header().Get("Retry-After"))
		}
		clk.Advance(time.Duration(secs) * time.Second)
		w2 := a88Do(h, "GET")
		if w2.Code == http.StatusOK {
			continue
		}
		retryItems := strings.Split(w2.Header().Get("RateLimit"), ", ")
		switch {
		case len(retryItems) == 1:
			t.Errorf("step %d: denied by %q, retried at its Retry-After %d s: the outer policy denies again (%q)", i, rl, secs, w2.Header().Get("RateLimit"))
		case innerListed:
			t.Errorf("step %d: denied with %q, retried at Retry-After %d s: the listed inner policy denies again (%q)", i, rl, secs, w2.Header().Get("RateLimit"))
		default:
			outerOnly++ // the first answer said nothing of the inner policy
		}
	}
	if innerDenials == 0 || denials == innerDenials {
		t.Errorf("walk: %d denials, %d by the inner tier; want both kinds", denials, innerDenials)
	}
	t.Logf("%d denials, %d inner, %d retries denied by an unlisted inner policy", denials, innerDenials, outerOnly)
}

// FuzzAudit88HttpAllow drives the whole middleware with request input a
// client controls (X-Forwarded-For lines, RemoteAddr, the Header key) and
// fields an outer handler set before it (Retry-After, RateLimit): it
// never panics, answers only 200, 400, 429 or 500, an error answer's
// body is the status text only (no error text), and a denial's
// Retry-After is one line, delay-seconds (at least 1) or an HTTP-date already set, and not earlier than a
// delay-seconds already set (doc.go: "nor than a Retry-After already
// set").
func FuzzAudit88HttpAllow(f *testing.F) {
	f.Add("203.0.113.1, 10.0.0.1", "10.0.0.2:80", "", "", "k", uint8(0))
	f.Add("", "@", "5", `"x";r=0;t=9`, "", uint8(1))
	f.Add("garbage,,", "[::1]:1", "Wed, 21 Oct 2099 07:28:00 GMT", `"p";r=0;t=3, "q";r=1`, "a,b", uint8(2))
	f.Add("1.2.3.4", "1.2.3.4", " 77 ", `("a" "b");r=0;t=4`, " ", uint8(3))
	f.Add("::ffff:1.2.3.4", "", "99999999999999999999", `"a`, "k", uint8(4))
	f.Fuzz(func(t *testing.T, xff, remote, preRA, preRL, apiKey string, mode uint8) {
		clk := sketchtest.NewFakeClock()
		l := limit.MustNew(1, 1, limit.WithName("p"), limit.WithClock(clk))
		var key httplimit.KeyFunc
		switch mode % 3 {
		case 0:
			key = httplimit.RemoteIP()
		case 1:
			key = httplimit.RemoteIP(httplimit.WithTrustedProxies(1 + int(mode/3%3)))
		default:
			key = httplimit.Header("X-Api-Key")
		}
		mw, err := httplimit.New(l, httplimit.WithKey(key), httplimit.WithProblemJSON(mode&8 != 0))
		if err != nil {
			t.Fatal(err)
		}
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if preRA != "" {
				w.Header()["Retry-After"] = []string{preRA}
			}
			if preRL != "" {
				w.Header()["RateLimit"] = []string{preRL}
			}
			mw.Handler(a88OK).ServeHTTP(w, r)
		})
		for range 2 {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = remote
			r.Header["X-Forwarded-For"] = strings.Split(xff, "\n")
			r.Header["X-Api-Key"] = []string{apiKey}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			switch w.Code {
			case 200:
			case 400, 500:
				if got := strings.TrimSpace(w.Body.String()); got != http.StatusText(w.Code) {
					t.Fatalf("%d: body %q; want the status text only", w.Code, got)
				}
			case 429:
				ra := w.Header().Values("Retry-After")
				if len(ra) != 1 {
					t.Fatalf("429: Retry-After lines %q", ra)
				}
				n, err := strconv.ParseInt(strings.Trim(ra[0], " \t"), 10, 64)
				if err != nil {
					// Only an HTTP-date already set, kept as it was.
					if _, derr := http.ParseTime(strings.Trim(ra[0], " \t")); derr != nil || ra[0] != preRA {
						t.Fatalf("429: Retry-After %q (already set: %q)", ra[0], preRA)
					}
					n = 1
				}
				if n < 1 || n > 999_999_999_999_999 {
					t.Fatalf("429: Retry-After %q", ra[0])
				}
				if pre, err := strconv.ParseInt(strings.Trim(preRA, " \t"), 10, 64); err == nil && pre >= 0 && n < min(pre, 999_999_999_999_999) {
					t.Fatalf("429: Retry-After %d earlier than the %q already set", n, preRA)
				}
				if !strings.Contains(w.Header().Get("RateLimit"), `"p";r=0;t=1`) {
					t.Fatalf("429: RateLimit %q lacks this policy's item", w.Header().Get("RateLimit"))
				}
			default:
				t.Fatalf("status %d", w.Code)
			}
		}
	})
}

// A Multi's admitted answers through the middleware, over a random walk
// with costs 1 to 3, windows of equal bursts (ties) and an Inf window:
// RateLimit names a window whose r is the least Remaining of the finite
// windows; t seconds later every finite window holds more than r tokens;
// with t left out a window holding that least is full (it never grows);
// the legacy Reset seconds later every window is full (limit.Multi's
// DecideKeys: "ResetAfter and NextAfter the time when the window(s)
// holding that least have grown"; doc.go, "Answers").
func TestAudit88HttpMultiAdmittedTNeverEarly(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(9_000_000)
	ws := []*limit.Limiter{
		limit.MustNew(2, 4, limit.WithName("a"), limit.WithClock(clk)),
		limit.MustNew(limit.Every(700*time.Millisecond), 4, limit.WithName("b"), limit.WithClock(clk)),
		limit.MustNew(limit.Inf, 3, limit.WithName("inf"), limit.WithClock(clk)),
		limit.MustNew(0.25, 9, limit.WithName("c"), limit.WithClock(clk)),
	}
	m, err := limit.NewMulti(ws...)
	if err != nil {
		t.Fatal(err)
	}
	var cost atomic.Int64
	h := httplimit.Wrap(m, a88OK, httplimit.WithLegacyHeaders(true),
		httplimit.WithCost(func(*http.Request) int { return int(cost.Load()) }))
	const key = "192.0.2.1/32"
	finite := []*limit.Limiter{ws[0], ws[1], ws[3]}
	least := func() (int, bool) {
		l, full := 1<<30, false
		for _, w := range finite {
			if n := int(math.Floor(w.Tokens(key) + 1e-9)); n < l {
				l = n
			}
		}
		for _, w := range finite {
			if n := int(math.Floor(w.Tokens(key) + 1e-9)); n == l && n == w.Burst() {
				full = true
			}
		}
		return l, full
	}
	x := uint64(0xa88)
	checkedT, checkedOpen := 0, 0
	for i := range 800 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		cost.Store(1 + int64(x%3))
		clk.Advance(time.Duration(x>>10%2500) * time.Millisecond)
		w := a88Do(h, "GET")
		if pol := w.Header().Get("RateLimit-Policy"); pol != `"a";q=4;w=2, "b";q=4;w=3, "c";q=9;w=36` {
			t.Fatalf("RateLimit-Policy %q", pol)
		}
		if w.Code != http.StatusOK {
			continue
		}
		rl := w.Header().Get("RateLimit")
		r, tt := a88Item(t, rl)
		if l, _ := least(); int64(l) != r {
			t.Fatalf("step %d: RateLimit %q, but the least of the windows is %d", i, rl, l)
		}
		reset, err := strconv.ParseInt(w.Header().Get("X-RateLimit-Reset"), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case tt < 0:
			if _, full := least(); !full {
				t.Errorf("step %d: RateLimit %q leaves t out, but no window holding the least %d is full", i, rl, r)
			}
			checkedOpen++
		case x>>40%3 == 0:
			clk.Advance(time.Duration(tt) * time.Second)
			if l, _ := least(); int64(l) <= r {
				t.Errorf("step %d: RateLimit %q, but %d s later the least is %d", i, rl, tt, l)
			}
			checkedT++
		case x>>40%3 == 1:
			clk.Advance(time.Duration(reset) * time.Second)
			for _, fw := range finite {
				if got := fw.Tokens(key); got < float64(fw.Burst())-1e-9 {
					t.Errorf("step %d: X-RateLimit-Reset %d s, but window %s then holds %v of %d", i, reset, fw.Name(), got, fw.Burst())
				}
			}
		}
	}
	if checkedT == 0 {
		t.Error("the walk checked no t")
	}
	t.Logf("%d t checked, %d answers without t", checkedT, checkedOpen)
}
