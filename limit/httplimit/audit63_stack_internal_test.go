package httplimit

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

var a63OK = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) })

func a63Get(h http.Handler, remote string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = remote
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// a63Stack is middlewares stacked outermost first, each recording the
// decision it made for the current request.
type a63Stack struct {
	ms    []*Middleware
	seen  []*limit.Decision
	names []string
	h     http.Handler
}

func (s *a63Stack) reset() {
	for i := range s.seen {
		s.seen[i] = nil
	}
}

func a63Build(t *testing.T, ls []Limiter, names []string, opts ...Option) *a63Stack {
	t.Helper()
	s := &a63Stack{seen: make([]*limit.Decision, len(ls)), names: names}
	for i, l := range ls {
		i := i
		hook := WithHook(func(_ *http.Request, _ string, d limit.Decision) { s.seen[i] = &d })
		var m *Middleware
		var err error
		if i == 0 {
			m, err = New(l, append(opts, hook)...)
		} else {
			m, err = s.ms[0].With(l, hook)
		}
		if err != nil {
			t.Fatal(err)
		}
		s.ms = append(s.ms, m)
	}
	s.h = a63OK
	for i := len(s.ms) - 1; i >= 0; i-- {
		s.h = s.ms[i].Handler(s.h)
	}
	return s
}

// a63CheckAnswer checks one answer of a stack against the docs: both
// fields one valid List; each middleware that decided listed; the legacy
// Remaining the least of the decisions; on a denial Retry-After not
// earlier than the denying decision's RetryAfter nor any r=0 member's t.
// It returns the Retry-After in seconds (0 if none).
func a63CheckAnswer(s *a63Stack, w *httptest.ResponseRecorder) (int64, error) {
	h := w.Header()
	for _, f := range []string{"RateLimit-Policy", "RateLimit"} {
		if vs := h.Values(f); len(vs) != 1 {
			return 0, fmt.Errorf("%s: %d lines %q", f, len(vs), vs)
		}
		if _, err := a63ParseList(h.Get(f)); err != nil {
			return 0, fmt.Errorf("%s %q: %v", f, h.Get(f), err)
		}
	}
	rl, _ := a63ParseList(h.Get("RateLimit"))
	least, denied := -1, (*limit.Decision)(nil)
	for i, d := range s.seen {
		if d == nil {
			continue
		}
		if least < 0 || d.Remaining < least {
			least = d.Remaining
		}
		if !d.Allowed {
			denied = d
		}
		found := false
		for _, m := range rl {
			found = found || m.bare.kind == "str" && m.bare.s == d.Policy
		}
		if !found {
			return 0, fmt.Errorf("middleware %d's policy %q not in RateLimit %q", i, d.Policy, h.Get("RateLimit"))
		}
	}
	if got := h.Get("X-RateLimit-Remaining"); got != strconv.Itoa(least) {
		return 0, fmt.Errorf("X-RateLimit-Remaining %q, want the least Remaining %d", got, least)
	}
	if denied == nil {
		if w.Code != 200 {
			return 0, fmt.Errorf("status %d with no denial", w.Code)
		}
		return 0, nil
	}
	if denied.Never {
		if h.Get("Retry-After") != "" {
			return 0, fmt.Errorf("Never with Retry-After %q", h.Get("Retry-After"))
		}
		return 0, nil
	}
	ra, err := strconv.ParseInt(h.Get("Retry-After"), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("Retry-After %q", h.Get("Retry-After"))
	}
	if ra < max(ceilSeconds(denied.RetryAfter), 1) || ra < a63ExhaustedT(rl) {
		return 0, fmt.Errorf("Retry-After %d: the denial's RetryAfter %v, RateLimit %q", ra, denied.RetryAfter, h.Get("RateLimit"))
	}
	return ra, nil
}

// Three middlewares stacked (a global limit, a Multi, a per-route limit
// or Multi), on a fake clock, random pacing: every answer lists each
// policy that decided it, the legacy Remaining is the least, and a
// denied client that retries at the announced second (Retry-After) is
// admitted by every stacked limiter that decided the denial (an inner
// one the denial never reached may deny it: the answer does not list it).
func TestAudit63ThreeStackedRetryAtAnnouncedSecond(t *testing.T) {
	testsize.Serial(t)
	for seed := range uint64(12) {
		rng := rand.New(rand.NewPCG(seed, 63))
		clk := sketchtest.NewFakeClock()
		w := limit.WithClock(clk)
		outer := limit.MustNew(limit.Every(time.Duration(1+rng.IntN(20))*time.Second), 1+rng.IntN(4), limit.WithName("global"), w)
		mid, err := limit.NewMulti(
			limit.MustNew(limit.Limit(1+rng.IntN(3)), 1+rng.IntN(3), limit.WithName("sec"), w),
			limit.MustNew(limit.Every(time.Duration(5+rng.IntN(30))*time.Second), 2+rng.IntN(6), limit.WithName("slow"), w),
		)
		if err != nil {
			t.Fatal(err)
		}
		var inner Limiter = limit.MustNew(limit.Every(time.Duration(200+rng.IntN(3000))*time.Millisecond), 1+rng.IntN(3), limit.WithName("route"), w)
		if seed%2 == 1 {
			inner, err = limit.NewMulti(
				limit.MustNew(limit.Every(time.Duration(200+rng.IntN(3000))*time.Millisecond), 1+rng.IntN(3), limit.WithName("route"), w),
				limit.MustNew(limit.Every(time.Duration(10+rng.IntN(60))*time.Second), 3+rng.IntN(5), limit.WithName("route-min"), w),
			)
			if err != nil {
				t.Fatal(err)
			}
		}
		s := a63Build(t, []Limiter{outer, mid, inner}, nil, WithLegacyHeaders(true))
		remote := fmt.Sprintf("192.0.2.%d:1", 1+seed)
		denials, admitted, by := 0, 0, make([]int, 3)
		for i := range 300 {
			s.reset()
			resp := a63Get(s.h, remote)
			ra, err := a63CheckAnswer(s, resp)
			if err != nil {
				t.Fatalf("seed %d request %d: %v", seed, i, err)
			}
			for j, d := range s.seen {
				if d != nil && !d.Allowed {
					by[j]++
				}
			}
			if resp.Code == 429 {
				denials++
				var decided []int
				for j, d := range s.seen {
					if d != nil {
						decided = append(decided, j)
					}
				}
				clk.Advance(time.Duration(ra) * time.Second)
				s.reset()
				retry := a63Get(s.h, remote)
				if retry.Code == 200 {
					admitted++
				}
				for _, j := range decided {
					if d := s.seen[j]; d == nil || !d.Allowed {
						t.Fatalf("seed %d request %d: denied with Retry-After %d (RateLimit %q); the retry %d s later denied by middleware %d, which decided (and is listed in) the denial: %d, RateLimit %q, Retry-After %q; doc.go: \"a retry at that second is not denied again by a policy the answer lists as empty\"",
							seed, i, ra, resp.Header().Get("RateLimit"), ra, j, retry.Code, retry.Header().Get("RateLimit"), retry.Header().Get("Retry-After"))
					}
				}
				if _, err := a63CheckAnswer(s, retry); err != nil {
					t.Fatalf("seed %d retry %d: %v", seed, i, err)
				}
			}
			switch rng.IntN(3) {
			case 1:
				clk.Advance(time.Duration(rng.IntN(3_000)) * time.Millisecond)
			case 2:
				clk.Advance(time.Duration(rng.IntN(40_000)) * time.Millisecond)
			}
		}
		if denials == 0 || admitted == 0 {
			t.Fatalf("seed %d: %d denials, %d retries admitted", seed, denials, admitted)
		}
		t.Logf("seed %d: %d of 300 denied (by each middleware: %v), %d retries at Retry-After admitted by all three (the others denied by a middleware the denial did not reach)", seed, denials, by, admitted)
	}
}

// The gin/echo form with three middlewares on one writer, the inner one
// registered twice (its second call denied): each policy listed once,
// the fields one line each, Retry-After not before the outer's exhausted
// t, the legacy Remaining 0; a WithDeniedHandler on the inner one sees
// that Retry-After, and one that writes its own keeps it (its choice).
func TestAudit63AllowFormThreeOnOneWriter(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	w := limit.WithClock(clk)
	var seenRA string
	a, err := New(limit.MustNew(limit.Every(40*time.Second), 1, limit.WithName("a"), w), WithLegacyHeaders(true))
	if err != nil {
		t.Fatal(err)
	}
	b, err := a.With(limit.MustNew(limit.Every(20*time.Second), 1, limit.WithName("b"), w))
	if err != nil {
		t.Fatal(err)
	}
	c, err := a.With(limit.MustNew(1, 1, limit.WithName("c"), w), WithDeniedHandler(func(w http.ResponseWriter, _ *http.Request, d limit.Decision) {
		seenRA = w.Header().Get("Retry-After")
		w.Header().Set("Retry-After", "2")
		w.WriteHeader(429)
	}))
	if err != nil {
		t.Fatal(err)
	}
	rw := httptest.NewRecorder()
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "192.0.2.63:1"
	for i, m := range []*Middleware{a, b, c} {
		if !m.Allow(rw, r) {
			t.Fatalf("call %d denied", i)
		}
	}
	if c.Allow(rw, r) {
		t.Fatal("the second call of c admitted")
	}
	h := rw.Header()
	if got, want := h.Values("RateLimit"), []string{`"a";r=0;t=40, "b";r=0;t=20, "c";r=0;t=1`}; strings.Join(got, "|") != want[0] {
		t.Errorf("RateLimit %q, want %q", got, want)
	}
	if got := h.Values("RateLimit-Policy"); len(got) != 1 || got[0] != `"a";q=1;w=40, "b";q=1;w=20, "c";q=1;w=1` {
		t.Errorf("RateLimit-Policy %q", got)
	}
	if seenRA != "40" {
		t.Errorf("the denied handler saw Retry-After %q, want 40 (a's t with r=0)", seenRA)
	}
	if h.Get("Retry-After") != "2" || h.Get("X-RateLimit-Remaining") != "0" {
		t.Errorf("Retry-After %q (the handler's own 2), X-RateLimit-Remaining %q", h.Get("Retry-After"), h.Get("X-RateLimit-Remaining"))
	}
}

// The package doc (Answers): a retry at Retry-After "is not denied again
// by a policy the answer lists as empty", and audit 26's answers check
// "retryAfter equal to Retry-After". With WithProblemJSON, the body's
// retryAfter is still the denying decision's own RetryAfter (deny,
// middleware.go), not the stacked Retry-After: an outer policy listed
// with r=0;t=30 makes the header 30 while the body says 1; a client that
// follows the body retries after 1 s and is denied by the outer limit.
func TestAudit63FixedProblemRetryAfterNotStacked(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	outer, err := New(limit.MustNew(limit.Every(30*time.Second), 2, limit.WithName("outer"), limit.WithClock(clk)), WithProblemJSON(true))
	if err != nil {
		t.Fatal(err)
	}
	inner, err := outer.With(limit.MustNew(1, 1, limit.WithName("inner"), limit.WithClock(clk)))
	if err != nil {
		t.Fatal(err)
	}
	h := outer.Handler(inner.Handler(a63OK))
	const remote = "192.0.2.64:1"
	if w := a63Get(h, remote); w.Code != 200 {
		t.Fatalf("first: %d", w.Code)
	}
	w := a63Get(h, remote)
	var p Problem
	if w.Code != 429 || json.Unmarshal(w.Body.Bytes(), &p) != nil || p.RetryAfter == nil {
		t.Fatalf("second: %d %q", w.Code, w.Body.String())
	}
	ra := w.Header().Get("Retry-After")
	if strconv.FormatInt(*p.RetryAfter, 10) != ra {
		clk.Advance(time.Duration(*p.RetryAfter) * time.Second)
		retry := a63Get(h, remote)
		t.Errorf("problem+json retryAfter %d, Retry-After %q (RateLimit %q): the body announces an earlier retry than the header; retrying after the body's %d s got %d (RateLimit %q); doc.go: \"a retry at that second is not denied again by a policy the answer lists as empty\"",
			*p.RetryAfter, ra, w.Header().Get("RateLimit"), *p.RetryAfter, retry.Code, retry.Header().Get("RateLimit"))
	}
}

type a63CtxKey struct{}

// Three stacked middlewares (the middle one a Multi) shared by
// goroutines under several GOMAXPROCS, the fake clock moved by one of
// them: every answer (its own writer) has one valid List per field, each
// deciding middleware's policy listed once, and a denial's Retry-After is
// not before the denying decision's RetryAfter nor any listed r=0 t.
func TestAudit63StackedConcurrent(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		clk := sketchtest.NewFakeClock()
		w := limit.WithClock(clk)
		mid, err := limit.NewMulti(limit.MustNew(5, 5, limit.WithName("sec"), w), limit.MustNew(limit.Every(2*time.Second), 20, limit.WithName("slow"), w))
		if err != nil {
			t.Fatal(err)
		}
		hook := WithHook(func(r *http.Request, _ string, d limit.Decision) {
			p := r.Context().Value(a63CtxKey{}).(*[]limit.Decision)
			*p = append(*p, d)
		})
		a, err := New(limit.MustNew(limit.Every(500*time.Millisecond), 8, limit.WithName("global"), w), hook, WithLegacyHeaders(true))
		if err != nil {
			t.Fatal(err)
		}
		b, err := a.With(mid)
		if err != nil {
			t.Fatal(err)
		}
		c, err := a.With(limit.MustNew(limit.Every(time.Second), 2, limit.WithName("route"), w))
		if err != nil {
			t.Fatal(err)
		}
		h := a.Handler(b.Handler(c.Handler(a63OK)))
		const workers, each = 6, 150
		errs := make(chan error, workers)
		for g := range workers {
			go func() {
				for i := range each {
					if g == 0 && i%3 == 0 {
						clk.Advance(137 * time.Millisecond)
					}
					var ds []limit.Decision
					r := httptest.NewRequest("GET", "/", nil)
					r = r.WithContext(context.WithValue(r.Context(), a63CtxKey{}, &ds))
					r.RemoteAddr = fmt.Sprintf("192.0.2.%d:1", 1+i%3)
					rw := httptest.NewRecorder()
					h.ServeHTTP(rw, r)
					hd := rw.Header()
					rl, err1 := a63ParseList(hd.Get("RateLimit"))
					_, err2 := a63ParseList(hd.Get("RateLimit-Policy"))
					if err1 != nil || err2 != nil || len(hd.Values("RateLimit")) != 1 || len(rl) != len(ds) {
						errs <- fmt.Errorf("answer %q / %q: %v %v, %d decisions", hd.Values("RateLimit"), hd.Values("RateLimit-Policy"), err1, err2, len(ds))
						return
					}
					least := ds[0].Remaining
					for _, d := range ds {
						least = min(least, d.Remaining)
					}
					if hd.Get("X-RateLimit-Remaining") != strconv.Itoa(least) {
						errs <- fmt.Errorf("X-RateLimit-Remaining %q, want %d", hd.Get("X-RateLimit-Remaining"), least)
						return
					}
					if last := ds[len(ds)-1]; !last.Allowed {
						ra, err := strconv.ParseInt(hd.Get("Retry-After"), 10, 64)
						if err != nil || ra < max(ceilSeconds(last.RetryAfter), 1) || ra < a63ExhaustedT(rl) {
							errs <- fmt.Errorf("Retry-After %q: RetryAfter %v, RateLimit %q", hd.Get("Retry-After"), last.RetryAfter, hd.Get("RateLimit"))
							return
						}
					}
				}
				errs <- nil
			}()
		}
		for range workers {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
	})
}

// http.Header's doc: "To use non-canonical keys, assign to the map
// directly." A RateLimit field an outer layer put under its own spelling
// (h["RateLimit"]) is one field on the wire with the "Ratelimit" that
// SetHeaders writes (field names are case-insensitive: RFC 9110 §5.1),
// so its r=0;t=30 item is listed in the answer; SetHeaders reads only
// the canonical key and announces Retry-After 1.
func TestAudit63FixedNonCanonicalKeyNotMerged(t *testing.T) {
	h := http.Header{}
	h["RateLimit"] = []string{`"edge";r=0;t=30`}
	a63Mine(t).SetHeaders(h, a63Deny)
	var wire strings.Builder
	h.Write(&wire)
	var lines []string
	for _, l := range strings.Split(wire.String(), "\r\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.EqualFold(k, "RateLimit") {
			lines = append(lines, strings.TrimSpace(v))
		}
	}
	ms, err := a63ParseList(strings.Join(lines, ", "))
	if err != nil {
		t.Fatalf("the RateLimit lines on the wire %q: %v", lines, err)
	}
	if ra := h.Get("Retry-After"); ra != strconv.FormatInt(max(1, a63ExhaustedT(ms)), 10) {
		t.Errorf("RateLimit on the wire %q (one field: RFC 9110 §5.1, §5.3), Retry-After %q, want %d; %s", lines, ra, a63ExhaustedT(ms), a63Promise)
	}
}
