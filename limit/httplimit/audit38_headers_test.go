package httplimit_test

// Audit 38: every answer's fields against the Decision the hook saw
// (Retry-After = RetryAfter rounded up to whole seconds, at least 1;
// RateLimit r = Remaining, t = NextAfter rounded up, or RetryAfter for a
// Multi's denial; X-RateLimit-Reset = ResetAfter rounded up), and never
// early: the same request sent again after Retry-After seconds (and after
// RetryAfter exactly) is admitted, on a Limiter, a Tier and a Multi,
// with random costs on a fake clock.

import (
	"fmt"
	"math/rand/v2"
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

func a38ceil(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// a38field parses `"name";r=R;t=T` (t optional).
func a38field(s string) (name string, r, tt int64, hasT bool, err error) {
	parts := strings.Split(s, ";")
	if len(parts) < 2 {
		return "", 0, 0, false, fmt.Errorf("bad field %q", s)
	}
	name = strings.Trim(parts[0], `"`)
	for _, p := range parts[1:] {
		k, v, ok := strings.Cut(p, "=")
		if !ok {
			return "", 0, 0, false, fmt.Errorf("bad param %q", p)
		}
		x, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return "", 0, 0, false, err
		}
		switch k {
		case "r":
			r = x
		case "t":
			tt, hasT = x, true
		}
	}
	return name, r, tt, hasT, nil
}

type a38target struct {
	name  string
	l     httplimit.Limiter
	multi bool
}

func TestAudit38HeadersMatchDecision(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	now := int64(1 << 36)
	clk.Set(now)
	mk := func(lim limit.Limit, burst int, name string, opts ...limit.Option) *limit.Limiter {
		l, err := limit.New(lim, burst, append([]limit.Option{limit.WithClock(clk), limit.WithName(name), limit.WithSeed(3)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	base := mk(10, 20, "base", limit.WithMaxDebt(80))
	tier, err := base.Tier("slow", 2.5, 7)
	if err != nil {
		t.Fatal(err)
	}
	m, err := limit.NewMulti(mk(3, 4, "short"), mk(limit.Every(700*time.Millisecond), 9, "long"), mk(limit.Every(1500*time.Millisecond), 5, "longer"))
	if err != nil {
		t.Fatal(err)
	}
	targets := []a38target{
		{"limiter", mk(limit.Every(1300*time.Millisecond), 3, "every1300"), false},
		{"limiter-fast", mk(40, 3, "fast"), false},
		{"tier", tier, false},
		{"multi", m, true},
	}
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			var last limit.Decision
			mw, err := httplimit.New(tg.l,
				httplimit.WithKey(httplimit.Header("X-Key")),
				httplimit.WithCost(func(r *http.Request) int { n, _ := strconv.Atoi(r.Header.Get("X-Cost")); return n }),
				httplimit.WithLegacyHeaders(true),
				httplimit.WithHook(func(_ *http.Request, _ string, d limit.Decision) { last = d }))
			if err != nil {
				t.Fatal(err)
			}
			h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
			send := func(key string, n int) (*httptest.ResponseRecorder, limit.Decision) {
				r := httptest.NewRequest("GET", "/", nil)
				r.Header.Set("X-Key", key)
				r.Header.Set("X-Cost", strconv.Itoa(n))
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				return w, last
			}
			rng := rand.New(rand.NewPCG(38, uint64(len(tg.name))))
			var denials, retries int
			for step := range 600 {
				key := fmt.Sprint("c", rng.IntN(3))
				n := 1 + rng.IntN(3)
				w, d := send(key, n)
				hd := w.Result().Header
				if d.Allowed != (w.Code == 200) {
					t.Fatalf("step %d: code %d for %+v", step, w.Code, d)
				}
				name, r, tt, hasT, err := a38field(hd.Get("RateLimit"))
				if err != nil {
					t.Fatalf("step %d: RateLimit %q: %v", step, hd.Get("RateLimit"), err)
				}
				if name != d.Policy || r != int64(d.Remaining) {
					t.Fatalf("step %d: RateLimit %q for %+v", step, hd.Get("RateLimit"), d)
				}
				next := d.NextAfter
				if tg.multi && !d.Allowed && !d.Never && next < d.RetryAfter {
					next = d.RetryAfter
				}
				if hasT != (next > 0) || hasT && tt != a38ceil(next) {
					t.Fatalf("step %d: RateLimit %q, want t=ceil(%v) (doc.go: \"t ... its NextAfter ... rounded up, left out when the bucket is full\"): %+v", step, hd.Get("RateLimit"), next, d)
				}
				if got := hd.Get("X-RateLimit-Reset"); got != strconv.FormatInt(a38ceil(d.ResetAfter), 10) {
					t.Fatalf("step %d: X-RateLimit-Reset %q for ResetAfter %v", step, got, d.ResetAfter)
				}
				ra := hd.Get("Retry-After")
				switch {
				case d.Allowed || d.Never:
					if ra != "" {
						t.Fatalf("step %d: Retry-After %q on %+v", step, ra, d)
					}
				default:
					denials++
					want := max(a38ceil(d.RetryAfter), 1)
					if ra != strconv.FormatInt(want, 10) {
						t.Fatalf("step %d: Retry-After %q, want %d for RetryAfter %v", step, ra, want, d.RetryAfter)
					}
					if hasT && tt > want {
						t.Fatalf("step %d: Retry-After %d earlier than t=%d (draft: Retry-After not earlier than t)", step, want, tt)
					}
					if rng.IntN(2) == 0 {
						// Retry after exactly RetryAfter, or after the
						// header's whole seconds: admitted.
						wait := d.RetryAfter
						if rng.IntN(2) == 0 {
							wait = time.Duration(want) * time.Second
						}
						now += wait.Milliseconds()
						clk.Set(now)
						w2, d2 := send(key, n)
						if w2.Code != 200 {
							t.Fatalf("step %d key %s n %d: denied again %v after a denial with RetryAfter %v (Retry-After %s): %+v (doc.go: \"RetryAfter rounded up (never early for the key's own debt)\")", step, key, n, wait, d.RetryAfter, ra, d2)
						}
						retries++
					}
				}
				now += int64(rng.IntN(3)) * int64([]int{1, 40, 333}[rng.IntN(3)])
				clk.Set(now)
			}
			if denials < 50 || retries < 20 {
				t.Fatalf("schedule too one-sided: %d denials, %d retries", denials, retries)
			}
		})
	}
}

// a38policyW returns the w of name's item in a RateLimit-Policy value.
func a38policyW(v, name string) (q, w int64, ok bool) {
	for _, item := range strings.Split(v, ", ") {
		parts := strings.Split(item, ";")
		if strings.Trim(parts[0], `"`) != name {
			continue
		}
		for _, p := range parts[1:] {
			k, x, _ := strings.Cut(p, "=")
			n, _ := strconv.ParseInt(x, 10, 64)
			switch k {
			case "q":
				q = n
			case "w":
				w = n
			}
		}
		return q, w, true
	}
	return 0, 0, false
}

// TestAudit38PolicyWindowAfterSetLimit: RateLimit-Policy follows SetLimit
// and SetBurst, and its w is the refill from empty as the limiter holds
// it: the ResetAfter of a full burst taken from an empty key, rounded up
// to whole seconds (doc.go: "w (window, seconds) the time to refill it
// from empty as the limiter holds it"), for exact and inexact policies,
// on a Limiter and on a Tier.
func TestAudit38PolicyWindowAfterSetLimit(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1 << 36)
	l, err := limit.New(10, 20, limit.WithClock(clk), limit.WithName("p"), limit.WithMaxDebt(400), limit.WithSeed(4))
	if err != nil {
		t.Fatal(err)
	}
	mw, err := httplimit.New(l, httplimit.WithKey(httplimit.Header("X-Key")))
	if err != nil {
		t.Fatal(err)
	}
	h := mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	i := 0
	check := func(what string, burst int, full func(key string) limit.Decision) {
		t.Helper()
		i++
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-Key", fmt.Sprint("probe", i))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		q, ww, ok := a38policyW(w.Result().Header.Get("RateLimit-Policy"), "p")
		d := full(fmt.Sprint("full", i))
		if !d.Allowed {
			t.Fatalf("%s: full burst from empty denied: %+v", what, d)
		}
		want := max(a38ceil(d.ResetAfter), 1)
		if !ok || q != int64(burst) || ww != want {
			t.Fatalf("%s: RateLimit-Policy %q, want q=%d w=%d (a full burst's ResetAfter %v)", what, w.Result().Header.Get("RateLimit-Policy"), burst, want, d.ResetAfter)
		}
	}
	for _, s := range []struct {
		lim   limit.Limit
		burst int
	}{{10, 20}, {3, 20}, {limit.Every(999 * time.Millisecond), 20}, {limit.Every(999 * time.Millisecond), 37}, {7, 13}, {0.7, 9}, {limit.Every(1001 * time.Millisecond), 39}} {
		if err := l.SetBurst(1); err != nil {
			t.Fatal(err)
		}
		if err := l.SetLimit(s.lim); err != nil {
			t.Fatal(err)
		}
		if err := l.SetBurst(s.burst); err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("SetLimit(%v) SetBurst(%d) exact=%v", float64(s.lim), s.burst, l.Exact()), s.burst, func(key string) limit.Decision {
			return l.DecideN(clk.Now(), key, s.burst)
		})
	}
}

// TestAudit38PolicyWindowTier: the same for Tiers, exact and inexact.
func TestAudit38PolicyWindowTier(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1 << 36)
	for _, eng := range []limit.Engine{limit.Buckets, limit.CountMin} {
		l, err := limit.New(10, 20, limit.WithClock(clk), limit.WithMaxDebt(400), limit.WithSeed(4), limit.WithEngine(eng))
		if err != nil {
			t.Fatal(err)
		}
		for j, s := range []struct {
			lim   limit.Limit
			burst int
		}{{limit.Every(999 * time.Millisecond), 20}, {3, 7}, {0.7, 9}, {10.0 / 3, 10}, {limit.Every(1001 * time.Millisecond), 39}, {9.99, 40}} {
			name := fmt.Sprint("t", j)
			tr, err := l.Tier(name, s.lim, s.burst)
			if err != nil {
				t.Fatal(err)
			}
			mw, err := httplimit.New(tr, httplimit.WithKey(httplimit.Header("X-Key")))
			if err != nil {
				t.Fatal(err)
			}
			r := httptest.NewRequest("GET", "/", nil)
			r.Header.Set("X-Key", fmt.Sprint(eng, "probe", j))
			w := httptest.NewRecorder()
			mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(w, r)
			q, ww, ok := a38policyW(w.Result().Header.Get("RateLimit-Policy"), name)
			d := tr.DecideN(clk.Now(), fmt.Sprint(eng, "full", j), s.burst)
			want := max(a38ceil(d.ResetAfter), 1)
			if !d.Allowed || !ok || q != int64(s.burst) || ww != want {
				t.Fatalf("%v tier %v x %d (exact %v): RateLimit-Policy %q, want q=%d w=%d (a full burst's ResetAfter %v, %+v)", eng, float64(s.lim), s.burst, tr.Exact(), w.Result().Header.Get("RateLimit-Policy"), s.burst, want, d.ResetAfter, d)
			}
		}
	}
}
