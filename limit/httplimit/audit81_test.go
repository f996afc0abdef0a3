package httplimit_test

import (
	"context"
	"encoding/json"
	"errors"
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
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// audit81Lim is a Limiter answering a scripted Decision and error.
type audit81Lim struct {
	pols  []limit.Policy
	d     limit.Decision
	err   error
	calls atomic.Int64
	lastN atomic.Int64
}

func (f *audit81Lim) DecideContext(_ context.Context, _ string, n int) (limit.Decision, error) {
	f.calls.Add(1)
	f.lastN.Store(int64(n))
	return f.d, f.err
}
func (f *audit81Lim) Policies() []limit.Policy { return f.pols }

func audit81Pol() []limit.Policy {
	return []limit.Policy{{Name: "p", Limit: 1, Burst: 10}}
}

var audit81OK = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(200) })

func audit81Do(h http.Handler, method, remote string, hdr map[string][]string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, "/x", nil)
	r.RemoteAddr = remote
	for k, v := range hdr {
		r.Header[k] = v
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// Keys from RemoteAddr in every form: zones, brackets, bare, mapped,
// malformed.
func TestAudit81RemoteAddrKeys(t *testing.T) {
	k := httplimit.RemoteIP()
	cases := []struct{ remote, key string }{
		{"203.0.113.7:1234", "203.0.113.7/32"},
		{"203.0.113.7", "203.0.113.7/32"},
		{"[2001:db8:1:2:3:4:5:6]:443", "2001:db8:1:2::/64"},
		{"2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"},
		{"[2001:db8:1:2::9]", "2001:db8:1:2::/64"},
		{"[fe80::1%eth0]:80", "fe80::/64"},
		{"[fe80::1%eth1]:80", "fe80::/64"},
		{"fe80::1%eth1", "fe80::/64"},
		{"[::ffff:203.0.113.7]:80", "203.0.113.7/32"},
		{"::ffff:203.0.113.7", "203.0.113.7/32"},
	}
	for _, c := range cases {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = c.remote
		got, err := k(r)
		if err != nil || got != c.key {
			t.Errorf("RemoteAddr %q: key %q, %v; want %q", c.remote, got, err, c.key)
		}
	}
	for _, bad := range []string{"", "@", "/tmp/sock", "host:80", "1.2.3.4:80:90", "::zz", "[]:80"} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = bad
		if got, err := k(r); !errors.Is(err, httplimit.ErrNoClientIP) {
			t.Errorf("RemoteAddr %q: key %q, %v; want ErrNoClientIP", bad, got, err)
		}
	}
	// Through the middleware: 500 with the status text only, nothing debited.
	f := &audit81Lim{pols: audit81Pol(), d: limit.Decision{Allowed: true}}
	h := httplimit.Wrap(f, audit81OK)
	w := audit81Do(h, "GET", "@", nil)
	if w.Code != 500 || strings.TrimSpace(w.Body.String()) != "Internal Server Error" || f.calls.Load() != 0 {
		t.Errorf("RemoteAddr @: %d %q, %d limiter calls; want 500 status text, 0 calls", w.Code, w.Body.String(), f.calls.Load())
	}
}

// X-Forwarded-For: ignored by default (spoofing), the n-th entry from the
// right with WithTrustedProxies(n), over several lines.
func TestAudit81ForwardedFor(t *testing.T) {
	def := httplimit.RemoteIP()
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "198.51.100.1:5"
	r.Header["X-Forwarded-For"] = []string{"1.1.1.1", "2.2.2.2"}
	if got, _ := def(r); got != "198.51.100.1/32" {
		t.Errorf("default key with XFF: %q; want the RemoteAddr's", got)
	}
	one := httplimit.RemoteIP(httplimit.WithTrustedProxies(1))
	two := httplimit.RemoteIP(httplimit.WithTrustedProxies(2))
	cases := []struct {
		lines     []string
		one, two  string
		oneE, twE bool
	}{
		{[]string{"6.6.6.6, 10.0.0.1"}, "10.0.0.1/32", "6.6.6.6/32", false, false},
		{[]string{"6.6.6.6", "10.0.0.1 , 10.0.0.2"}, "10.0.0.2/32", "10.0.0.1/32", false, false},
		{[]string{"6.6.6.6,10.0.0.1", "10.0.0.2"}, "10.0.0.2/32", "10.0.0.1/32", false, false},
		{[]string{"[2001:db8::1]:443"}, "2001:db8::/64", "", false, true},
		{[]string{"10.0.0.1:80"}, "10.0.0.1/32", "", false, true},
		{[]string{"fe80::1%eth0"}, "fe80::/64", "", false, true},
		{[]string{"garbage, 10.0.0.1"}, "10.0.0.1/32", "", false, true},
		{nil, "", "", true, true},
		{[]string{"10.0.0.1,"}, "", "10.0.0.1/32", true, false},
	}
	for _, c := range cases {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "198.51.100.1:5"
		if c.lines != nil {
			r.Header["X-Forwarded-For"] = c.lines
		}
		g1, e1 := one(r)
		g2, e2 := two(r)
		if (e1 != nil) != c.oneE || g1 != c.one || (e1 != nil && !errors.Is(e1, httplimit.ErrForwardedFor)) {
			t.Errorf("XFF %q, 1 proxy: %q, %v; want %q (err %v)", c.lines, g1, e1, c.one, c.oneE)
		}
		if (e2 != nil) != c.twE || g2 != c.two || (e2 != nil && !errors.Is(e2, httplimit.ErrForwardedFor)) {
			t.Errorf("XFF %q, 2 proxies: %q, %v; want %q (err %v)", c.lines, g2, e2, c.two, c.twE)
		}
	}
	// Spoofing: a client prepending entries cannot change its key.
	f := &audit81Lim{pols: audit81Pol(), d: limit.Decision{Allowed: true}}
	seen := map[string]bool{}
	var mu sync.Mutex
	m, err := httplimit.New(f, httplimit.WithKey(one), httplimit.WithHook(func(_ *http.Request, key string, _ limit.Decision) {
		mu.Lock()
		seen[key] = true
		mu.Unlock()
	}))
	if err != nil {
		t.Fatal(err)
	}
	h := m.Handler(audit81OK)
	for _, spoof := range []string{"1.1.1.1", "1.1.1.1, 2.2.2.2", "::1"} {
		audit81Do(h, "GET", "10.9.9.9:1", map[string][]string{"X-Forwarded-For": {spoof + ", 203.0.113.50"}})
	}
	if len(seen) != 1 || !seen["203.0.113.50/32"] {
		t.Errorf("spoofed XFF prefixes gave keys %v; want only 203.0.113.50/32", seen)
	}
	// Fewer entries than proxies: 400, status text, nothing debited.
	calls := f.calls.Load()
	w := audit81Do(httplimit.Wrap(f, audit81OK, httplimit.WithKey(two)), "GET", "10.9.9.9:1", map[string][]string{"X-Forwarded-For": {"1.2.3.4"}})
	if w.Code != 400 || strings.TrimSpace(w.Body.String()) != "Bad Request" || f.calls.Load() != calls {
		t.Errorf("short XFF: %d %q; want 400 status text, no limiter call", w.Code, w.Body.String())
	}
}

// A limiter error: no decision -> 503 status text only, the error hook
// sees it, the decision hook does not; a fallback decision is followed.
func TestAudit81LimiterError(t *testing.T) {
	boom := errors.New("secret-redis-detail")
	var limErrs, hooks atomic.Int64
	var gotErr error
	opts := []httplimit.Option{
		httplimit.WithLimiterError(func(_ *http.Request, _ string, err error) { limErrs.Add(1) }),
		httplimit.WithHook(func(*http.Request, string, limit.Decision) { hooks.Add(1) }),
	}
	// No decision (FailClosed's shape: RetryAfter 0, not Never).
	f := &audit81Lim{pols: audit81Pol(), d: limit.Decision{Limit: 1, Burst: 10, Policy: "p"}, err: boom}
	h := httplimit.Wrap(f, audit81OK, opts...)
	w := audit81Do(h, "GET", "1.2.3.4:1", nil)
	if w.Code != 503 || strings.Contains(w.Body.String(), "secret") || limErrs.Load() != 1 || hooks.Load() != 0 {
		t.Errorf("no decision: %d %q, limErr %d hooks %d; want 503, no error text, 1, 0", w.Code, w.Body.String(), limErrs.Load(), hooks.Load())
	}
	// A negative RetryAfter (redis's fault sets -1) is still no decision.
	f.d.RetryAfter = -1
	if w := audit81Do(h, "GET", "1.2.3.4:1", nil); w.Code != 503 {
		t.Errorf("RetryAfter -1 with error: %d; want 503", w.Code)
	}
	// The error handler gets ErrLimiter wrapping the limiter's error.
	h2 := httplimit.Wrap(f, audit81OK, httplimit.WithErrorHandler(func(w http.ResponseWriter, _ *http.Request, err error) {
		gotErr = err
		w.WriteHeader(599)
	}))
	audit81Do(h2, "GET", "1.2.3.4:1", nil)
	if !errors.Is(gotErr, httplimit.ErrLimiter) || !errors.Is(gotErr, boom) {
		t.Errorf("error handler got %v; want ErrLimiter wrapping the limiter's", gotErr)
	}
	// FailOpen's shape: allowed with an error -> the handler runs, fields set.
	f.d = limit.Decision{Allowed: true, Limit: 1, Burst: 10, Policy: "p", Remaining: 10, RetryAfter: -1}
	w = audit81Do(h, "GET", "1.2.3.4:1", nil)
	if w.Code != 200 || w.Header().Get("RateLimit") != `"p";r=10` || hooks.Load() != 1 {
		t.Errorf("fail open: %d RateLimit %q hooks %d; want 200, \"p\";r=10, 1", w.Code, w.Header().Get("RateLimit"), hooks.Load())
	}
	// A fallback's denial with a wait -> 429 with Retry-After.
	f.d = limit.Decision{Limit: 1, Burst: 10, Policy: "p", RetryAfter: 2500 * time.Millisecond, NextAfter: 500 * time.Millisecond}
	w = audit81Do(h, "GET", "1.2.3.4:1", nil)
	if w.Code != 429 || w.Header().Get("Retry-After") != "3" || w.Header().Get("RateLimit") != `"p";r=0;t=1` {
		t.Errorf("fallback denial: %d Retry-After %q RateLimit %q; want 429, 3, \"p\";r=0;t=1", w.Code, w.Header().Get("Retry-After"), w.Header().Get("RateLimit"))
	}
}

// Every number in the fields equals the Decision's, durations rounded up.
func TestAudit81NumbersFromDecision(t *testing.T) {
	cases := []struct {
		d              limit.Decision
		rl, ra, legacy string
	}{
		{limit.Decision{Allowed: true, Remaining: 7, NextAfter: time.Millisecond, ResetAfter: 3001 * time.Millisecond}, `"p";r=7;t=1`, "", "10 7 4"},
		{limit.Decision{Allowed: true, Remaining: 10}, `"p";r=10`, "", "10 10 0"},
		{limit.Decision{Remaining: 0, RetryAfter: time.Millisecond, NextAfter: time.Millisecond, ResetAfter: 10 * time.Second}, `"p";r=0;t=1`, "1", "10 0 10"},
		{limit.Decision{Remaining: 0, RetryAfter: time.Second, NextAfter: time.Second, ResetAfter: time.Second}, `"p";r=0;t=1`, "1", "10 0 1"},
		{limit.Decision{Remaining: 0, RetryAfter: 1001 * time.Millisecond, NextAfter: 1001 * time.Millisecond}, `"p";r=0;t=2`, "2", "10 0 0"},
		{limit.Decision{Remaining: 2, RetryAfter: 4999 * time.Millisecond, NextAfter: 999 * time.Millisecond}, `"p";r=2;t=1`, "5", "10 2 0"},
	}
	for i, c := range cases {
		c.d.Limit, c.d.Burst, c.d.Policy = 1, 10, "p"
		f := &audit81Lim{pols: audit81Pol(), d: c.d}
		h := httplimit.Wrap(f, audit81OK, httplimit.WithLegacyHeaders(true))
		w := audit81Do(h, "GET", "1.2.3.4:1", nil)
		hd := w.Header()
		leg := hd.Get("X-RateLimit-Limit") + " " + hd.Get("X-RateLimit-Remaining") + " " + hd.Get("X-RateLimit-Reset")
		if hd.Get("RateLimit") != c.rl || hd.Get("Retry-After") != c.ra || leg != c.legacy || hd.Get("RateLimit-Policy") != `"p";q=10;w=10` {
			t.Errorf("case %d: RateLimit %q Retry-After %q legacy %q policy %q; want %q %q %q", i, hd.Get("RateLimit"), hd.Get("Retry-After"), leg, hd.Get("RateLimit-Policy"), c.rl, c.ra, c.legacy)
		}
		if want := 200; !c.d.Allowed {
			want = 429
			if w.Code != want {
				t.Errorf("case %d: %d; want %d", i, w.Code, want)
			}
		}
	}
}

// Costs: n tokens debited, n = 0 and n < 0 refused (500, nothing
// debited), n > burst Never: 429 without Retry-After, body says do not retry.
func TestAudit81Costs(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	l := limit.MustNew(1, 10, limit.WithName("p"), limit.WithClock(clk))
	var cost atomic.Int64
	h := httplimit.Wrap(l, audit81OK, httplimit.WithCost(func(*http.Request) int { return int(cost.Load()) }), httplimit.WithLegacyHeaders(true))
	for _, n := range []int64{0, -1, -1 << 40} {
		cost.Store(n)
		w := audit81Do(h, "GET", "1.2.3.4:1", nil)
		if w.Code != 500 || w.Header().Get("RateLimit") != "" || strings.TrimSpace(w.Body.String()) != "Internal Server Error" {
			t.Errorf("cost %d: %d RateLimit %q body %q; want 500 without fields", n, w.Code, w.Header().Get("RateLimit"), w.Body.String())
		}
	}
	cost.Store(4)
	w := audit81Do(h, "GET", "1.2.3.4:1", nil)
	if w.Code != 200 || w.Header().Get("RateLimit") != `"p";r=6;t=1` || w.Header().Get("X-RateLimit-Reset") != "4" {
		t.Errorf("cost 4 on a full bucket: %d %q reset %q; want 200 \"p\";r=6;t=1 reset 4", w.Code, w.Header().Get("RateLimit"), w.Header().Get("X-RateLimit-Reset"))
	}
	cost.Store(11)
	w = audit81Do(h, "GET", "1.2.3.4:1", nil)
	if w.Code != 429 || w.Header().Get("Retry-After") != "" || !strings.Contains(w.Body.String(), "do not retry") {
		t.Errorf("cost 11 > burst 10: %d Retry-After %q body %q; want 429 without Retry-After, do not retry", w.Code, w.Header().Get("Retry-After"), w.Body.String())
	}
	// Nothing debited by the Never: 6 remain.
	cost.Store(6)
	if w := audit81Do(h, "GET", "1.2.3.4:1", nil); w.Code != 200 || w.Header().Get("RateLimit") != `"p";r=0;t=1` {
		t.Errorf("cost 6 after the Never: %d %q; want 200 r=0", w.Code, w.Header().Get("RateLimit"))
	}
	// Problem JSON of a Never: no retryAfter member.
	hp := httplimit.Wrap(l, audit81OK, httplimit.WithCost(func(*http.Request) int { return 11 }), httplimit.WithProblemJSON(true))
	w = audit81Do(hp, "GET", "5.6.7.8:1", nil)
	var p map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || w.Code != 429 || w.Header().Get("Content-Type") != "application/problem+json" {
		t.Fatalf("problem Never: %d %q %v", w.Code, w.Body.String(), err)
	}
	if _, has := p["retryAfter"]; has || p["status"] != float64(429) || p["type"] != httplimit.ProblemType {
		t.Errorf("problem Never body %v; want no retryAfter, status 429, the type", p)
	}
}

// A denial in problem+json: retryAfter equals Retry-After, which is the
// limiter's RetryAfter rounded up (minimally); a retry at that second is
// admitted.
func TestAudit81RetryNeverEarly(t *testing.T) {
	for _, lim := range []limit.Limit{1, 3, limit.Every(700 * time.Millisecond), limit.Every(2300 * time.Millisecond), limit.Every(1000 * time.Millisecond)} {
		for _, step := range []time.Duration{0, 137 * time.Millisecond, time.Second} {
			clk := sketchtest.NewFakeClock()
			l := limit.MustNew(lim, 2, limit.WithName("p"), limit.WithClock(clk))
			var last limit.Decision
			h := httplimit.Wrap(l, audit81OK, httplimit.WithProblemJSON(true), httplimit.WithHook(func(_ *http.Request, _ string, d limit.Decision) { last = d }))
			audit81Do(h, "GET", "1.2.3.4:1", nil)
			clk.Advance(step)
			audit81Do(h, "GET", "1.2.3.4:1", nil)
			w := audit81Do(h, "GET", "1.2.3.4:1", nil)
			for i := 0; w.Code == 200 && i < 5; i++ {
				w = audit81Do(h, "GET", "1.2.3.4:1", nil)
			}
			if w.Code != 429 {
				t.Fatalf("%v step %v: no denial: %d", lim, step, w.Code)
			}
			var p httplimit.Problem
			if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || p.RetryAfter == nil {
				t.Fatalf("%v: body %q %v", lim, w.Body.String(), err)
			}
			secs, err := strconv.ParseInt(w.Header().Get("Retry-After"), 10, 64)
			if err != nil || *p.RetryAfter != secs {
				t.Errorf("%v: body retryAfter %d, field %q", lim, *p.RetryAfter, w.Header().Get("Retry-After"))
			}
			if want := int64((last.RetryAfter + time.Second - 1) / time.Second); secs != max(want, 1) {
				t.Errorf("%v step %v: Retry-After %d for RetryAfter %v; want %d", lim, step, secs, last.RetryAfter, want)
			}
			clk.Advance(time.Duration(secs) * time.Second)
			if w := audit81Do(h, "GET", "1.2.3.4:1", nil); w.Code != 200 {
				t.Errorf("%v step %v: retry at Retry-After %d s: %d; want 200", lim, step, secs, w.Code)
			}
		}
	}
}

// Exact admission count through the middleware, N goroutines, frozen clock.
func TestAudit81ConcurrentExact(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		clk := sketchtest.NewFakeClock()
		l := limit.MustNew(1, 37, limit.WithName("p"), limit.WithClock(clk))
		var hooked, admittedHook atomic.Int64
		h := httplimit.Wrap(l, audit81OK, httplimit.WithCost(func(r *http.Request) int {
			if r.Method == http.MethodHead {
				return 2
			}
			return 1
		}), httplimit.WithHook(func(_ *http.Request, _ string, d limit.Decision) {
			hooked.Add(1)
			if d.Allowed {
				admittedHook.Add(1)
			}
		}))
		const n = 200
		var ok, denied, tokens atomic.Int64
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				method := "GET"
				if i%3 == 0 {
					method = "HEAD"
				}
				w := audit81Do(h, method, "[2001:db8:0:1::"+string(rune('a'+i%6))+"]:1", nil)
				switch w.Code {
				case 200:
					ok.Add(1)
					if method == "HEAD" {
						tokens.Add(2)
					} else {
						tokens.Add(1)
					}
				case 429:
					denied.Add(1)
					if w.Header().Get("Retry-After") == "" {
						t.Errorf("429 without Retry-After")
					}
				default:
					t.Errorf("status %d", w.Code)
				}
			})
		}
		wg.Wait()
		// All six addresses share one /64: one bucket of 37 tokens.
		if ok.Load()+denied.Load() != n || hooked.Load() != n || admittedHook.Load() != ok.Load() {
			t.Errorf("ok %d denied %d hooked %d admittedHook %d", ok.Load(), denied.Load(), hooked.Load(), admittedHook.Load())
		}
		if tk := tokens.Load(); tk > 37 || tk < 36 {
			t.Errorf("tokens admitted %d; want 36 or 37 of the burst 37", tk)
		}
		if d := l.PeekN(clk.Now(), "2001:db8:0:1::/64", 1); d.Remaining != int(37-tokens.Load()) {
			t.Errorf("Remaining after %d tokens: %d", tokens.Load(), d.Remaining)
		}
	})
}

// A handler that panics: the request was debited once, the fields were
// set before the handler ran, the panic propagates. A streaming handler
// sees the fields in its written headers.
func TestAudit81PanicAndStreaming(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	l := limit.MustNew(1, 3, limit.WithName("p"), limit.WithClock(clk))
	var sawField string
	h := httplimit.Wrap(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sawField = w.Header().Get("RateLimit")
		panic(http.ErrAbortHandler)
	}))
	func() {
		defer func() {
			if recover() != http.ErrAbortHandler {
				t.Errorf("panic not propagated")
			}
		}()
		audit81Do(h, "GET", "1.2.3.4:1", nil)
	}()
	if sawField != `"p";r=2;t=1` {
		t.Errorf("field seen by the handler %q", sawField)
	}
	if d := l.PeekN(clk.Now(), "1.2.3.4/32", 1); d.Remaining != 1 {
		t.Errorf("peek's remaining after a panicking request %d; want 1 (2 left, less the peeked one)", d.Remaining)
	}
	srv := httptest.NewServer(httplimit.Wrap(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("a"))
		w.(http.Flusher).Flush()
		w.Write([]byte("b"))
	})))
	defer srv.Close()
	for i, want := range []int{200, 200, 200, 429} {
		resp, err := http.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want || resp.Header.Get("RateLimit") == "" || resp.Header.Get("RateLimit-Policy") != `"p";q=3;w=3` {
			t.Errorf("streamed %d: %d %q %q", i, resp.StatusCode, resp.Header.Get("RateLimit"), resp.Header.Get("RateLimit-Policy"))
		}
	}
	// OPTIONS and HEAD are limited like any method (no exclusion promised).
	for _, m := range []string{"OPTIONS", "HEAD"} {
		req, _ := http.NewRequest(m, srv.URL, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s: %d Retry-After %q; want 429 with it", m, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
}

// WithSkip and WithExcludedKey: no fields, nothing debited; the denied
// handler finds the fields set.
func TestAudit81SkipExcludeDenied(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	l := limit.MustNew(1, 1, limit.WithName("p"), limit.WithClock(clk))
	var deniedSaw http.Header
	h := httplimit.Wrap(l, audit81OK,
		httplimit.WithSkip(func(r *http.Request) bool { return r.URL.Path == "/health" }),
		httplimit.WithExcludedKey(func(k string) bool { return k == "10.0.0.1/32" }),
		httplimit.WithDeniedHandler(func(w http.ResponseWriter, _ *http.Request, d limit.Decision) {
			deniedSaw = w.Header().Clone()
			w.WriteHeader(418)
		}))
	for range 5 {
		r := httptest.NewRequest("GET", "/health", nil)
		r.RemoteAddr = "1.2.3.4:1"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != 200 || len(w.Header()) != 0 {
			t.Errorf("skipped: %d %v", w.Code, w.Header())
		}
		w = audit81Do(h, "GET", "10.0.0.1:1", nil)
		if w.Code != 200 || len(w.Header()) != 0 {
			t.Errorf("excluded: %d %v", w.Code, w.Header())
		}
	}
	if w := audit81Do(h, "GET", "1.2.3.4:1", nil); w.Code != 200 {
		t.Errorf("first counted request %d", w.Code)
	}
	w := audit81Do(h, "GET", "1.2.3.4:1", nil)
	if w.Code != 418 || deniedSaw.Get("Retry-After") != "1" || deniedSaw.Get("RateLimit") != `"p";r=0;t=1` || deniedSaw.Get("RateLimit-Policy") != `"p";q=1;w=1` {
		t.Errorf("denied handler: %d saw %v", w.Code, deniedSaw)
	}
}

// Prefix options, NAT64, mapped addresses in X-Forwarded-For, panics.
func TestAudit81Prefixes(t *testing.T) {
	cases := []struct {
		k      httplimit.KeyFunc
		remote string
		xff    string
		want   string
	}{
		{httplimit.RemoteIP(httplimit.WithIPv4Prefix(24)), "203.0.113.77:1", "", "203.0.113.0/24"},
		{httplimit.RemoteIP(httplimit.WithIPv4Prefix(24)), "[::ffff:203.0.113.77]:1", "", "203.0.113.0/24"},
		{httplimit.RemoteIP(httplimit.WithIPv4Prefix(0)), "203.0.113.77:1", "", "0.0.0.0/0"},
		{httplimit.RemoteIP(httplimit.WithIPv6Prefix(128)), "[2001:db8::1%z]:1", "", "2001:db8::1/128"},
		{httplimit.RemoteIP(httplimit.WithIPv6Prefix(0)), "[2001:db8::1]:1", "", "::/0"},
		{httplimit.RemoteIP(), "[64:ff9b::102:304]:1", "", "64:ff9b::/64"},
		{httplimit.RemoteIP(httplimit.WithIPv6Prefix(128)), "[64:ff9b::1.2.3.4]:1", "", "64:ff9b::102:304/128"},
		{httplimit.RemoteIP(httplimit.WithTrustedProxies(1)), "1.1.1.1:1", "::ffff:10.0.0.9", "10.0.0.9/32"},
		{httplimit.RemoteIP(), "[::ffff:10.0.0.9%eth0]:1", "", "10.0.0.9/32"},
		{httplimit.RemoteIP(httplimit.WithTrustedProxies(1)), "1.1.1.1:1", "\t10.0.0.8 \t", "10.0.0.8/32"},
		{httplimit.RemoteIP(httplimit.WithTrustedProxies(1)), "", "fe80::1%eth0", "fe80::/64"},
		{httplimit.RemoteIP(httplimit.WithTrustedProxies(1), httplimit.WithIPv6Prefix(48)), "1.1.1.1:1", "2001:db8:aa:bb::1", "2001:db8:aa::/48"},
	}
	for i, c := range cases {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = c.remote
		if c.xff != "" {
			r.Header.Set("X-Forwarded-For", c.xff)
		}
		if got, err := c.k(r); got != c.want || err != nil {
			t.Errorf("case %d: %q %v; want %q", i, got, err, c.want)
		}
	}
	for _, o := range []httplimit.IPOption{httplimit.WithIPv4Prefix(33), httplimit.WithIPv4Prefix(-1), httplimit.WithIPv6Prefix(129), httplimit.WithTrustedProxies(-1)} {
		func() {
			defer func() {
				if s, ok := recover().(string); !ok || !strings.HasPrefix(s, "httplimit:") {
					t.Errorf("panic %v; want a string starting httplimit:", s)
				}
			}()
			httplimit.RemoteIP(o)
		}()
	}
}

// The X-Forwarded-For key allocates the same whatever the header's size.
func TestAudit81ForwardedAllocs(t *testing.T) {
	k := httplimit.RemoteIP(httplimit.WithTrustedProxies(2))
	small := httptest.NewRequest("GET", "/", nil)
	small.Header.Set("X-Forwarded-For", "1.2.3.4, 5.6.7.8")
	big := httptest.NewRequest("GET", "/", nil)
	big.Header["X-Forwarded-For"] = []string{strings.Repeat("9.9.9.9, ", 5000), strings.Repeat(",", 10000) + "1.2.3.4", "5.6.7.8"}
	a := testing.AllocsPerRun(50, func() { k(small) })
	b := testing.AllocsPerRun(50, func() { k(big) })
	if got, _ := k(big); got != "1.2.3.4/32" {
		t.Errorf("big key %q", got)
	}
	if b > a {
		t.Errorf("allocs: small header %v, big %v", a, b)
	}
}

// Burst 0 (every request Never), an Inf limiter (no fields), and a
// Multi's Never.
func TestAudit81EdgePolicies(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	// limit.New refuses burst 0; a Limiter of another kind may have it.
	z := &audit81Lim{pols: []limit.Policy{{Name: "z", Limit: 1}}, d: limit.Decision{Never: true, Limit: 1, Policy: "z", RetryAfter: limit.InfDuration}}
	w := audit81Do(httplimit.Wrap(z, audit81OK), "GET", "1.2.3.4:1", nil)
	if w.Code != 429 || w.Header().Get("Retry-After") != "" || w.Header().Get("RateLimit-Policy") != `"z";q=0;w=1` || !strings.Contains(w.Body.String(), "do not retry") {
		t.Errorf("burst 0: %d %v %q", w.Code, w.Header(), w.Body.String())
	}
	inf := limit.MustNew(limit.Inf, 5, limit.WithName("i"), limit.WithClock(clk))
	w = audit81Do(httplimit.Wrap(inf, audit81OK, httplimit.WithLegacyHeaders(true)), "GET", "1.2.3.4:1", nil)
	if w.Code != 200 || len(w.Header()) != 0 {
		t.Errorf("Inf limiter: %d %v", w.Code, w.Header())
	}
	m, err := limit.NewMulti(limit.MustNew(1, 5, limit.WithName("a"), limit.WithClock(clk)), limit.MustNew(1, 50, limit.WithName("b"), limit.WithClock(clk)))
	if err != nil {
		t.Fatal(err)
	}
	h := httplimit.Wrap(m, audit81OK, httplimit.WithCost(func(*http.Request) int { return 6 }), httplimit.WithProblemJSON(true))
	w = audit81Do(h, "GET", "1.2.3.4:1", nil)
	var p map[string]any
	_ = json.Unmarshal(w.Body.Bytes(), &p)
	if _, has := p["retryAfter"]; w.Code != 429 || w.Header().Get("Retry-After") != "" || has {
		t.Errorf("Multi Never: %d %v %q", w.Code, w.Header(), w.Body.String())
	}
	// Nothing debited in either window.
	h1 := httplimit.Wrap(m, audit81OK, httplimit.WithCost(func(*http.Request) int { return 5 }))
	if w := audit81Do(h1, "GET", "1.2.3.4:1", nil); w.Code != 200 {
		t.Errorf("Multi after Never, cost 5: %d %v", w.Code, w.Header())
	}
}

// A deterministic walk: requests of varying cost at varying steps; after
// every retryable denial, the same request at exactly Retry-After seconds
// later is admitted (never early), for a Limiter (with and without a
// reject cost) and a Multi, rates exact and inexact.
func TestAudit81RetryWalk(t *testing.T) {
	type mk func(clk *sketchtest.FakeClock) httplimit.Limiter
	single := func(r limit.Limit, b int, o ...limit.Option) mk {
		return func(clk *sketchtest.FakeClock) httplimit.Limiter {
			return limit.MustNew(r, b, append(o, limit.WithName("s"), limit.WithClock(clk))...)
		}
	}
	multi := func(clk *sketchtest.FakeClock) httplimit.Limiter {
		m, err := limit.NewMulti(
			limit.MustNew(limit.Every(333*time.Millisecond), 4, limit.WithName("a"), limit.WithClock(clk)),
			limit.MustNew(limit.Every(2300*time.Millisecond), 9, limit.WithName("b"), limit.WithClock(clk)),
			limit.MustNew(0.1, 20, limit.WithName("c"), limit.WithClock(clk)))
		if err != nil {
			panic(err)
		}
		return m
	}
	kinds := map[string]mk{
		"1/s":    single(1, 5),
		"7/s":    single(7, 3),
		"999ms":  single(limit.Every(999*time.Millisecond), 10),
		"2.3s":   single(limit.Every(2300*time.Millisecond), 4),
		"reject": single(2, 6, limit.WithRejectCost(0.5)),
		"strict": single(limit.Every(1300*time.Millisecond), 3, limit.WithStrict(true)),
		"multi":  multi,
	}
	for name, k := range kinds {
		clk := sketchtest.NewFakeClock()
		l := k(clk)
		var cost atomic.Int64
		h := httplimit.Wrap(l, audit81OK, httplimit.WithCost(func(*http.Request) int { return int(cost.Load()) }), httplimit.WithProblemJSON(true))
		x := uint64(12345)
		denials := 0
		for i := range 400 {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			cost.Store(int64(1 + x%3))
			clk.Advance(time.Duration(x>>8%900) * time.Millisecond)
			w := audit81Do(h, "GET", "1.2.3.4:1", nil)
			if w.Code == 200 {
				continue
			}
			if w.Code != 429 {
				t.Fatalf("%s step %d: %d", name, i, w.Code)
			}
			ra := w.Header().Get("Retry-After")
			if ra == "" {
				continue // Never
			}
			denials++
			secs, err := strconv.ParseInt(ra, 10, 64)
			if err != nil || secs < 1 {
				t.Fatalf("%s: Retry-After %q", name, ra)
			}
			clk.Advance(time.Duration(secs) * time.Second)
			if w := audit81Do(h, "GET", "1.2.3.4:1", nil); w.Code != 200 {
				t.Errorf("%s step %d: cost %d retried at Retry-After %d s: %d (RateLimit %q); want 200", name, i, cost.Load(), secs, w.Code, w.Header().Get("RateLimit"))
			}
		}
		if denials == 0 {
			t.Errorf("%s: no denial in the walk", name)
		}
	}
}

// The RateLimit t and the legacy Reset are never early: t seconds after
// an answer of r, the key has more than r; Reset seconds after, the
// bucket is full.
func TestAudit81TAndResetNeverEarly(t *testing.T) {
	for _, lim := range []limit.Limit{1, 7, limit.Every(999 * time.Millisecond), limit.Every(2300 * time.Millisecond), 0.3} {
		for seed := uint64(1); seed <= 3; seed++ {
			clk := sketchtest.NewFakeClock()
			l := limit.MustNew(lim, 6, limit.WithName("s"), limit.WithClock(clk))
			var cost atomic.Int64
			h := httplimit.Wrap(l, audit81OK, httplimit.WithLegacyHeaders(true), httplimit.WithCost(func(*http.Request) int { return int(cost.Load()) }))
			x := seed * 7919
			for i := range 150 {
				x ^= x << 13
				x ^= x >> 7
				x ^= x << 17
				cost.Store(int64(1 + x%4))
				clk.Advance(time.Duration(x>>8%700) * time.Millisecond)
				w := audit81Do(h, "GET", "1.2.3.4:1", nil)
				rl := w.Header().Get("RateLimit")
				var r, tt int64 = -1, 0
				for _, p := range strings.Split(rl, ";")[1:] {
					k, v, _ := strings.Cut(p, "=")
					n, _ := strconv.ParseInt(v, 10, 64)
					switch k {
					case "r":
						r = n
					case "t":
						tt = n
					}
				}
				reset, _ := strconv.ParseInt(w.Header().Get("X-RateLimit-Reset"), 10, 64)
				if rem := w.Header().Get("X-RateLimit-Remaining"); rem != strconv.FormatInt(r, 10) {
					t.Fatalf("legacy remaining %q, r %d", rem, r)
				}
				if x%5 == 0 && tt > 0 {
					clk.Advance(time.Duration(tt) * time.Second)
					// A one-token peek: Remaining as if admitted.
					if d := l.PeekN(clk.Now(), "1.2.3.4/32", 1); !d.Allowed || d.Remaining+1 <= int(r) {
						t.Errorf("%v seed %d step %d: %q, then %d s later peek %+v; want more than r", lim, seed, i, rl, tt, d)
					}
					if reset > tt {
						clk.Advance(time.Duration(reset-tt) * time.Second)
					}
					if d := l.PeekN(clk.Now(), "1.2.3.4/32", 1); reset >= tt && d.Remaining != 5 {
						t.Errorf("%v seed %d step %d: Reset %d s, then peek %+v; want a full bucket (5 after the peeked one)", lim, seed, i, reset, d)
					}
				}
			}
		}
	}
}

// A Multi through the middleware, concurrent requests of mixed costs, the
// clock frozen: all or nothing, so both windows are debited the same
// admitted tokens, never more than the smaller burst.
func TestAudit81ConcurrentMultiCosts(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		clk := sketchtest.NewFakeClock()
		a := limit.MustNew(1, 20, limit.WithName("a"), limit.WithClock(clk))
		b := limit.MustNew(0.5, 30, limit.WithName("b"), limit.WithClock(clk))
		m, err := limit.NewMulti(a, b)
		if err != nil {
			t.Fatal(err)
		}
		h := httplimit.Wrap(m, audit81OK, httplimit.WithCost(func(r *http.Request) int {
			n, _ := strconv.Atoi(r.Header.Get("N"))
			return n
		}))
		var tokens, never atomic.Int64
		var wg sync.WaitGroup
		for i := range 120 {
			wg.Go(func() {
				n := 1 + i%4
				if i%29 == 0 {
					n = 25 // above a's burst: never
				}
				w := audit81Do(h, "GET", "1.2.3.4:1", map[string][]string{"N": {strconv.Itoa(n)}})
				switch {
				case w.Code == 200:
					tokens.Add(int64(n))
				case w.Code == 429 && w.Header().Get("Retry-After") == "":
					never.Add(1)
					if n != 25 {
						t.Errorf("cost %d: 429 without Retry-After", n)
					}
				case w.Code != 429:
					t.Errorf("cost %d: %d", n, w.Code)
				}
			})
		}
		wg.Wait()
		tk := int(tokens.Load())
		ra, rb := a.PeekN(clk.Now(), "1.2.3.4/32", 1), b.PeekN(clk.Now(), "1.2.3.4/32", 1)
		// A peek's Remaining is as if admitted (one less) when it would be.
		remA, remB := ra.Remaining, rb.Remaining
		if ra.Allowed {
			remA++
		}
		if rb.Allowed {
			remB++
		}
		if tk > 20 || tk < 17 || remA != 20-tk || remB != 30-tk || never.Load() != 5 {
			t.Errorf("admitted %d tokens; windows left %d and %d; nevers %d; want <= 20 (>= 17), 20-%d, 30-%d, 5", tk, remA, remB, never.Load(), tk, tk)
		}
	})
}

// Allow with a nil request: ErrNilRequest, 500, nothing decided.
func TestAudit81NilRequest(t *testing.T) {
	f := &audit81Lim{pols: audit81Pol(), d: limit.Decision{Allowed: true}}
	m, err := httplimit.New(f)
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	if m.Allow(w, nil) || w.Code != 500 || f.calls.Load() != 0 {
		t.Errorf("Allow(nil): %d, %d calls; want false, 500, 0", w.Code, f.calls.Load())
	}
	for _, k := range []httplimit.KeyFunc{httplimit.RemoteIP(), httplimit.Header("X"), httplimit.Func(func(*http.Request) string { return "k" })} {
		if _, err := k(nil); !errors.Is(err, httplimit.ErrNilRequest) {
			t.Errorf("KeyFunc(nil): %v; want ErrNilRequest", err)
		}
	}
}
