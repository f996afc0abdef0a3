package httplimit_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

var a88OK = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })

func a88Do(h http.Handler, method string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, "/x", nil)
	r.RemoteAddr = "192.0.2.1:1000"
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// a88Tiers returns tiers of one limiter (base 1/s, MaxDebt room for the
// slowest tier) on clk: exact and inexact rates, small and large bursts.
func a88Tiers(t *testing.T, clk *sketchtest.FakeClock) map[string]*limit.Tier {
	t.Helper()
	base := limit.MustNew(1, 4, limit.WithName("base"), limit.WithClock(clk), limit.WithMaxDebt(200))
	out := map[string]*limit.Tier{}
	for _, c := range []struct {
		name  string
		lim   limit.Limit
		burst int
	}{
		{"free", 0.5, 4},
		{"paid", 3, 7},
		{"odd", 0.3, 5},
		{"every", limit.Every(1700 * time.Millisecond), 3},
		{"fast", 7, 2},
	} {
		tr, err := base.Tier(c.name, c.lim, c.burst)
		if err != nil {
			t.Fatalf("Tier %s: %v", c.name, err)
		}
		out[c.name] = tr
	}
	return out
}

// a88Item parses the first member of a RateLimit value: its r and t (t
// -1 when left out).
func a88Item(t *testing.T, v string) (r, tt int64) {
	t.Helper()
	tt = -1
	parts := strings.Split(strings.Split(v, ",")[0], ";")
	r = -1
	for _, p := range parts[1:] {
		k, val, _ := strings.Cut(strings.TrimSpace(p), "=")
		n, err := strconv.ParseInt(val, 10, 64)
		if err != nil {
			t.Fatalf("RateLimit %q: parameter %q", v, p)
		}
		switch k {
		case "r":
			r = n
		case "t":
			tt = n
		}
	}
	if r < 0 {
		t.Fatalf("RateLimit %q: no r", v)
	}
	return r, tt
}

// A Tier (limit's per-plan policy, an httplimit.Limiter by its doc)
// through the middleware: RateLimit-Policy announces the tier's own q and
// w (ceil(burst/rate), or the refill as held), every denial's Retry-After
// readmits the same request at that second, t seconds after an answer of
// r the tier holds more than r tokens, and the legacy Reset seconds after
// it the tier is full (doc.go, "Answers"; Decision.NextAfter).
func TestAudit88HttpTierHeadersAndRetry(t *testing.T) {
	for name := range a88Tiers(t, sketchtest.NewFakeClock()) {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_000_000)
		tr := a88Tiers(t, clk)[name]
		var cost atomic.Int64
		h := httplimit.Wrap(tr, a88OK, httplimit.WithLegacyHeaders(true),
			httplimit.WithCost(func(*http.Request) int { return int(cost.Load()) }))
		key := "192.0.2.1/32"
		// The announced window: at least ceil(burst/rate).
		p := tr.Policies()
		if len(p) != 1 || p[0].Name != name {
			t.Fatalf("%s: Policies %v", name, p)
		}
		minW := int64(math.Ceil(float64(p[0].Burst)/float64(p[0].Limit) - 1e-9))
		x := uint64(0x9e3779b97f4a7c15) ^ uint64(len(name))
		denials := 0
		for i := range 300 {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			c := 1 + int64(x%3)
			if c > int64(p[0].Burst) {
				c = int64(p[0].Burst)
			}
			cost.Store(c)
			clk.Advance(time.Duration(x>>9%uint64(1+700/float64(p[0].Limit))) * time.Millisecond)
			w := a88Do(h, "GET")
			pol := w.Header().Get("RateLimit-Policy")
			wantPol := fmt.Sprintf("%q;q=%d;w=", name, p[0].Burst)
			if !strings.HasPrefix(pol, wantPol) {
				t.Fatalf("%s: RateLimit-Policy %q; want prefix %q", name, pol, wantPol)
			}
			ws, err := strconv.ParseInt(strings.TrimPrefix(pol, wantPol), 10, 64)
			if err != nil || ws < minW || ws > minW+1 {
				t.Errorf("%s: RateLimit-Policy %q: w below ceil(burst/rate) = %d or far above", name, pol, minW)
			}
			rl := w.Header().Get("RateLimit")
			if !strings.HasPrefix(rl, fmt.Sprintf("%q;", name)) {
				t.Fatalf("%s: RateLimit %q names another policy", name, rl)
			}
			r, tt := a88Item(t, rl)
			reset, err := strconv.ParseInt(w.Header().Get("X-RateLimit-Reset"), 10, 64)
			if err != nil {
				t.Fatalf("%s: X-RateLimit-Reset %q", name, w.Header().Get("X-RateLimit-Reset"))
			}
			// The debt never exceeds the burst here (no RejectCost): the
			// bucket refills within w, the time to refill it from empty.
			if reset > ws {
				t.Errorf("%s step %d: X-RateLimit-Reset %d s beyond the policy's w=%d", name, i, reset, ws)
			}
			if tt < 0 {
				if got := tr.Tokens(key); got < float64(p[0].Burst)-1e-9 {
					t.Errorf("%s step %d: RateLimit %q leaves t out, but the bucket holds %v of %d", name, i, rl, got, p[0].Burst)
				}
			}
			if w.Code == http.StatusOK {
				// Walk on by t (more than r tokens then) or by Reset
				// (the bucket full then).
				switch {
				case tt >= 0 && x>>40%4 == 0:
					clk.Advance(time.Duration(tt) * time.Second)
					if got := tr.Tokens(key); got < float64(r+1)-1e-9 {
						t.Errorf("%s step %d: r=%d t=%d, but %d s later the tier holds %v tokens", name, i, r, tt, tt, got)
					}
				case x>>40%4 == 1:
					clk.Advance(time.Duration(reset) * time.Second)
					if got := tr.Tokens(key); got < float64(p[0].Burst)-1e-9 {
						t.Errorf("%s step %d: Reset %d s, but then the tier holds %v of %d", name, i, reset, got, p[0].Burst)
					}
				}
			}
			if w.Code == http.StatusOK {
				continue
			}
			if w.Code != http.StatusTooManyRequests {
				t.Fatalf("%s: status %d", name, w.Code)
			}
			secs, err := strconv.ParseInt(w.Header().Get("Retry-After"), 10, 64)
			if err != nil || secs < 1 || (tt >= 0 && secs < tt) {
				t.Fatalf("%s: Retry-After %q with t=%d", name, w.Header().Get("Retry-After"), tt)
			}
			denials++
			clk.Advance(time.Duration(secs) * time.Second)
			if w := a88Do(h, "GET"); w.Code != http.StatusOK {
				t.Errorf("%s step %d: cost %d retried at Retry-After %d s: %d (%q)", name, i, c, secs, w.Code, w.Header().Get("RateLimit"))
			}
		}
		if denials == 0 {
			t.Errorf("%s: the walk met no denial", name)
		}
	}
}

// Tiers of one limiter share the key's debt (limit.Tier's doc): a
// middleware per tier on the same key, one for the free plan and one for
// the paid, each announce their own policy, and a key that spent the
// free tier's burst is denied there while the paid tier still admits
// what its own numbers say.
func TestAudit88HttpTiersShareDebt(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(5_000_000)
	base := limit.MustNew(10, 10, limit.WithName("base"), limit.WithClock(clk), limit.WithMaxDebt(100))
	free, err := base.Tier("free", 1, 5)
	if err != nil {
		t.Fatal(err)
	}
	paid, err := base.Tier("paid", 10, 10)
	if err != nil {
		t.Fatal(err)
	}
	hf := httplimit.Wrap(free, a88OK)
	hp := httplimit.Wrap(paid, a88OK)
	for i := range 5 {
		if w := a88Do(hf, "GET"); w.Code != 200 {
			t.Fatalf("free request %d: %d", i, w.Code)
		}
	}
	w := a88Do(hf, "GET")
	if w.Code != 429 || w.Header().Get("Retry-After") != "1" || w.Header().Get("RateLimit") != `"free";r=0;t=1` {
		t.Errorf("free after its burst: %d, Retry-After %q, RateLimit %q; want 429, 1, \"free\";r=0;t=1",
			w.Code, w.Header().Get("Retry-After"), w.Header().Get("RateLimit"))
	}
	// 5 free tokens are 5 s of drain at 1/s, 50 paid tokens' worth at
	// 10/s: the paid tier (burst 10, 1 s) is also empty.
	w = a88Do(hp, "GET")
	if w.Code != 429 || w.Header().Get("RateLimit-Policy") != `"paid";q=10;w=1` {
		t.Errorf("paid after the free burst: %d, RateLimit-Policy %q; want 429 and \"paid\";q=10;w=1", w.Code, w.Header().Get("RateLimit-Policy"))
	}
	clk.Advance(4 * time.Second) // 1 s of debt left: the paid tier's whole burst (10 tokens at 10/s)
	w = a88Do(hp, "GET")
	if w.Code != 429 {
		t.Errorf("paid 4 s later (1 s of debt, its whole burst): %d; want 429", w.Code)
	}
	clk.Advance(100 * time.Millisecond)
	w = a88Do(hp, "GET")
	if w.Code != 200 || w.Header().Get("RateLimit") != `"paid";r=0;t=1` {
		t.Errorf("paid 4.1 s later: %d, RateLimit %q; want 200, \"paid\";r=0;t=1", w.Code, w.Header().Get("RateLimit"))
	}
}

// A Multi whose request costs more than one window's burst (but not
// another's) is Never: 429 without Retry-After, the body says not to
// retry, and the answer names the window it can never fit (limit.Multi:
// "Never if n exceeds any window's burst"; Limit and Burst those of the
// window that sets RetryAfter); the problem+json body names it and has
// no retryAfter; the legacy limit is that window's burst.
func TestAudit88HttpMultiNeverNamesWindow(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	m, err := limit.NewMulti(
		limit.MustNew(10, 8, limit.WithName("wide"), limit.WithClock(clk)),
		limit.MustNew(1, 3, limit.WithName("narrow"), limit.WithClock(clk)))
	if err != nil {
		t.Fatal(err)
	}
	var hooked []limit.Decision
	var mu sync.Mutex
	h := httplimit.Wrap(m, a88OK, httplimit.WithProblemJSON(true), httplimit.WithLegacyHeaders(true),
		httplimit.WithCost(func(*http.Request) int { return 5 }),
		httplimit.WithHook(func(_ *http.Request, _ string, d limit.Decision) { mu.Lock(); hooked = append(hooked, d); mu.Unlock() }))
	w := a88Do(h, "GET")
	if w.Code != 429 || w.Header().Get("Retry-After") != "" {
		t.Fatalf("cost 5 over burst 3: %d, Retry-After %q; want 429 and none", w.Code, w.Header().Get("Retry-After"))
	}
	if got := w.Header().Get("RateLimit-Policy"); got != `"wide";q=8;w=1, "narrow";q=3;w=3` {
		t.Errorf("RateLimit-Policy %q", got)
	}
	if got := w.Header().Get("RateLimit"); got != `"narrow";r=3` {
		t.Errorf("RateLimit %q; want \"narrow\";r=3 (the window it never fits, full)", got)
	}
	if got := w.Header().Get("X-RateLimit-Limit"); got != "3" {
		t.Errorf("X-RateLimit-Limit %q; want 3", got)
	}
	var p httplimit.Problem
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatal(err)
	}
	if p.RetryAfter != nil || len(p.ViolatedPolicies) != 1 || p.ViolatedPolicies[0] != "narrow" || !strings.Contains(p.Detail, "do not retry") {
		t.Errorf("problem %+v; want violated narrow, no retryAfter, do not retry", p)
	}
	if len(hooked) != 1 || !hooked[0].Never {
		t.Errorf("hook saw %+v; want one Never decision", hooked)
	}
	// Nothing was debited: a cost-3 request is admitted at once.
	h3 := httplimit.Wrap(m, a88OK, httplimit.WithCost(func(*http.Request) int { return 3 }))
	if w := a88Do(h3, "GET"); w.Code != 200 || w.Header().Get("RateLimit") != `"narrow";r=0;t=1` {
		t.Errorf("cost 3 after the Never: %d %q; want 200, \"narrow\";r=0;t=1", w.Code, w.Header().Get("RateLimit"))
	}
}

// HEAD and OPTIONS requests are limited as any other: they carry the
// fields, consume a token, and a denied HEAD over a real connection is
// 429 with Retry-After and no body.
func TestAudit88HttpHeadAndOptions(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	l := limit.MustNew(1, 2, limit.WithName("p"), limit.WithClock(clk))
	h := httplimit.Wrap(l, a88OK)
	srv := httptest.NewServer(h)
	defer srv.Close()
	do := func(method string) *http.Response {
		req, _ := http.NewRequest(method, srv.URL, nil)
		res, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	if res := do(http.MethodOptions); res.StatusCode != 200 || res.Header.Get("RateLimit") != `"p";r=1;t=1` {
		t.Errorf("OPTIONS: %d %q", res.StatusCode, res.Header.Get("RateLimit"))
	}
	if res := do(http.MethodHead); res.StatusCode != 200 || res.Header.Get("RateLimit") != `"p";r=0;t=1` {
		t.Errorf("HEAD 1: %d %q", res.StatusCode, res.Header.Get("RateLimit"))
	}
	res := do(http.MethodHead)
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != 429 || res.Header.Get("Retry-After") != "1" || res.Header.Get("RateLimit-Policy") != `"p";q=2;w=2` || len(body) != 0 {
		t.Errorf("HEAD 2: %d, Retry-After %q, Policy %q", res.StatusCode, res.Header.Get("Retry-After"), res.Header.Get("RateLimit-Policy"))
	}
}

// Key functions that fail, or return an empty key: a KeyFunc's error goes
// to the error handler (the limiter not called, no fields, no hook), 400
// for an unknown error, 500 for ErrNoClientIP and ErrNilRequest even
// wrapped; a Func's empty key is one key like any other; Header's
// present-but-empty header is ErrNoHeader.
func TestAudit88HttpKeyFailures(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	for _, c := range []struct {
		err  error
		code int
	}{
		{errors.New("mine"), 400},
		{fmt.Errorf("wrapped: %w", httplimit.ErrNoClientIP), 500},
		{fmt.Errorf("wrapped: %w", httplimit.ErrNilRequest), 500},
		{fmt.Errorf("wrapped: %w", httplimit.ErrBadCost), 500},
		{fmt.Errorf("wrapped: %w", httplimit.ErrLimiter), 503},
		{fmt.Errorf("wrapped: %w", httplimit.ErrForwardedFor), 400},
	} {
		l := limit.MustNew(1, 1, limit.WithName("p"), limit.WithClock(clk))
		hooks := 0
		h := httplimit.Wrap(l, a88OK, httplimit.WithKey(func(*http.Request) (string, error) { return "k", c.err }),
			httplimit.WithHook(func(*http.Request, string, limit.Decision) { hooks++ }))
		w := a88Do(h, "GET")
		if w.Code != c.code || strings.TrimSpace(w.Body.String()) != http.StatusText(c.code) || w.Header().Get("RateLimit") != "" || hooks != 0 {
			t.Errorf("key error %v: %d %q, RateLimit %q, %d hooks; want %d with the status text only, no fields, no hook", c.err, w.Code, w.Body.String(), w.Header().Get("RateLimit"), hooks, c.code)
		}
		if got := l.Tokens("k"); got != 1 {
			t.Errorf("key error %v: %v tokens left; want 1 (nothing debited)", c.err, got)
		}
	}
	l := limit.MustNew(1, 2, limit.WithName("p"), limit.WithClock(clk))
	h := httplimit.Wrap(l, a88OK, httplimit.WithKey(httplimit.Func(func(*http.Request) string { return "" })))
	codes := []int{a88Do(h, "GET").Code, a88Do(h, "GET").Code, a88Do(h, "GET").Code}
	if codes[0] != 200 || codes[1] != 200 || codes[2] != 429 {
		t.Errorf("empty key: %v; want 200 200 429 (one key)", codes)
	}
	var gotErr error
	hh := httplimit.Wrap(l, a88OK, httplimit.WithKey(httplimit.Header("X-Api-Key")),
		httplimit.WithErrorHandler(func(w http.ResponseWriter, _ *http.Request, err error) { gotErr = err; w.WriteHeader(418) }))
	r := httptest.NewRequest("GET", "/", nil)
	r.Header["X-Api-Key"] = []string{""}
	w := httptest.NewRecorder()
	hh.ServeHTTP(w, r)
	if w.Code != 418 || !errors.Is(gotErr, httplimit.ErrNoHeader) {
		t.Errorf("empty X-Api-Key: %d, %v; want the error handler with ErrNoHeader", w.Code, gotErr)
	}
}

// Many requests of one key racing through a Tier's middleware with the
// clock frozen, at several GOMAXPROCS: exactly as many admitted as the
// tier's burst holds at each cost, every denial 429 with a Retry-After.
func TestAudit88HttpTierConcurrentExact(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		clk := sketchtest.NewFakeClock()
		clk.Set(77_777)
		base := limit.MustNew(100, 100, limit.WithName("base"), limit.WithClock(clk), limit.WithMaxDebt(3000))
		tr, err := base.Tier("plan", 2, 60)
		if err != nil {
			t.Fatal(err)
		}
		h := httplimit.Wrap(tr, a88OK, httplimit.WithCost(func(r *http.Request) int {
			n, _ := strconv.Atoi(r.Header.Get("X-Cost"))
			return n
		}))
		const N = 90
		var admitted, tokens, denied atomic.Int64
		var wg sync.WaitGroup
		for i := range N {
			wg.Go(func() {
				c := 1 + i%2
				r := httptest.NewRequest("GET", "/", nil)
				r.RemoteAddr = "198.51.100.9:1"
				r.Header.Set("X-Cost", strconv.Itoa(c))
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				switch w.Code {
				case 200:
					admitted.Add(1)
					tokens.Add(int64(c))
				case 429:
					if w.Header().Get("Retry-After") == "" {
						t.Errorf("denial without Retry-After")
					}
					denied.Add(1)
				default:
					t.Errorf("status %d", w.Code)
				}
			})
		}
		wg.Wait()
		// Costs 1 and 2 against 60 tokens: the admitted ones sum to 59 or
		// 60 (59 only when the last one to fit costs 2 with 1 left, and
		// then no cost-1 request came later).
		if got := tokens.Load(); got > 60 || got < 59 {
			t.Errorf("admitted %d requests, %d tokens; want 59 or 60 of the burst of 60", admitted.Load(), got)
		}
		if left := tr.Tokens("198.51.100.9/32"); math.Abs(left-float64(60-tokens.Load())) > 1e-9 {
			t.Errorf("tier holds %v tokens after %d admitted; want %d", left, tokens.Load(), 60-tokens.Load())
		}
	})
}

// New and With refuse every nil or zero limiter of package limit with a
// *sketch.ConfigError, a nil *Tier and *Multi included (doc: "for a nil
// or zero limiter (no policies)"), without panicking.
func TestAudit88HttpNilAndZeroLimiters(t *testing.T) {
	good, err := httplimit.New(limit.MustNew(1, 1))
	if err != nil {
		t.Fatal(err)
	}
	for name, l := range map[string]httplimit.Limiter{
		"nil":          nil,
		"nil Tier":     (*limit.Tier)(nil),
		"zero Tier":    &limit.Tier{},
		"nil Multi":    (*limit.Multi)(nil),
		"zero Multi":   &limit.Multi{},
		"nil Limiter":  (*limit.Limiter)(nil),
		"zero Limiter": &limit.Limiter{},
	} {
		var err1, err2 error
		if msg := sketchtest.Panics(func() { _, err1 = httplimit.New(l) }); msg != "" {
			t.Errorf("New(%s) panicked: %s", name, msg)
		}
		if msg := sketchtest.Panics(func() { _, err2 = good.With(l) }); msg != "" {
			t.Errorf("With(%s) panicked: %s", name, msg)
		}
		for _, err := range []error{err1, err2} {
			var ce *sketch.ConfigError
			if !errors.As(err, &ce) || !errors.Is(err, sketch.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "httplimit: ") {
				t.Errorf("%s: %v; want a *sketch.ConfigError prefixed httplimit:", name, err)
			}
		}
	}
}
