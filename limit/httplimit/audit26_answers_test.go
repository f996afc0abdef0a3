package httplimit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// audit26Item parses one sf-list member `"name";k=int;...` (RFC 9651:
// an sf-string and parameters whose values are sf-integers, at most 15
// digits). ok is false on anything else.
func audit26Item(s string) (name string, params map[string]int64, ok bool) {
	name, rest, ok := parseSFString(s)
	if !ok {
		return "", nil, false
	}
	params = map[string]int64{}
	for rest != "" {
		if rest[0] != ';' {
			return "", nil, false
		}
		rest = rest[1:]
		eq := strings.IndexByte(rest, '=')
		if eq <= 0 {
			return "", nil, false
		}
		k := rest[:eq]
		rest = rest[eq+1:]
		end := strings.IndexByte(rest, ';')
		if end < 0 {
			end = len(rest)
		}
		v := rest[:end]
		rest = rest[end:]
		digits := strings.TrimPrefix(v, "-")
		if len(digits) == 0 || len(digits) > 15 || strings.Trim(digits, "0123456789") != "" {
			return "", nil, false
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return "", nil, false
		}
		if _, dup := params[k]; dup {
			return "", nil, false
		}
		params[k] = n
	}
	return name, params, true
}

// audit26Ceil is d in whole seconds rounded up.
func audit26Ceil(d time.Duration) int64 {
	return int64((d + time.Second - 1) / time.Second)
}

// A seeded walk over one key of a limit.Limiter on a fake clock, with
// costs from 1 to burst+2 and random advances: every answer's fields
// are exactly the Decision's (as the hook sees it) in valid Structured
// Field syntax; a denial is 429; Retry-After is absent exactly when the
// cost exceeds the burst, and otherwise max(ceil(RetryAfter), 1), at
// least t; and a retry of the same cost after exactly Retry-After
// seconds is admitted (never early).
func TestAudit26AnswersMatchDecisions(t *testing.T) {
	for _, c := range []struct {
		rate  limit.Limit
		burst int
	}{{2, 3}, {0.3, 5}, {limit.Every(140 * time.Millisecond), 50}, {7, 1}, {1000, 20}} {
		clk := sketchtest.NewFakeClock()
		l := limit.MustNew(c.rate, c.burst, limit.WithClock(clk), limit.WithName(`w "q" \x`))
		var last limit.Decision
		var cost atomic.Int64
		m, err := httplimit.New(l, httplimit.WithCost(func(*http.Request) int { return int(cost.Load()) }),
			httplimit.WithHook(func(_ *http.Request, _ string, d limit.Decision) { last = d }))
		if err != nil {
			t.Fatal(err)
		}
		h := m.Handler(ok)
		rng := rand.New(rand.NewSource(int64(c.burst)))
		serve := func(n int) *httptest.ResponseRecorder {
			cost.Store(int64(n))
			last = limit.Decision{Policy: "unset"}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, audit26Req("192.0.2.1:1"))
			return w
		}
		var seen [4]int // admitted, never, denied, retried
		for i := 0; i < 400; i++ {
			n := 1 + rng.Intn(c.burst+2)
			if rng.Intn(3) == 0 {
				n = 1
			}
			w := serve(n)
			d := last
			if d.Policy == "unset" {
				t.Fatalf("hook not called")
			}
			pname, pp, pok := audit26Item(w.Header().Get("RateLimit-Policy"))
			if !pok || pname != `w "q" \x` || pp["q"] != int64(c.burst) || pp["w"] < 1 || len(pp) != 2 {
				t.Fatalf("RateLimit-Policy %q", w.Header().Get("RateLimit-Policy"))
			}
			name, p, rok := audit26Item(w.Header().Get("RateLimit"))
			if !rok || name != pname || p["r"] != int64(d.Remaining) {
				t.Fatalf("RateLimit %q for %+v", w.Header().Get("RateLimit"), d)
			}
			if tt, has := p["t"]; has != (d.NextAfter > 0) || (has && tt != audit26Ceil(d.NextAfter)) {
				t.Fatalf("RateLimit %q for NextAfter %v", w.Header().Get("RateLimit"), d.NextAfter)
			}
			ra := w.Header().Get("Retry-After")
			switch {
			case d.Allowed:
				if w.Code != 200 || ra != "" {
					t.Fatalf("admitted: %d Retry-After %q", w.Code, ra)
				}
				seen[0]++
			case n > c.burst:
				if w.Code != 429 || ra != "" || !d.Never || !strings.Contains(w.Body.String(), "do not retry") {
					t.Fatalf("cost %d > burst %d: %d Retry-After %q never %v body %q", n, c.burst, w.Code, ra, d.Never, w.Body.String())
				}
				seen[1]++
			default:
				secs, err := strconv.ParseInt(ra, 10, 64)
				if w.Code != 429 || d.Never || err != nil || secs != max(audit26Ceil(d.RetryAfter), 1) {
					t.Fatalf("denial of %d: %d Retry-After %q for %+v", n, w.Code, ra, d)
				}
				if tt := p["t"]; tt > secs || time.Duration(secs)*time.Second < d.RetryAfter {
					t.Fatalf("Retry-After %d earlier than t %d or RetryAfter %v", secs, tt, d.RetryAfter)
				}
				seen[2]++
				if rng.Intn(2) == 0 {
					clk.Advance(time.Duration(secs) * time.Second)
					if w := serve(n); w.Code != 200 {
						t.Fatalf("retry of %d at Retry-After %d s: %d (%+v)", n, secs, w.Code, last)
					}
					seen[3]++
				}
			}
			clk.Advance(time.Duration(rng.Intn(700)) * time.Millisecond)
		}
		if seen[0] == 0 || seen[1] == 0 || seen[2] == 0 || seen[3] == 0 {
			t.Fatalf("rate %v burst %d: the walk missed a case: %v", float64(c.rate), c.burst, seen)
		}
		t.Logf("rate %v burst %d: admitted, never, denied, retried: %v", float64(c.rate), c.burst, seen)
	}
}

// WithProblemJSON: the RFC 9457 body of the draft's quota-exceeded type,
// exactly the documented members, retryAfter equal to Retry-After, and
// none on a request that can never be admitted.
func TestAudit26ProblemJSON(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	l := limit.MustNew(0.5, 2, limit.WithClock(clk), limit.WithName("api"))
	var cost atomic.Int64
	cost.Store(1)
	h := httplimit.Wrap(l, ok, httplimit.WithProblemJSON(true), httplimit.WithCost(func(*http.Request) int { return int(cost.Load()) }))
	type problem struct {
		Type             string   `json:"type"`
		Title            string   `json:"title"`
		Status           int      `json:"status"`
		Detail           string   `json:"detail"`
		ViolatedPolicies []string `json:"violated-policies"`
		RetryAfter       *int64   `json:"retryAfter"`
	}
	decode := func(w *httptest.ResponseRecorder) problem {
		t.Helper()
		if ct := w.Header().Get("Content-Type"); ct != "application/problem+json" {
			t.Fatalf("Content-Type %q", ct)
		}
		var p problem
		dec := json.NewDecoder(bytes.NewReader(w.Body.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("body %q: %v", w.Body.String(), err)
		}
		if p.Type != httplimit.ProblemType || p.Title != httplimit.ProblemTitle || p.Status != 429 || p.Detail == "" ||
			len(p.ViolatedPolicies) != 1 || p.ViolatedPolicies[0] != "api" {
			t.Fatalf("problem %+v", p)
		}
		return p
	}
	for range 2 {
		if w := get(h, "192.0.2.1:1"); w.Code != 200 {
			t.Fatalf("%d", w.Code)
		}
	}
	clk.Advance(100 * time.Millisecond)
	w := get(h, "192.0.2.1:1")
	p := decode(w)
	if w.Code != 429 || p.RetryAfter == nil || strconv.FormatInt(*p.RetryAfter, 10) != w.Header().Get("Retry-After") || *p.RetryAfter != 2 {
		t.Fatalf("%d retryAfter %v Retry-After %q", w.Code, p.RetryAfter, w.Header().Get("Retry-After"))
	}
	cost.Store(3)
	w = get(h, "192.0.2.2:1")
	p = decode(w)
	if w.Code != 429 || p.RetryAfter != nil || w.Header().Get("Retry-After") != "" || !strings.Contains(p.Detail, "do not retry") ||
		bytes.Contains(w.Body.Bytes(), []byte("retryAfter")) {
		t.Fatalf("never: %d %q %q", w.Code, w.Header().Get("Retry-After"), w.Body.String())
	}
}

// WithCost: 0, negative and MinInt go to the error handler with
// ErrBadCost (default 500, status text only) and the limiter is not
// asked; MaxInt and burst+1 are 429 without Retry-After; exactly the
// burst is admitted on a full bucket.
func TestAudit26Costs(t *testing.T) {
	for _, n := range []int{0, -1, math.MinInt} {
		lim := &audit26CountLim{}
		var got error
		h := httplimit.Wrap(lim, ok, httplimit.WithCost(func(*http.Request) int { return n }),
			httplimit.WithErrorHandler(func(w http.ResponseWriter, _ *http.Request, err error) {
				got = err
				w.WriteHeader(599)
			}))
		if w := get(h, "192.0.2.1:1"); w.Code != 599 || !errors.Is(got, httplimit.ErrBadCost) || lim.calls.Load() != 0 {
			t.Errorf("cost %d: %d, %v, %d limiter calls", n, w.Code, got, lim.calls.Load())
		}
		w := get(httplimit.Wrap(lim, ok, httplimit.WithCost(func(*http.Request) int { return n })), "192.0.2.1:1")
		if w.Code != 500 || w.Body.String() != "Internal Server Error\n" || w.Header().Get("RateLimit") != "" {
			t.Errorf("cost %d default: %d %q", n, w.Code, w.Body.String())
		}
	}
	for _, lim := range []httplimit.Limiter{
		limit.MustNew(1, 4, limit.WithClock(sketchtest.NewFakeClock())),
		audit26Multi(t, limit.MustNew(1, 4, limit.WithName("s"), limit.WithClock(sketchtest.NewFakeClock())),
			limit.MustNew(0.01, 10, limit.WithName("h"), limit.WithClock(sketchtest.NewFakeClock()))),
	} {
		for _, c := range []struct{ n, code int }{{math.MaxInt, 429}, {5, 429}, {4, 200}, {1, 429}} {
			h := httplimit.Wrap(lim, ok, httplimit.WithCost(func(*http.Request) int { return c.n }))
			w := get(h, "192.0.2.9:1")
			never := c.n > 4
			if w.Code != c.code || (w.Header().Get("Retry-After") == "") != (c.code == 200 || never) ||
				strings.Contains(w.Body.String(), "do not retry") != never {
				t.Errorf("%T cost %d: %d Retry-After %q body %q", lim, c.n, w.Code, w.Header().Get("Retry-After"), w.Body.String())
			}
		}
	}
}

// The order and exactness of the hooks: WithSkip first (nothing else
// runs, no fields, nothing debited), the key, WithExcludedKey (no cost,
// no limiter, no fields), the cost, the limiter, WithLimiterError on
// every limiter error, WithHook exactly once per decision (never on an
// undecided request), the fields, then next or the denied handler (the
// fields already set when it runs).
func TestAudit26HookOrder(t *testing.T) {
	type step = string
	var log []step
	cause := errors.New("redis 10.0.0.5:6379 i/o timeout")
	var dec limit.Decision
	var lerr error
	lim := &audit26ScriptLim{d: &dec, err: &lerr, log: &log}
	h := httplimit.Wrap(lim, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { log = append(log, "next") }),
		httplimit.WithSkip(func(r *http.Request) bool { log = append(log, "skip"); return r.URL.Path == "/health" }),
		httplimit.WithKey(func(r *http.Request) (string, error) {
			log = append(log, "key")
			if r.Header.Get("K") == "" {
				return "", httplimit.ErrNoHeader
			}
			return r.Header.Get("K"), nil
		}),
		httplimit.WithExcludedKey(func(k string) bool { log = append(log, "excluded"); return k == "admin" }),
		httplimit.WithCost(func(*http.Request) int { log = append(log, "cost"); return 1 }),
		httplimit.WithLimiterError(func(_ *http.Request, k string, err error) { log = append(log, "limerr:"+k) }),
		httplimit.WithHook(func(_ *http.Request, k string, d limit.Decision) { log = append(log, "hook:"+k) }),
		httplimit.WithErrorHandler(func(w http.ResponseWriter, _ *http.Request, err error) {
			log = append(log, "error")
			w.WriteHeader(599)
		}),
		httplimit.WithDeniedHandler(func(w http.ResponseWriter, _ *http.Request, d limit.Decision) {
			if w.Header().Get("RateLimit") == "" || w.Header().Get("RateLimit-Policy") == "" || (w.Header().Get("Retry-After") == "") != d.Never {
				t.Errorf("denied handler ran before the fields were set: %v", w.Header())
			}
			log = append(log, "denied")
			w.WriteHeader(429)
		}),
	)
	admit := limit.Decision{Allowed: true, Limit: 1, Burst: 2, Remaining: 1, Policy: "p", NextAfter: time.Second}
	deny := limit.Decision{Limit: 1, Burst: 2, Policy: "p", RetryAfter: 1500 * time.Millisecond, NextAfter: time.Second}
	never := limit.Decision{Limit: 1, Burst: 2, Policy: "p", Never: true, RetryAfter: limit.InfDuration}
	for _, c := range []struct {
		name, path, key string
		d               limit.Decision
		err             error
		code            int
		want            string
		fields          bool
	}{
		{"skip", "/health", "a", admit, nil, 200, "skip next", false},
		{"key error", "/", "", admit, nil, 599, "skip key error", false},
		{"excluded", "/", "admin", deny, nil, 200, "skip key excluded next", false},
		{"admitted", "/", "a", admit, nil, 200, "skip key excluded cost limiter hook:a next", true},
		{"denied", "/", "a", deny, nil, 429, "skip key excluded cost limiter hook:a denied", true},
		{"never", "/", "a", never, nil, 429, "skip key excluded cost limiter hook:a denied", true},
		{"limiter error, no decision", "/", "a", limit.Decision{}, cause, 599, "skip key excluded cost limiter limerr:a error", false},
		{"limiter error, fallback admits", "/", "a", admit, cause, 200, "skip key excluded cost limiter limerr:a hook:a next", true},
		{"limiter error, fallback denies", "/", "a", deny, cause, 429, "skip key excluded cost limiter limerr:a hook:a denied", true},
		{"limiter error, fallback never", "/", "a", never, cause, 429, "skip key excluded cost limiter limerr:a hook:a denied", true},
	} {
		log, dec, lerr = nil, c.d, c.err
		w := httptest.NewRecorder()
		r := audit26Req("192.0.2.1:1")
		r.URL.Path = c.path
		if c.key != "" {
			r.Header.Set("K", c.key)
		}
		h.ServeHTTP(w, r)
		if got := strings.Join(log, " "); got != c.want || w.Code != c.code {
			t.Errorf("%s: %d %q; want %d %q", c.name, w.Code, got, c.code, c.want)
		}
		if has := w.Header().Get("RateLimit-Policy") != ""; has != c.fields {
			t.Errorf("%s: fields %v; want %v", c.name, w.Header(), c.fields)
		}
	}
}

// audit26ScriptLim answers *d, *err and logs its calls.
type audit26ScriptLim struct {
	d   *limit.Decision
	err *error
	log *[]string
}

func (l *audit26ScriptLim) DecideContext(context.Context, string, int) (limit.Decision, error) {
	*l.log = append(*l.log, "limiter")
	return *l.d, *l.err
}
func (l *audit26ScriptLim) Policies() []limit.Policy {
	return []limit.Policy{{Name: "p", Limit: 1, Burst: 2}}
}

// The default error handler: status by error kind, the status text only
// (never the error's own text, which may hold client input or internal
// addresses).
func TestAudit26DefaultErrorAnswers(t *testing.T) {
	for _, c := range []struct {
		err  error
		code int
	}{
		{httplimit.ErrNoClientIP, 500}, {httplimit.ErrNilRequest, 500}, {httplimit.ErrBadCost, 500},
		{httplimit.ErrForwardedFor, 400}, {httplimit.ErrNoHeader, 400}, {errors.New("custom <b>x</b>"), 400},
	} {
		wrapped := errors.Join(errors.New("SECRET 10.1.2.3"), c.err)
		h := httplimit.Wrap(&audit26CountLim{}, ok, httplimit.WithKey(func(*http.Request) (string, error) { return "", wrapped }))
		w := get(h, "192.0.2.1:1")
		if w.Code != c.code || w.Body.String() != http.StatusText(c.code)+"\n" {
			t.Errorf("%v: %d %q", c.err, w.Code, w.Body.String())
		}
	}
}

// Policy names are sf-strings with '"' and '\' escaped; New refuses
// names that cannot be one (empty, control characters, non-ASCII) with
// a ConfigError.
func TestAudit26PolicyNames(t *testing.T) {
	for _, name := range []string{`a"b`, `a\b`, ` spaced `, `;q=1`, `"`, `\`, `~!@#$%^&*()`} {
		m, err := httplimit.New(audit14Limiter{[]limit.Policy{{Name: name, Limit: 1, Burst: 3}}})
		if err != nil {
			t.Fatalf("%q: %v", name, err)
		}
		h := http.Header{}
		m.SetHeaders(h, limit.Decision{Allowed: true, Limit: 1, Burst: 3, Remaining: 2, Policy: name, NextAfter: time.Second})
		for _, f := range []string{"RateLimit-Policy", "RateLimit"} {
			got, _, ok := audit26Item(h.Get(f))
			if !ok || got != name {
				t.Errorf("%q: %s %q", name, f, h.Get(f))
			}
		}
	}
	for _, name := range []string{"", "tab\t", "nl\n", "é", "\x7f", "\x00"} {
		_, err := httplimit.New(audit14Limiter{[]limit.Policy{{Name: name, Limit: 1, Burst: 3}}})
		if !errors.Is(err, sketch.ErrInvalidConfig) {
			t.Errorf("%q: %v; want a ConfigError", name, err)
		}
	}
}

func audit26Multi(t *testing.T, ws ...*limit.Limiter) *limit.Multi {
	t.Helper()
	m, err := limit.NewMulti(ws...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// The walk over a Multi (10 per 5 s and 3 at 2/s, one fake clock): the
// RateLimit-Policy lists both windows; RateLimit names the Decision's
// window with r its Remaining, and on a retryable denial t is the
// RetryAfter rounded up (package doc); Retry-After is
// max(ceil(RetryAfter), 1) and no earlier than t, absent exactly when
// the cost exceeds the least burst; a retry after Retry-After seconds is
// admitted.
func TestAudit26MultiAnswers(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	mu := audit26Multi(t, limit.MustNew(2, 3, limit.WithName("sec"), limit.WithClock(clk)),
		limit.MustNew(2, 10, limit.WithName("5s"), limit.WithClock(clk)), // rate 2 burst 10
		limit.MustNew(0.1, 12, limit.WithName("min"), limit.WithClock(clk)))
	var last limit.Decision
	var cost atomic.Int64
	h := httplimit.Wrap(mu, ok, httplimit.WithCost(func(*http.Request) int { return int(cost.Load()) }),
		httplimit.WithHook(func(_ *http.Request, _ string, d limit.Decision) { last = d }))
	serve := func(n int) *httptest.ResponseRecorder {
		cost.Store(int64(n))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, audit26Req("192.0.2.1:1"))
		return w
	}
	rng := rand.New(rand.NewSource(26))
	var seen [3]int
	for i := 0; i < 400; i++ {
		n := 1
		if rng.Intn(4) == 0 {
			n = 1 + rng.Intn(4)
		}
		w := serve(n)
		d := last
		pol := strings.Split(w.Header().Get("RateLimit-Policy"), ", ")
		if len(pol) != 3 {
			t.Fatalf("RateLimit-Policy %q", w.Header().Get("RateLimit-Policy"))
		}
		for j, want := range []string{"sec", "5s", "min"} {
			if name, _, ok := audit26Item(pol[j]); !ok || name != want {
				t.Fatalf("RateLimit-Policy %q", w.Header().Get("RateLimit-Policy"))
			}
		}
		name, p, rok := audit26Item(w.Header().Get("RateLimit"))
		if !rok || name != d.Policy || p["r"] != int64(d.Remaining) {
			t.Fatalf("RateLimit %q for %+v", w.Header().Get("RateLimit"), d)
		}
		ra := w.Header().Get("Retry-After")
		switch {
		case d.Allowed:
			if tt, has := p["t"]; w.Code != 200 || ra != "" || has != (d.NextAfter > 0) || (has && tt != audit26Ceil(d.NextAfter)) {
				t.Fatalf("admitted: %d %q %q for %+v", w.Code, ra, w.Header().Get("RateLimit"), d)
			}
		case n > 3:
			if w.Code != 429 || ra != "" || !d.Never {
				t.Fatalf("cost %d: %d %q %+v", n, w.Code, ra, d)
			}
			seen[0]++
		default:
			secs, err := strconv.ParseInt(ra, 10, 64)
			if w.Code != 429 || err != nil || secs != max(audit26Ceil(d.RetryAfter), 1) || p["t"] != audit26Ceil(d.RetryAfter) || p["t"] > secs {
				t.Fatalf("denial of %d: %d Retry-After %q RateLimit %q for %+v", n, w.Code, ra, w.Header().Get("RateLimit"), d)
			}
			seen[1]++
			if rng.Intn(2) == 0 {
				clk.Advance(time.Duration(secs) * time.Second)
				if w := serve(n); w.Code != 200 {
					t.Fatalf("retry of %d at Retry-After %d s: %d (%+v)", n, secs, w.Code, last)
				}
				seen[2]++
			}
		}
		clk.Advance(time.Duration(rng.Intn(400)) * time.Millisecond)
	}
	if seen[0] == 0 || seen[1] == 0 || seen[2] == 0 {
		t.Fatalf("the walk missed a case: %v", seen)
	}
	t.Logf("never, denied, retried: %v", seen)
}

// SetBurst and SetLimit show in the next answer: q, w, and a cost above
// the new burst is 429 without Retry-After.
func TestAudit26RuntimePolicyChange(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	l := limit.MustNew(2, 6, limit.WithClock(clk), limit.WithName("api"))
	var cost atomic.Int64
	cost.Store(1)
	h := httplimit.Wrap(l, ok, httplimit.WithCost(func(*http.Request) int { return int(cost.Load()) }))
	if w := get(h, "192.0.2.1:1"); w.Header().Get("RateLimit-Policy") != `"api";q=6;w=3` {
		t.Fatalf("%q", w.Header().Get("RateLimit-Policy"))
	}
	if err := l.SetBurst(4); err != nil {
		t.Fatal(err)
	}
	if err := l.SetLimit(1); err != nil {
		t.Fatal(err)
	}
	cost.Store(5)
	w := get(h, "192.0.2.2:1")
	if w.Header().Get("RateLimit-Policy") != `"api";q=4;w=4` || w.Code != 429 || w.Header().Get("Retry-After") != "" {
		t.Fatalf("%d %q %q", w.Code, w.Header().Get("RateLimit-Policy"), w.Header().Get("Retry-After"))
	}
}

// The zero Middleware panics with the documented message; With on it is
// a ConfigError; With copies options without sharing the announced
// policy; WithDeniedHandler(nil) restores the default 429.
func TestAudit26ZeroAndWith(t *testing.T) {
	var z httplimit.Middleware
	for _, f := range []func(){
		func() { z.Handler(ok) },
		func() { z.Allow(httptest.NewRecorder(), audit26Req("192.0.2.1:1")) },
	} {
		func() {
			defer func() {
				if p := recover(); p != "httplimit: zero Middleware; use New" {
					t.Errorf("panic %v", p)
				}
			}()
			f()
		}()
	}
	if _, err := z.With(limit.MustNew(1, 1)); !errors.Is(err, sketch.ErrInvalidConfig) {
		t.Fatalf("With on zero: %v", err)
	}
	clk := sketchtest.NewFakeClock()
	a, err := httplimit.New(limit.MustNew(1, 1, limit.WithClock(clk), limit.WithName("a")), httplimit.WithProblemJSON(true),
		httplimit.WithDeniedHandler(func(w http.ResponseWriter, _ *http.Request, _ limit.Decision) { w.WriteHeader(418) }))
	if err != nil {
		t.Fatal(err)
	}
	b, err := a.With(limit.MustNew(1, 1, limit.WithClock(clk), limit.WithName("b")), httplimit.WithDeniedHandler(nil))
	if err != nil {
		t.Fatal(err)
	}
	ha, hb := a.Handler(ok), b.Handler(ok)
	get(ha, "192.0.2.1:1")
	get(hb, "192.0.2.1:1")
	wa, wb := get(ha, "192.0.2.1:1"), get(hb, "192.0.2.1:1")
	if wa.Code != 418 || wa.Header().Get("RateLimit-Policy") != `"a";q=1;w=1` {
		t.Fatalf("a: %d %q", wa.Code, wa.Header().Get("RateLimit-Policy"))
	}
	if wb.Code != 429 || wb.Header().Get("Content-Type") != "application/problem+json" || wb.Header().Get("RateLimit-Policy") != `"b";q=1;w=1` {
		t.Fatalf("b: %d %q %q", wb.Code, wb.Header().Get("Content-Type"), wb.Header().Get("RateLimit-Policy"))
	}
}

// Concurrent requests racing SetBurst: race-clean, and every announced
// policy is one the limiter had (never a torn value).
func TestAudit26ConcurrentPolicyChange(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	l := limit.MustNew(2, 6, limit.WithClock(clk), limit.WithName("api"))
	h := httplimit.Wrap(l, ok, httplimit.WithLegacyHeaders(true))
	done := make(chan struct{})
	stop := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			_ = l.SetBurst(4 + 2*(i%2))
		}
	}()
	errs := make(chan string, 8)
	var wg = make(chan struct{}, 8)
	for g := 0; g < 8; g++ {
		go func(g int) {
			defer func() { wg <- struct{}{} }()
			for i := 0; i < 100; i++ {
				w := get(h, "192.0.2."+strconv.Itoa(g)+":1")
				if v := w.Header().Get("RateLimit-Policy"); v != `"api";q=6;w=3` && v != `"api";q=4;w=2` {
					errs <- v
					return
				}
			}
		}(g)
	}
	for range 8 {
		<-wg
	}
	close(stop)
	<-done
	select {
	case v := <-errs:
		t.Fatalf("RateLimit-Policy %q", v)
	default:
	}
}
