package httplimit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// ---- an independent, strict RFC 9651 List parser (string/token items,
// integer/string/token parameters), for checking what the middleware writes.

type a57Item struct {
	name   string // the item's value (an sf-string's content, or a token)
	token  bool
	params map[string]string
	order  []string
}

func a57ParseList(s string) ([]a57Item, error) {
	i := 0
	sp := func() {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
	}
	isLC := func(c byte) bool { return c >= 'a' && c <= 'z' }
	isDigit := func(c byte) bool { return c >= '0' && c <= '9' }
	isTchar := func(c byte) bool {
		return c > 0x20 && c < 0x7f && !strings.ContainsRune("\"(),/:;<=>?@[\\]{}", rune(c)) || c == ':' || c == '/'
	}
	str := func() (string, error) {
		if s[i] != '"' {
			return "", fmt.Errorf("want '\"' at %d", i)
		}
		i++
		var b strings.Builder
		for i < len(s) {
			c := s[i]
			i++
			switch {
			case c == '\\':
				if i >= len(s) || (s[i] != '"' && s[i] != '\\') {
					return "", fmt.Errorf("bad escape at %d", i)
				}
				b.WriteByte(s[i])
				i++
			case c == '"':
				return b.String(), nil
			case c < 0x20 || c > 0x7e:
				return "", fmt.Errorf("bad char at %d", i-1)
			default:
				b.WriteByte(c)
			}
		}
		return "", fmt.Errorf("unterminated string")
	}
	tok := func() (string, error) {
		st := i
		if i >= len(s) || !(s[i] == '*' || (s[i]|0x20) >= 'a' && (s[i]|0x20) <= 'z') {
			return "", fmt.Errorf("bad token start at %d", i)
		}
		i++
		for i < len(s) && isTchar(s[i]) {
			i++
		}
		return s[st:i], nil
	}
	var out []a57Item
	sp()
	if i == len(s) {
		return nil, nil
	}
	for {
		var it a57Item
		var err error
		if i >= len(s) {
			return nil, fmt.Errorf("empty member")
		}
		if s[i] == '"' {
			it.name, err = str()
		} else {
			it.token = true
			it.name, err = tok()
		}
		if err != nil {
			return nil, err
		}
		it.params = map[string]string{}
		for i < len(s) && s[i] == ';' {
			i++
			for i < len(s) && s[i] == ' ' {
				i++
			}
			st := i
			if i >= len(s) || !(isLC(s[i]) || s[i] == '*') {
				return nil, fmt.Errorf("bad key at %d", i)
			}
			for i < len(s) && (isLC(s[i]) || isDigit(s[i]) || strings.IndexByte("_-.*", s[i]) >= 0) {
				i++
			}
			k := s[st:i]
			v := "?1"
			if i < len(s) && s[i] == '=' {
				i++
				switch {
				case i < len(s) && s[i] == '"':
					if v, err = str(); err != nil {
						return nil, err
					}
				case i < len(s) && (isDigit(s[i]) || s[i] == '-'):
					st := i
					i++
					for i < len(s) && isDigit(s[i]) {
						i++
					}
					v = s[st:i]
				default:
					if v, err = tok(); err != nil {
						return nil, err
					}
				}
			}
			if _, dup := it.params[k]; !dup {
				it.order = append(it.order, k)
			}
			it.params[k] = v
		}
		out = append(out, it)
		sp()
		if i == len(s) {
			return out, nil
		}
		if s[i] != ',' {
			return nil, fmt.Errorf("want ',' at %d in %q", i, s)
		}
		i++
		sp()
		if i == len(s) {
			return nil, fmt.Errorf("trailing comma")
		}
	}
}

func a57Field(t *testing.T, h http.Header, field string) []a57Item {
	t.Helper()
	vs := h.Values(field)
	if len(vs) > 1 {
		t.Fatalf("%s has %d lines %q; want one", field, len(vs), vs)
	}
	if len(vs) == 0 {
		return nil
	}
	items, err := a57ParseList(vs[0])
	if err != nil {
		t.Fatalf("%s %q is not a Structured Field List: %v", field, vs[0], err)
	}
	return items
}

func a57Int(t *testing.T, it a57Item, k string) (int64, bool) {
	t.Helper()
	v, ok := it.params[k]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("item %q: %s=%q not an integer", it.name, k, v)
	}
	return n, true
}

func a57Get(h http.Handler, remote string) *httptest.ResponseRecorder {
	return get(h, remote)
}

// checkAnswer checks the doc's promises that do not depend on stacking on
// one answer: both fields are Lists of sf-strings, every name at most
// once; each RateLimit item names a listed policy and r <= its q; a
// denial that can be retried has Retry-After >= 1.
func a57CheckAnswer(t *testing.T, i int, w *httptest.ResponseRecorder) (pol, rl []a57Item) {
	t.Helper()
	h := w.Header()
	pol = a57Field(t, h, "RateLimit-Policy")
	rl = a57Field(t, h, "RateLimit")
	q := map[string]int64{}
	for _, it := range pol {
		if it.token {
			t.Fatalf("answer %d: RateLimit-Policy item %q is a token, not an sf-string", i, it.name)
		}
		if _, dup := q[it.name]; dup {
			t.Fatalf("answer %d: RateLimit-Policy names %q twice: %q", i, it.name, h.Get("RateLimit-Policy"))
		}
		v, ok := a57Int(t, it, "q")
		if !ok {
			t.Fatalf("answer %d: policy %q has no q", i, it.name)
		}
		if _, ok := a57Int(t, it, "w"); !ok {
			t.Fatalf("answer %d: policy %q has no w", i, it.name)
		}
		q[it.name] = v
	}
	seen := map[string]bool{}
	for _, it := range rl {
		if seen[it.name] {
			t.Fatalf("answer %d: RateLimit names %q twice: %q", i, it.name, h.Get("RateLimit"))
		}
		seen[it.name] = true
		qq, ok := q[it.name]
		if !ok {
			t.Fatalf("answer %d: RateLimit item %q names no listed policy (RateLimit-Policy %q)", i, it.name, h.Get("RateLimit-Policy"))
		}
		r, ok := a57Int(t, it, "r")
		if !ok || r < 0 || r > qq {
			t.Fatalf("answer %d: RateLimit %q: r=%d of q=%d", i, h.Get("RateLimit"), r, qq)
		}
	}
	return pol, rl
}

func a57Names(items []a57Item) []string {
	var out []string
	for _, it := range items {
		out = append(out, it.name)
	}
	return out
}

// ---- findings

// The package doc: "on a denial Retry-After takes precedence and is never
// earlier than t" (doc.go, Answers), and SetHeaders: Retry-After is "never
// earlier than the RateLimit field's t". Stacked, the outer middleware's
// item (r=0;t=30: its bucket is empty for 30 s) is listed beside the inner
// one's denial, whose Retry-After is 1: a client that retries after 1 s,
// as told, is denied again by the outer limiter.
func TestAudit57FixedStackedRetryAfterEarlierThanOuterT(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	outer, err := httplimit.New(limit.MustNew(limit.Every(30*time.Second), 2, limit.WithName("outer"), limit.WithClock(clk)))
	if err != nil {
		t.Fatal(err)
	}
	inner, err := outer.With(limit.MustNew(1, 1, limit.WithName("inner"), limit.WithClock(clk)))
	if err != nil {
		t.Fatal(err)
	}
	h := outer.Handler(inner.Handler(ok))
	const remote = "192.0.2.57:1"
	if w := a57Get(h, remote); w.Code != 200 {
		t.Fatalf("first request: %d", w.Code)
	}
	w := a57Get(h, remote)
	_, rl := a57CheckAnswer(t, 2, w)
	if w.Code != 429 {
		t.Fatalf("second request: %d, want 429 by the inner limiter", w.Code)
	}
	ra, err := strconv.ParseInt(w.Header().Get("Retry-After"), 10, 64)
	if err != nil {
		t.Fatalf("Retry-After %q", w.Header().Get("Retry-After"))
	}
	var maxT int64
	for _, it := range rl {
		if tt, ok := a57Int(t, it, "t"); ok {
			maxT = max(maxT, tt)
		}
	}
	clk.Advance(time.Duration(ra) * time.Second)
	retry := a57Get(h, remote)
	if ra < maxT {
		t.Errorf("a denial's Retry-After %d is earlier than a listed t=%d (RateLimit %q); doc.go: \"on a denial Retry-After takes precedence and is never earlier than t\"; the retry %d s later, as told, got %d (RateLimit %q, Retry-After %q)",
			ra, maxT, w.Header().Get("RateLimit"), ra, retry.Code, retry.Header().Get("RateLimit"), retry.Header().Get("Retry-After"))
	}
}

// SetHeaders: "Retry-After the later time" (and doc.go: "Retry-After the
// latest"). A Retry-After already set as an HTTP-date (RFC 9110 §10.2.3
// allows either form) in 2099 is replaced by this denial's "2": an
// earlier time.
func TestAudit57FixedRetryAfterHTTPDateReplacedByEarlier(t *testing.T) {
	m, err := httplimit.New(limit.MustNew(1, 1, limit.WithName("mine")))
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	date := time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC).Format(http.TimeFormat)
	h.Set("Retry-After", date)
	m.SetHeaders(h, limit.Decision{Limit: 1, Burst: 1, Policy: "mine", NextAfter: time.Second, RetryAfter: 2 * time.Second, ResetAfter: 2 * time.Second})
	if got := h.Get("Retry-After"); got != date {
		t.Errorf("Retry-After %q (2 s from now) replaced the HTTP-date %q; want the later time kept (middleware.go, SetHeaders: \"Retry-After the later time\")", got, date)
	}
}

// ---- checks that hold

// Policy names made of the characters that matter to the List syntax
// (commas, quotes, backslashes, semicolons, '=', spaces), names that are
// prefixes of each other, names shared by the outer and the inner
// middleware, Multis on both sides: every answer is a valid List, the
// inner middleware's names are listed once each (after the outer's that
// it does not replace), every outer name it does not share is kept.
func TestAudit57StackedNamesRoundTrip(t *testing.T) {
	testsize.Serial(t)
	rng := rand.New(rand.NewPCG(57, 57))
	alphabet := []string{"a", "b", ",", ";", `"`, `\`, "=", " ", "ab", `\"`}
	name := func() string {
		var b strings.Builder
		for range 1 + rng.IntN(4) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
	distinct := func(n int, pool []string) []string {
		var out []string
		for len(out) < n {
			var s string
			if len(pool) > 0 && rng.IntN(3) == 0 {
				s = pool[rng.IntN(len(pool))]
			} else {
				s = name()
			}
			if !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
		return out
	}
	build := func(clk *sketchtest.FakeClock, names []string) httplimit.Limiter {
		var ls []*limit.Limiter
		for i, n := range names {
			ls = append(ls, limit.MustNew(limit.Limit(1+i), 2+i, limit.WithName(n), limit.WithClock(clk)))
		}
		if len(ls) == 1 && rng.IntN(2) == 0 {
			return ls[0]
		}
		m, err := limit.NewMulti(ls...)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	for trial := range 300 {
		clk := sketchtest.NewFakeClock()
		on := distinct(1+rng.IntN(3), nil)
		in := distinct(1+rng.IntN(3), on)
		outer, err := httplimit.New(build(clk, on), httplimit.WithProblemJSON(rng.IntN(2) == 0))
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		inner, err := outer.With(build(clk, in))
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		h := outer.Handler(inner.Handler(ok))
		var want []string
		for _, n := range on {
			if !slices.Contains(in, n) {
				want = append(want, n)
			}
		}
		want = append(want, in...)
		for i := range 6 {
			w := a57Get(h, "192.0.2.9:1")
			pol, rl := a57CheckAnswer(t, i, w)
			got := a57Names(pol)
			if w.Code == 429 && slices.Equal(got, on) {
				continue // the outer one denied: the inner never ran
			}
			if !slices.Equal(got, want) {
				t.Fatalf("trial %d answer %d (outer %q, inner %q): RateLimit-Policy names %q, want %q (field %q)", trial, i, on, in, got, want, w.Header().Get("RateLimit-Policy"))
			}
			if w.Code == 200 || w.Code == 429 && len(rl) > 0 {
				last := rl[len(rl)-1]
				if !slices.Contains(in, last.name) && w.Code == 200 {
					t.Fatalf("trial %d answer %d: the last RateLimit item %q is not the inner's (%q)", trial, i, last.name, in)
				}
			}
			if w.Code == 429 && w.Header().Get("Content-Type") == "application/problem+json" {
				var p httplimit.Problem
				if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || len(p.ViolatedPolicies) != 1 {
					t.Fatalf("trial %d: problem %q: %v", trial, w.Body.String(), err)
				}
				if got := a57Names(rl); !slices.Contains(got, p.ViolatedPolicies[0]) {
					t.Fatalf("trial %d: violated policy %q not among RateLimit's %q", trial, p.ViolatedPolicies[0], got)
				}
			}
		}
	}
}

// The gin/echo form: Allow called twice on the same writer, by the outer
// and the inner middleware and then the inner again, lists each policy
// once; the fields stay one line each.
func TestAudit57AllowTwiceReplacesOwn(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	outer, err := httplimit.New(limit.MustNew(100, 100, limit.WithName("global"), limit.WithClock(clk)), httplimit.WithLegacyHeaders(true))
	if err != nil {
		t.Fatal(err)
	}
	inner, err := outer.With(limit.MustNew(10, 5, limit.WithName("route"), limit.WithClock(clk)))
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "192.0.2.10:1"
	for i, m := range []*httplimit.Middleware{outer, inner, inner, outer, inner} {
		if !m.Allow(w, r) {
			t.Fatalf("call %d denied", i)
		}
		a57CheckAnswer(t, i, w)
	}
	if got, want := w.Header().Get("RateLimit-Policy"), `"global";q=100;w=1, "route";q=5;w=1`; got != want {
		t.Errorf("RateLimit-Policy %q, want %q", got, want)
	}
	if got, want := w.Header().Get("RateLimit"), `"global";r=98;t=1, "route";r=2;t=1`; got != want {
		t.Errorf("RateLimit %q, want %q", got, want)
	}
	if got := w.Header().Get("X-RateLimit-Remaining"); got != "2" {
		t.Errorf("X-RateLimit-Remaining %q, want 2 (the least)", got)
	}
}

// Legacy fields set by only one of two stacked middlewares are that one's.
func TestAudit57LegacyOnlyOneStacked(t *testing.T) {
	for _, outerLegacy := range []bool{true, false} {
		clk := sketchtest.NewFakeClock()
		outer, err := httplimit.New(limit.MustNew(1, 3, limit.WithName("global"), limit.WithClock(clk)), httplimit.WithLegacyHeaders(outerLegacy))
		if err != nil {
			t.Fatal(err)
		}
		inner, err := outer.With(limit.MustNew(1, 10, limit.WithName("route"), limit.WithClock(clk)), httplimit.WithLegacyHeaders(!outerLegacy))
		if err != nil {
			t.Fatal(err)
		}
		w := a57Get(outer.Handler(inner.Handler(ok)), "192.0.2.11:1")
		lim, rem := "10", "9"
		if outerLegacy {
			lim, rem = "3", "2"
		}
		if w.Header().Get("X-RateLimit-Limit") != lim || w.Header().Get("X-RateLimit-Remaining") != rem || w.Header().Get("X-RateLimit-Reset") != "1" {
			t.Errorf("outer legacy %v: X-RateLimit %q/%q/%q, want %s/%s/1", outerLegacy, w.Header().Get("X-RateLimit-Limit"),
				w.Header().Get("X-RateLimit-Remaining"), w.Header().Get("X-RateLimit-Reset"), lim, rem)
		}
	}
}

// An inner Never (cost above its burst): 429 without Retry-After, the
// body says not to retry (problem+json without retryAfter), the outer's
// items kept; an inner WithDeniedHandler sees both middlewares' fields.
func TestAudit57StackedNeverAndDeniedHandler(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	outer, err := httplimit.New(limit.MustNew(100, 100, limit.WithName("global"), limit.WithClock(clk)), httplimit.WithProblemJSON(true))
	if err != nil {
		t.Fatal(err)
	}
	inner, err := outer.With(limit.MustNew(1, 2, limit.WithName("route"), limit.WithClock(clk)),
		httplimit.WithCost(func(r *http.Request) int { n, _ := strconv.Atoi(r.Header.Get("N")); return max(n, 1) }))
	if err != nil {
		t.Fatal(err)
	}
	h := outer.Handler(inner.Handler(ok))
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "192.0.2.12:1"
	r.Header.Set("N", "3")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	_, rl := a57CheckAnswer(t, 0, w)
	if w.Code != 429 || w.Header().Get("Retry-After") != "" {
		t.Fatalf("Never: %d Retry-After %q", w.Code, w.Header().Get("Retry-After"))
	}
	var p httplimit.Problem
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || p.RetryAfter != nil || !slices.Equal(p.ViolatedPolicies, []string{"route"}) {
		t.Fatalf("problem %+v, %v", p, err)
	}
	if got := a57Names(rl); !slices.Equal(got, []string{"global", "route"}) {
		t.Fatalf("RateLimit names %q", got)
	}

	var seen http.Header
	inner2, err := outer.With(limit.MustNew(1, 1, limit.WithName("route"), limit.WithClock(clk)),
		httplimit.WithDeniedHandler(func(w http.ResponseWriter, _ *http.Request, d limit.Decision) {
			seen = w.Header().Clone()
			w.WriteHeader(http.StatusServiceUnavailable)
		}))
	if err != nil {
		t.Fatal(err)
	}
	h2 := outer.Handler(inner2.Handler(ok))
	a57Get(h2, "192.0.2.13:1")
	w = a57Get(h2, "192.0.2.13:1")
	if w.Code != 503 || seen == nil {
		t.Fatalf("denied handler: %d, seen %v", w.Code, seen)
	}
	if got := seen.Get("RateLimit"); got != `"global";r=98;t=1, "route";r=0;t=1` || seen.Get("Retry-After") != "1" ||
		seen.Get("RateLimit-Policy") != `"global";q=100;w=1, "route";q=1;w=1` {
		t.Errorf("the denied handler saw RateLimit %q, RateLimit-Policy %q, Retry-After %q", got, seen.Get("RateLimit-Policy"), seen.Get("Retry-After"))
	}
}

// An inner Multi's denial, stacked under a global limit: its items carry
// the named window (t = its RetryAfter), Retry-After is never earlier
// than the inner item's t, and r never above any item's q.
func TestAudit57StackedInnerMultiDenial(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	outer, err := httplimit.New(limit.MustNew(1000, 1000, limit.WithName("global"), limit.WithClock(clk)))
	if err != nil {
		t.Fatal(err)
	}
	sec := limit.MustNew(2, 2, limit.WithName("sec"), limit.WithClock(clk))
	hour := limit.MustNew(limit.Every(time.Minute), 3, limit.WithName("min"), limit.WithClock(clk))
	multi, err := limit.NewMulti(sec, hour)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := outer.With(multi)
	if err != nil {
		t.Fatal(err)
	}
	h := outer.Handler(inner.Handler(ok))
	denials := 0
	for i := range 40 {
		w := a57Get(h, "192.0.2.14:1")
		_, rl := a57CheckAnswer(t, i, w)
		if w.Code == 429 {
			denials++
			ra, err := strconv.ParseInt(w.Header().Get("Retry-After"), 10, 64)
			if err != nil {
				t.Fatalf("Retry-After %q", w.Header().Get("Retry-After"))
			}
			last := rl[len(rl)-1]
			if tt, _ := a57Int(t, last, "t"); ra < tt {
				t.Fatalf("answer %d: Retry-After %d < the inner item's t=%d (%q)", i, ra, tt, w.Header().Get("RateLimit"))
			}
		}
		clk.Advance(300 * time.Millisecond)
	}
	if denials == 0 {
		t.Fatal("no denial")
	}
}

// Our own parser agrees with the fields the middleware writes for names
// that need escaping (sanity check of the checker).
func TestAudit57ParserSanity(t *testing.T) {
	items, err := a57ParseList(`"a,b;c";r=1, tok;r=2, "q\"m\\";r=3;t=4`)
	if err != nil || len(items) != 3 || items[0].name != "a,b;c" || !items[1].token || items[2].name != `q"m\` || items[2].params["t"] != "4" {
		t.Fatalf("%+v %v", items, err)
	}
	for _, bad := range []string{`"a`, `"a",`, `"a";R=1`, `"a" "b"`, `"\a"`} {
		if _, err := a57ParseList(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// docs/migrating.md (f432fd7's row): "a field whose sf-strings do not
// close is replaced"; addItem (fields.go): "The field's lines are taken as
// one List (RFC 9110 §5.3)". A RateLimit field of two lines `"a` and
// `b";r=1` is, as one List (RFC 9651 §4.2 joins the lines with ", "), the
// valid member `"a, b";r=1`: its sf-string closes. SetHeaders still drops
// it, because it checks each line on its own.
func TestAudit57FixedSplitLinesTakenAsOneList(t *testing.T) {
	m, err := httplimit.New(limit.MustNew(1, 3, limit.WithName("mine")))
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Add("RateLimit", `"a`)
	h.Add("RateLimit", `b";r=1`)
	joined := strings.Join(h.Values("RateLimit"), ", ")
	if items, err := a57ParseList(joined); err != nil || len(items) != 1 || items[0].name != "a, b" {
		t.Fatalf("the joined field %q: %+v %v", joined, items, err)
	}
	m.SetHeaders(h, limit.Decision{Allowed: true, Limit: 1, Burst: 3, Remaining: 2, Policy: "mine", NextAfter: time.Second})
	want := `"a, b";r=1, "mine";r=2;t=1`
	if got := h.Values("RateLimit"); len(got) != 1 || got[0] != want {
		t.Errorf("RateLimit %q, want %q: the field's lines as one List hold a closed sf-string, yet the member was dropped", got, want)
	}
}

// WithSkip and WithExcludedKey on the inner middleware: the outer one's
// fields stay, the inner adds none and debits nothing; on the outer one:
// neither sets anything, the inner one's fields alone.
func TestAudit57StackedSkipAndExclude(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	innerL := limit.MustNew(1, 1, limit.WithName("route"), limit.WithClock(clk))
	outer, err := httplimit.New(limit.MustNew(100, 100, limit.WithName("global"), limit.WithClock(clk)),
		httplimit.WithExcludedKey(func(k string) bool { return k == "192.0.2.20/32" }))
	if err != nil {
		t.Fatal(err)
	}
	inner, err := outer.With(innerL,
		httplimit.WithExcludedKey(func(k string) bool { return k == "192.0.2.21/32" }),
		httplimit.WithSkip(func(r *http.Request) bool { return r.URL.Path == "/skip" }))
	if err != nil {
		t.Fatal(err)
	}
	h := outer.Handler(inner.Handler(ok))
	for range 3 {
		w := a57Get(h, "192.0.2.21:1")
		if w.Code != 200 || w.Header().Get("RateLimit-Policy") != `"global";q=100;w=1` || !strings.HasPrefix(w.Header().Get("RateLimit"), `"global";`) || strings.Contains(w.Header().Get("RateLimit"), "route") {
			t.Fatalf("inner-excluded: %d %v", w.Code, w.Header())
		}
	}
	for range 3 {
		w := a57Get(h, "192.0.2.20:1")
		if w.Code != 200 || w.Header().Get("RateLimit-Policy") != `"route";q=1;w=1` {
			t.Fatalf("outer-excluded: %d %v", w.Code, w.Header())
		}
		clk.Advance(time.Second)
	}
	for range 3 {
		r := httptest.NewRequest("GET", "/skip", nil)
		r.RemoteAddr = "192.0.2.22:1"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != 200 || strings.Contains(w.Header().Get("RateLimit"), "route") {
			t.Fatalf("inner-skipped: %d %v", w.Code, w.Header())
		}
	}
	fresh := innerL.Peek("198.51.100.250/32")
	if d := innerL.Peek("192.0.2.21/32"); d != fresh {
		t.Fatalf("the excluded key was debited: %+v", d)
	}
	if d := innerL.Peek("192.0.2.22/32"); d != fresh {
		t.Fatalf("the skipped request was debited: %+v", d)
	}
}

// RemoteIP's folding and proxies, as its doc says.
func TestAudit57RemoteIPTable(t *testing.T) {
	for _, c := range []struct {
		key    httplimit.KeyFunc
		remote string
		xff    []string
		want   string
		err    error
	}{
		{httplimit.RemoteIP(), "[2001:db8:1:2:3:4:5:6]:80", nil, "2001:db8:1:2::/64", nil},
		{httplimit.RemoteIP(), "[fe80::1%eth0]:80", nil, "fe80::/64", nil},
		{httplimit.RemoteIP(), "[::ffff:192.0.2.7]:80", nil, "192.0.2.7/32", nil},
		{httplimit.RemoteIP(httplimit.WithIPv4Prefix(24)), "192.0.2.7:80", nil, "192.0.2.0/24", nil},
		{httplimit.RemoteIP(httplimit.WithIPv6Prefix(128)), "[2001:db8::1]:80", nil, "2001:db8::1/128", nil},
		{httplimit.RemoteIP(), "192.0.2.7:80", []string{"198.51.100.1"}, "192.0.2.7/32", nil},
		{httplimit.RemoteIP(httplimit.WithTrustedProxies(1)), "192.0.2.7:80", []string{"203.0.113.9, 198.51.100.1"}, "198.51.100.1/32", nil},
		{httplimit.RemoteIP(httplimit.WithTrustedProxies(2)), "192.0.2.7:80", []string{"203.0.113.9", "198.51.100.1"}, "203.0.113.9/32", nil},
		{httplimit.RemoteIP(httplimit.WithTrustedProxies(1)), "192.0.2.7:80", []string{"[2001:db8::5]:443"}, "2001:db8::/64", nil},
		{httplimit.RemoteIP(httplimit.WithTrustedProxies(2)), "192.0.2.7:80", []string{"198.51.100.1"}, "", httplimit.ErrForwardedFor},
		{httplimit.RemoteIP(httplimit.WithTrustedProxies(1)), "192.0.2.7:80", []string{"unknown"}, "", httplimit.ErrForwardedFor},
		{httplimit.RemoteIP(), "@", nil, "", httplimit.ErrNoClientIP},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = c.remote
		for _, v := range c.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		got, err := c.key(r)
		if c.err != nil {
			if !errors.Is(err, c.err) {
				t.Errorf("%s %q: %q, %v; want %v", c.remote, c.xff, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s %q: %q, %v; want %q", c.remote, c.xff, got, err, c.want)
		}
	}
}

// a57ErrLimiter fails with no decision.
type a57ErrLimiter struct{}

func (a57ErrLimiter) DecideContext(context.Context, string, int) (limit.Decision, error) {
	return limit.Decision{}, errors.New("secret: store down at 10.0.0.1")
}
func (a57ErrLimiter) Policies() []limit.Policy {
	return []limit.Policy{{Name: "remote", Limit: 1, Burst: 1}}
}

// The default error handler's statuses (WithErrorHandler's doc), status
// text only, also as the inner middleware of a stack (the outer one's
// fields stay; the inner one adds none).
func TestAudit57ErrorStatuses(t *testing.T) {
	outer, err := httplimit.New(limit.MustNew(100, 100, limit.WithName("global")), httplimit.WithKey(httplimit.Func(func(*http.Request) string { return "k" })))
	if err != nil {
		t.Fatal(err)
	}
	mk := func(l httplimit.Limiter, opts ...httplimit.Option) *httplimit.Middleware {
		m, err := outer.With(l, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	l := limit.MustNew(1, 1, limit.WithName("route"))
	for _, c := range []struct {
		name   string
		m      *httplimit.Middleware
		remote string
		xff    string
		code   int
	}{
		{"no client IP", mk(l, httplimit.WithKey(httplimit.RemoteIP())), "@", "", 500},
		{"bad X-Forwarded-For", mk(l, httplimit.WithKey(httplimit.RemoteIP(httplimit.WithTrustedProxies(2)))), "192.0.2.1:1", "198.51.100.1", 400},
		{"no header", mk(l, httplimit.WithKey(httplimit.Header("X-Key"))), "192.0.2.1:1", "", 400},
		{"bad cost", mk(l, httplimit.WithCost(func(*http.Request) int { return 0 })), "192.0.2.1:1", "", 500},
		{"limiter down", mk(a57ErrLimiter{}), "192.0.2.1:1", "", 503},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = c.remote
		if c.xff != "" {
			r.Header.Set("X-Forwarded-For", c.xff)
		}
		w := httptest.NewRecorder()
		outer.Handler(c.m.Handler(ok)).ServeHTTP(w, r)
		if w.Code != c.code || strings.TrimSpace(w.Body.String()) != http.StatusText(c.code) {
			t.Errorf("%s: %d %q, want %d with the status text", c.name, w.Code, w.Body.String(), c.code)
		}
		if w.Header().Get("RateLimit-Policy") != `"global";q=100;w=1` || strings.Contains(w.Header().Get("RateLimit"), "route") {
			t.Errorf("%s: fields %v", c.name, w.Header())
		}
	}
	// A nil request through Allow: 500.
	m := mk(l, httplimit.WithKey(httplimit.RemoteIP()))
	w := httptest.NewRecorder()
	if m.Allow(w, nil) || w.Code != 500 {
		t.Errorf("nil request: %d", w.Code)
	}
}

// a57SFString serializes s as an sf-string (the test's own).
func a57SFString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// SetHeaders over foreign members (sf-strings and tokens whose names and
// string parameters hold commas, semicolons, quotes and backslashes,
// spread over several lines), by several middlewares in random order and
// repeatedly: the field stays one valid List, the foreign members that
// name none of the middlewares' policies keep their text and order, and
// every middleware's named policy is listed once, with its latest r.
func TestAudit57SetHeadersForeignMembersFuzz(t *testing.T) {
	testsize.Serial(t)
	rng := rand.New(rand.NewPCG(5757, 1))
	alphabet := []string{"a", "b", ",", ";", `"`, `\`, "=", " ", "(", ")", "x;r=1", `", "`}
	str := func() string {
		var b strings.Builder
		for range 1 + rng.IntN(4) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
	for trial := range 400 {
		// The middlewares: 1 to 3, distinct names across them.
		var ms []*httplimit.Middleware
		var names []string
		for range 1 + rng.IntN(3) {
			n := str()
			for slices.Contains(names, n) {
				n = str()
			}
			names = append(names, n)
			m, err := httplimit.New(limit.MustNew(1, 5, limit.WithName(n)))
			if err != nil {
				t.Fatal(err)
			}
			ms = append(ms, m)
		}
		// Foreign members.
		var foreign []string
		var foreignNames []string
		for range rng.IntN(5) {
			var it, nm string
			if rng.IntN(3) == 0 {
				nm = []string{"tok", "a", "b*", "x:y/z"}[rng.IntN(4)]
				it = nm
			} else {
				nm = str()
				if rng.IntN(4) == 0 {
					nm = names[rng.IntN(len(names))] // names one of ours: to be replaced
				}
				it = a57SFString(nm)
			}
			if rng.IntN(2) == 0 {
				it += ";r=" + strconv.Itoa(rng.IntN(9))
			}
			if rng.IntN(2) == 0 {
				it += ";p=" + a57SFString(str())
			}
			foreign = append(foreign, it)
			foreignNames = append(foreignNames, nm)
		}
		h := http.Header{}
		// Spread the foreign members over lines.
		var line []string
		for i, it := range foreign {
			line = append(line, it)
			if rng.IntN(2) == 0 || i == len(foreign)-1 {
				sep := []string{", ", ",", " ,\t"}[rng.IntN(3)]
				h.Add("RateLimit", strings.Join(line, sep))
				line = nil
			}
		}
		last := map[string]int{}
		var order []string
		for range 1 + rng.IntN(5) {
			i := rng.IntN(len(ms))
			r := rng.IntN(5)
			ms[i].SetHeaders(h, limit.Decision{Allowed: true, Limit: 1, Burst: 5, Remaining: r, Policy: names[i], NextAfter: time.Second})
			last[names[i]] = r
			order = slices.DeleteFunc(order, func(s string) bool { return s == names[i] })
			order = append(order, names[i])
		}
		var wantForeign []string
		for i, it := range foreign {
			if !strings.HasPrefix(it, `"`) || !slices.Contains(order, foreignNames[i]) {
				wantForeign = append(wantForeign, it)
			}
		}
		vs := h.Values("RateLimit")
		if len(vs) != 1 {
			t.Fatalf("trial %d: %d lines %q", trial, len(vs), vs)
		}
		items, err := a57ParseList(vs[0])
		if err != nil {
			t.Fatalf("trial %d: %q: %v", trial, vs[0], err)
		}
		members, want := len(items), len(wantForeign)+len(order)
		if members != want {
			t.Fatalf("trial %d: %d members in %q, want %d (foreign %q, ours %q)", trial, members, vs[0], want, wantForeign, order)
		}
		if got, want := vs[0], strings.Join(wantForeign, ", "); !strings.HasPrefix(got, want) {
			t.Fatalf("trial %d: %q does not start with the foreign members %q", trial, got, want)
		}
		for j, n := range order {
			it := items[len(wantForeign)+j]
			if it.token || it.name != n || it.params["r"] != strconv.Itoa(last[n]) {
				t.Fatalf("trial %d: member %d %+v, want %q;r=%d (field %q)", trial, len(wantForeign)+j, it, n, last[n], vs[0])
			}
		}
	}
}
