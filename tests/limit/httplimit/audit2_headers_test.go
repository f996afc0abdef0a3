package httplimit_test

// Audit 2: acceptance tests of httplimit's header fields against its
// documentation: RateLimit-Policy's w for tiny and decimal rates, the
// fields after SetLimit/SetBurst, a Multi with an Inf window, every
// field of every answer against the Decision behind it (and a retry at
// Retry-After admitted), and X-Forwarded-For entries a client writes.

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
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

// policyW returns the w parameter of a RateLimit-Policy item.
func policyW(t *testing.T, field string) int64 {
	t.Helper()
	i := strings.Index(field, ";w=")
	if i < 0 {
		t.Fatalf("no w in %q", field)
	}
	w, err := strconv.ParseInt(strings.SplitN(field[i+3:], ";", 2)[0], 10, 64)
	if err != nil {
		t.Fatalf("w in %q: %v", field, err)
	}
	return w
}

func policyHeader(t *testing.T, l httplimit.Limiter) string {
	t.Helper()
	m, err := httplimit.New(l)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	m.SetHeaders(h, limit.Decision{Allowed: true, Policy: "default"})
	return h.Get("RateLimit-Policy")
}

// TestAudit2PolicyWindowTinyRate: w is "the time to refill it from
// empty, ceil(burst/rate)" (clamped to the largest sf-integer). limit.New
// accepts a limit of 1e-12/s and Every(MaxInt64 ns): refilling takes
// 1e12 s and 9.2e12 s, and the field says w=1, a window a client reads
// as "the quota comes back every second". (burst/rate in nanoseconds
// overflows the conversion to time.Duration.)
func TestAudit2PolicyWindowTinyRate(t *testing.T) {
	for _, c := range []struct {
		lim   limit.Limit
		burst int
	}{{1e-12, 1}, {limit.Every(time.Duration(math.MaxInt64)), 1000}, {1e-9, 10}} {
		l, err := limit.New(c.lim, c.burst)
		if err != nil {
			t.Fatalf("New(%v, %d): %v", float64(c.lim), c.burst, err)
		}
		want := math.Min(math.Ceil(float64(c.burst)/float64(c.lim)), 999_999_999_999_999)
		if w := policyW(t, policyHeader(t, l)); float64(w) != want {
			t.Errorf("limit %v/s, burst %d: w=%d, want ceil(burst/rate) = %.0f", float64(c.lim), c.burst, w, want)
		}
	}
}

// TestAudit2PolicyWindowExact: for rates the limiter holds exactly
// (Every(d) for d a whole number of ms is exactly 1000/d per second),
// w = ceil(burst/rate) is the exact ceiling: Every(140ms) with burst 50
// refills in exactly 7 s, not 8 (the float quotient 7.000000000000001
// is rounded up).
func TestAudit2PolicyWindowExact(t *testing.T) {
	bad := 0
	for ms := int64(1); ms <= 400; ms++ {
		for burst := 1; burst <= 60; burst++ {
			want := max((int64(burst)*ms+999)/1000, 1)
			l := policyOnly{Name: "default", Limit: limit.Every(time.Duration(ms) * time.Millisecond), Burst: burst}
			if w := policyW(t, policyHeader(t, l)); w != want {
				t.Errorf("Every(%dms), burst %d: w=%d, exact refill %d s", ms, burst, w, want)
				if bad++; bad == 5 {
					t.FailNow()
				}
			}
		}
	}
}

// policyOnly is a Limiter that only announces its one policy (the
// fields of RateLimit-Policy come from Policies alone).
type policyOnly limit.Policy

func (p policyOnly) DecideContext(context.Context, string, int) (limit.Decision, error) {
	return limit.Decision{Allowed: true}, nil
}

func (p policyOnly) Policies() []limit.Policy { return []limit.Policy{limit.Policy(p)} }

// TestAudit2PolicyFollowsSetBurst: limit's SetLimit and SetBurst change
// the limiter's policy at run time ("without a new limiter"), and
// Policies reads the current one. SetHeaders sets "the RateLimit-Policy
// field (every policy of the limiter that is not Inf)" with q the burst
// and w ceil(burst/rate): after SetBurst(40) and SetLimit(5), q must be
// 40 and w 8, not New's 20 and 2 (otherwise RateLimit's r, 39, exceeds
// the announced quota q=20).
func TestAudit2PolicyFollowsSetBurst(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	l := limit.MustNew(10, 20, limit.WithClock(clk), limit.WithSeed(1), limit.WithMaxDebt(80))
	h := httplimit.Wrap(l, ok)
	if w := get(h, "192.0.2.1:1"); w.Header().Get("RateLimit-Policy") != `"default";q=20;w=2` {
		t.Fatalf("before: %q", w.Header().Get("RateLimit-Policy"))
	}
	if err := l.SetBurst(40); err != nil {
		t.Fatal(err)
	}
	if err := l.SetLimit(5); err != nil {
		t.Fatal(err)
	}
	if p := l.Policies()[0]; p.Burst != 40 || p.Limit != 5 {
		t.Fatalf("Policies after SetBurst/SetLimit: %+v", p)
	}
	w := get(h, "192.0.2.2:1")
	if got := w.Header().Get("RateLimit-Policy"); got != `"default";q=40;w=8` {
		t.Errorf("after SetBurst(40), SetLimit(5): RateLimit-Policy %q, want %q (RateLimit: %q)", got, `"default";q=40;w=8`, w.Header().Get("RateLimit"))
	}
}

// TestAudit2MultiInfWindowHeader: a Multi of an Inf window and a finite
// one behind the middleware: "RateLimit names the one that binds", and
// only a Decision "of an Inf policy gets no RateLimit field". The Inf
// window never binds, so every answer must carry RateLimit for "fin"
// with its remaining quota.
func TestAudit2MultiInfWindowHeader(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	inf := limit.MustNew(limit.Inf, 1, limit.WithName("inf"), limit.WithClock(clk))
	fin := limit.MustNew(10, 20, limit.WithName("fin"), limit.WithClock(clk), limit.WithSeed(1))
	m, err := limit.NewMulti(inf, fin)
	if err != nil {
		t.Fatal(err)
	}
	h := httplimit.Wrap(m, ok)
	w := get(h, "192.0.2.1:1")
	if w.Code != 200 || w.Header().Get("RateLimit-Policy") != `"fin";q=20;w=2` {
		t.Fatalf("%d, RateLimit-Policy %q", w.Code, w.Header().Get("RateLimit-Policy"))
	}
	if got := w.Header().Get("RateLimit"); got != `"fin";r=19;t=1` {
		t.Errorf("RateLimit %q, want %q (the finite window binds)", got, `"fin";r=19;t=1`)
	}
}

// TestAudit2FieldsMatchDecision: every answer's fields against the
// Decision the hook saw, over a random schedule of costs 1..burst+1 on a
// fake clock, Buckets and count-min, with legacy fields and problem+json:
// RateLimit r = Remaining and t = ceil(NextAfter) (absent iff NextAfter
// is 0); 429 iff denied; Retry-After = max(ceil(RetryAfter), 1) s, never
// below t, absent iff admitted or Never; X-RateLimit-*; the problem
// body's type, title, status, violated-policies and retryAfter; and a
// client that comes back Retry-After seconds later is admitted (never
// early for its own debt).
func TestAudit2FieldsMatchDecision(t *testing.T) {
	for _, eng := range []limit.Engine{limit.Buckets, limit.CountMin} {
		t.Run(eng.String(), func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			clk.Set(1_000_000)
			const burst = 6
			l := limit.MustNew(limit.Every(700*time.Millisecond), burst, limit.WithClock(clk), limit.WithSeed(2),
				limit.WithEngine(eng), limit.WithName("api"))
			rng := rand.New(rand.NewPCG(9, uint64(eng)))
			var cost int
			var last limit.Decision
			h := httplimit.Wrap(l, ok, httplimit.WithLegacyHeaders(true), httplimit.WithProblemJSON(true),
				httplimit.WithCost(func(*http.Request) int { return cost }),
				httplimit.WithHook(func(_ *http.Request, _ string, d limit.Decision) { last = d }))
			ceil := func(d time.Duration) int64 { return int64((d + time.Second - 1) / time.Second) }
			for i := range 300 {
				clk.Advance(time.Duration(rng.IntN(1500)) * time.Millisecond)
				cost = 1 + rng.IntN(burst+1)
				w := get(h, "198.51.100.9:4000")
				d, hd := last, w.Header()
				wantRL := fmt.Sprintf(`"api";r=%d`, d.Remaining)
				if d.NextAfter > 0 {
					wantRL += fmt.Sprintf(";t=%d", ceil(d.NextAfter))
				}
				if hd.Get("RateLimit") != wantRL || hd.Get("RateLimit-Policy") != `"api";q=6;w=5` {
					t.Fatalf("op %d %+v: RateLimit %q (want %q), RateLimit-Policy %q", i, d, hd.Get("RateLimit"), wantRL, hd.Get("RateLimit-Policy"))
				}
				if hd.Get("X-RateLimit-Limit") != "6" || hd.Get("X-RateLimit-Remaining") != strconv.Itoa(d.Remaining) ||
					hd.Get("X-RateLimit-Reset") != strconv.FormatInt(ceil(d.ResetAfter), 10) {
					t.Fatalf("op %d %+v: legacy fields %v", i, d, hd)
				}
				if d.Allowed {
					if w.Code != 200 || hd.Get("Retry-After") != "" {
						t.Fatalf("op %d admitted: %d, Retry-After %q", i, w.Code, hd.Get("Retry-After"))
					}
					continue
				}
				if w.Code != 429 || hd.Get("Content-Type") != "application/problem+json" {
					t.Fatalf("op %d denied: %d %q", i, w.Code, hd.Get("Content-Type"))
				}
				var p struct {
					Type, Title, Detail string
					Status              int
					Violated            []string `json:"violated-policies"`
					RetryAfter          *int64   `json:"retryAfter"`
				}
				if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
					t.Fatalf("op %d: body %q: %v", i, w.Body.String(), err)
				}
				if p.Type != httplimit.ProblemType || p.Title != httplimit.ProblemTitle || p.Status != 429 ||
					len(p.Violated) != 1 || p.Violated[0] != "api" {
					t.Fatalf("op %d: problem %+v", i, p)
				}
				if d.Never {
					if cost <= burst || hd.Get("Retry-After") != "" || p.RetryAfter != nil {
						t.Fatalf("op %d Never (cost %d): Retry-After %q, retryAfter %v", i, cost, hd.Get("Retry-After"), p.RetryAfter)
					}
					continue
				}
				ra, err := strconv.ParseInt(hd.Get("Retry-After"), 10, 64)
				if err != nil || ra != max(ceil(d.RetryAfter), 1) || p.RetryAfter == nil || *p.RetryAfter != ra {
					t.Fatalf("op %d %+v: Retry-After %q, retryAfter %v", i, d, hd.Get("Retry-After"), p.RetryAfter)
				}
				if d.NextAfter > 0 && ra < ceil(d.NextAfter) {
					t.Fatalf("op %d: Retry-After %d earlier than t %d", i, ra, ceil(d.NextAfter))
				}
				if rng.IntN(3) == 0 {
					clk.Advance(time.Duration(ra) * time.Second)
					if w := get(h, "198.51.100.9:4000"); w.Code != 200 {
						t.Fatalf("op %d: cost %d denied again %d s later (Retry-After %d): %+v", i, cost, ra, ra, last)
					}
				}
			}
		})
	}
}

// forwardedKey keys r by X-Forwarded-For with n trusted proxies.
func forwardedKey(n int, xff ...string) (string, error) {
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "10.0.0.1:1234"
	for _, v := range xff {
		r.Header.Add("X-Forwarded-For", v)
	}
	return httplimit.RemoteIP(httplimit.WithTrustedProxies(n))(r)
}

// FuzzAudit2ForwardedForClientPart: with WithTrustedProxies(n), "the
// client is the n-th entry from the right ... anything further left was
// written by the client and is ignored": whatever a client writes in
// front (in the same line or a header line of its own), the key, or the
// error, is the one of the proxies' n entries alone.
func FuzzAudit2ForwardedForClientPart(f *testing.F) {
	f.Add("6.6.6.6", "198.51.100.7, 10.0.0.2", 2, false)
	f.Add("1.2.3.4, ::1", "2001:db8::1", 1, true)
	f.Add("garbage,,,", " 203.0.113.5:80 ,10.0.0.9", 2, false)
	f.Add(",", "[2001:db8::7]:443", 1, true)
	f.Add("x", "::ffff:192.0.2.1", 1, false)
	f.Fuzz(func(t *testing.T, client, proxies string, n int, ownLine bool) {
		n = 1 + n&3
		if strings.Count(proxies, ",")+1 != n || strings.ContainsAny(client+proxies, "\r\n\x00") {
			return // the proxies wrote exactly n entries
		}
		want, werr := forwardedKey(n, proxies)
		var got string
		var err error
		if ownLine {
			got, err = forwardedKey(n, client, proxies)
		} else {
			got, err = forwardedKey(n, client+","+proxies)
		}
		if got != want || (err == nil) != (werr == nil) {
			t.Fatalf("client part %q changed the key: %q, %v; the proxies' entries alone: %q, %v", client, got, err, want, werr)
		}
	})
}
