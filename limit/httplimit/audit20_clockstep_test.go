package httplimit_test

// audit20: the middleware's fields against the limiter's Decision and
// against the truth (the limiter's own later answers), under a fake
// clock (limit.WithClock) stepping back and forward.
//
// Fixed (TestAudit20FixedMultiRateLimit; it failed on 14ace85): on a
// Multi denial, the Decision names the window with the latest RetryAfter
// (Policy, Limit, Burst) but carries the least Remaining and its
// NextAfter, which may be another window's; the RateLimit field paired
// one policy's name with another's t: `"slow";r=0;t=1` for a policy with
// no more quota for 60 s. The draft's r and t are the named policy's, and
// t=1 promised its quota 59 s early. Now t is the RetryAfter there (the
// named window has more quota by then) and r the least Remaining (at most
// the named window's own): never a promise earlier than the truth.

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

func a20ceil(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// a20serve runs one request through h (key fixed by the middleware's
// WithKey) and returns the recorder.
func a20serve(h http.Handler) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	return rec
}

// TestAudit20HeadersMatchDecisionUnderSteps: random clock steps both
// ways (ms to a day), costs 1..burst+1, on a Limiter and a Tier, both
// engines: every field is the Decision's as documented; on a 429
// Retry-After is there iff the request can be retried, >= 1 and >= t;
// and the fields never promise early: when the clock has moved
// Retry-After seconds the same request is admitted (PeekN at Now),
// when it has moved t seconds the key has more than r tokens, when it
// has moved X-RateLimit-Reset seconds the bucket is full.
func TestAudit20HeadersMatchDecisionUnderSteps(t *testing.T) {
	steps := []int64{1, 7, 99, 100, 999, 1_000, 1_001, 60_000, 3_600_000, 86_400_000}
	for _, eng := range []limit.Engine{limit.Buckets, limit.CountMin} {
		for _, useTier := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/tier=%v", eng, useTier), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(eng), 20))
				clk := limittest.NewFakeClock()
				clk.Set(1_700_000_000_000)
				l, err := limit.New(4, 5, limit.WithClock(clk), limit.WithEngine(eng), limit.WithSeed(3), limit.WithName("api"), limit.WithMaxDebt(20), limit.WithRejectCost(0.5))
				if err != nil {
					t.Fatal(err)
				}
				var target httplimit.Limiter = l
				burst := 5
				peek := func(n int) limit.Decision { return l.PeekN(l.Now(), "k", n) }
				tokens := func() float64 { return l.Tokens("k") }
				policy := `"api";q=5;w=2`
				if useTier {
					tr, err := l.Tier("slow", 1.5, 4) // not exact (ratio 8/3): never early still
					if err != nil {
						t.Fatal(err)
					}
					target, burst = tr, 4
					peek = func(n int) limit.Decision { return tr.PeekN(tr.Now(), "k", n) }
					tokens = func() float64 { return tr.Tokens("k") }
					policy = `"slow";q=4;w=3`
				}
				var last limit.Decision
				cost := 1
				h := httplimit.Wrap(target, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}),
					httplimit.WithKey(func(*http.Request) (string, error) { return "k", nil }),
					httplimit.WithCost(func(*http.Request) int { return cost }),
					httplimit.WithLegacyHeaders(true),
					httplimit.WithHook(func(_ *http.Request, _ string, d limit.Decision) { last = d }))
				var denials, lagged int
				for i := range 400 {
					s := steps[rng.IntN(len(steps))]
					if rng.IntN(2) == 0 {
						s = int64(rng.IntN(400))
					}
					switch rng.IntN(5) {
					case 0, 1, 2:
						clk.Advance(time.Duration(s) * time.Millisecond)
					case 3:
						clk.Advance(-time.Duration(s) * time.Millisecond)
					}
					cost = 1 + rng.IntN(burst+1)
					if rng.IntN(2) == 0 {
						cost = 1
					}
					rec := a20serve(h)
					d := last
					hd := rec.Header()
					where := fmt.Sprintf("step %d (cost %d, clock %d): %+v", i, cost, clk.NowMillis(), d)
					if got := hd.Get("RateLimit-Policy"); got != policy {
						t.Fatalf("%s: RateLimit-Policy %q, want %q", where, got, policy)
					}
					wantRL := d.Policy
					wantRL = strconv.Quote(wantRL) + ";r=" + strconv.Itoa(d.Remaining)
					if d.NextAfter > 0 {
						wantRL += ";t=" + strconv.FormatInt(a20ceil(d.NextAfter), 10)
					}
					if got := hd.Get("RateLimit"); got != wantRL {
						t.Fatalf("%s: RateLimit %q, want %q", where, got, wantRL)
					}
					if hd.Get("X-RateLimit-Limit") != strconv.Itoa(burst) || hd.Get("X-RateLimit-Remaining") != strconv.Itoa(d.Remaining) ||
						hd.Get("X-RateLimit-Reset") != strconv.FormatInt(a20ceil(d.ResetAfter), 10) {
						t.Fatalf("%s: legacy fields %v", where, hd)
					}
					ra := hd.Get("Retry-After")
					switch {
					case d.Allowed:
						if rec.Code != 200 || ra != "" {
							t.Fatalf("%s: admitted: %d, Retry-After %q", where, rec.Code, ra)
						}
					case d.Never:
						if rec.Code != 429 || ra != "" || cost <= burst {
							t.Fatalf("%s: Never: %d, Retry-After %q", where, rec.Code, ra)
						}
					default:
						denials++
						if rec.Code != 429 || cost > burst {
							t.Fatalf("%s: denied: %d", where, rec.Code)
						}
						if ra != strconv.FormatInt(max(a20ceil(d.RetryAfter), 1), 10) {
							t.Fatalf("%s: Retry-After %q", where, ra)
						}
						if d.NextAfter > d.RetryAfter {
							t.Fatalf("%s: NextAfter > RetryAfter", where)
						}
						if d.RetryAfter > 2*time.Hour {
							lagged++
						}
					}
					// The truth, in order of time: t, Retry-After, Reset.
					now := clk.NowMillis()
					type check struct {
						at   int64
						what string
						ok   func() bool
					}
					var checks []check
					if d.NextAfter > 0 {
						checks = append(checks, check{a20ceil(d.NextAfter) * 1000, "RateLimit t", func() bool { return tokens() >= float64(d.Remaining+1) }})
					}
					if !d.Allowed && !d.Never {
						sec, _ := strconv.ParseInt(ra, 10, 64)
						checks = append(checks, check{sec * 1000, "Retry-After", func() bool { return peek(cost).Allowed }})
					}
					if d.ResetAfter > 0 && rng.IntN(3) == 0 {
						checks = append(checks, check{a20ceil(d.ResetAfter) * 1000, "X-RateLimit-Reset", func() bool { return tokens() >= float64(burst) }})
					}
					for a := range checks {
						for b := a + 1; b < len(checks); b++ {
							if checks[b].at < checks[a].at {
								checks[a], checks[b] = checks[b], checks[a]
							}
						}
					}
					if rng.IntN(2) == 0 { // else do not move the clock: the next step may find the key still in debt
						for _, c := range checks {
							clk.Set(now + c.at)
							if !c.ok() {
								t.Fatalf("%s: %s early: at the answer's clock + %d ms, tokens %v, PeekN %+v", where, c.what, c.at, tokens(), peek(cost))
							}
						}
					}
				}
				if denials < 20 || lagged < 3 {
					t.Fatalf("weak run: %d denials, %d lagged", denials, lagged)
				}
			})
		}
	}
}

// TestAudit20RetryAfterAfterStepBack: the clock stepped back a day
// behind the latest time used: Retry-After counts the day (whole
// seconds, rounded up), the RateLimit t and X-RateLimit-Reset too.
func TestAudit20RetryAfterAfterStepBack(t *testing.T) {
	for _, eng := range []limit.Engine{limit.Buckets, limit.CountMin} {
		clk := limittest.NewFakeClock()
		clk.Set(1_700_000_000_000)
		l, err := limit.New(limit.Every(1500*time.Millisecond), 2, limit.WithClock(clk), limit.WithEngine(eng), limit.WithName("api"))
		if err != nil {
			t.Fatal(err)
		}
		h := httplimit.Wrap(l, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}),
			httplimit.WithKey(func(*http.Request) (string, error) { return "k", nil }), httplimit.WithLegacyHeaders(true))
		for range 2 {
			if rec := a20serve(h); rec.Code != 200 {
				t.Fatal(rec.Code)
			}
		}
		clk.Advance(-24*time.Hour - time.Millisecond)
		rec := a20serve(h)
		// The day + 1 ms lag, then 1.5 s for the token: 86401.501 s; the
		// bucket full 3 s after the lag: 86403.001 s.
		if rec.Code != 429 || rec.Header().Get("Retry-After") != "86402" || rec.Header().Get("RateLimit") != `"api";r=0;t=86402` || rec.Header().Get("X-RateLimit-Reset") != "86404" {
			t.Errorf("%v: %d %v", eng, rec.Code, rec.Header())
		}
		clk.Advance(86_401_500 * time.Millisecond)
		if rec := a20serve(h); rec.Code != 429 {
			t.Errorf("%v: at the clock + 86401.5 s (1 ms before the lag + wait) admitted", eng)
		}
		clk.Advance(time.Millisecond)
		if rec := a20serve(h); rec.Code != 200 {
			t.Errorf("%v: at the clock + 86401.501 s (lag + wait) denied: %v", eng, rec.Header())
		}
	}
}

// TestAudit20NeverOnlyAboveBurst: 429 without Retry-After exactly for a
// cost above the burst, whatever the clock did (a Limiter, a Tier, a
// Multi whose second window has the smaller burst).
func TestAudit20NeverOnlyAboveBurst(t *testing.T) {
	clk := limittest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	a := limit.MustNew(10, 6, limit.WithClock(clk), limit.WithName("a"), limit.WithMaxDebt(24))
	b := limit.MustNew(1, 3, limit.WithClock(clk), limit.WithName("b"))
	m, err := limit.NewMulti(a, b)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := a.Tier("t", 2.5, 4)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		l     httplimit.Limiter
		burst int
	}{{a, 6}, {tr, 4}, {m, 3}} {
		for cost := 1; cost <= tc.burst+2; cost++ {
			h := httplimit.Wrap(tc.l, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}),
				httplimit.WithKey(func(*http.Request) (string, error) { return fmt.Sprintf("k%d", cost), nil }),
				httplimit.WithCost(func(*http.Request) int { return cost }))
			for i := range 6 {
				clk.Advance(time.Duration(1-2*(i%2)) * 37 * time.Minute)
				rec := a20serve(h)
				ra := rec.Header().Get("Retry-After")
				if cost > tc.burst {
					if rec.Code != 429 || ra != "" {
						t.Errorf("%T cost %d > burst %d: %d Retry-After %q; want 429 without it", tc.l, cost, tc.burst, rec.Code, ra)
					}
				} else if rec.Code == 429 && ra == "" {
					t.Errorf("%T cost %d <= burst %d: 429 without Retry-After", tc.l, cost, tc.burst)
				}
			}
		}
	}
}

// See the file comment.
func TestAudit20FixedMultiRateLimit(t *testing.T) {
	clk := limittest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	slow := limit.MustNew(limit.Every(time.Minute), 3, limit.WithClock(clk), limit.WithName("slow"))
	fast := limit.MustNew(10, 4, limit.WithClock(clk), limit.WithName("fast"))
	m, err := limit.NewMulti(slow, fast)
	if err != nil {
		t.Fatal(err)
	}
	// slow: 1 of 3 taken (2 left, the next token in 60 s); fast: all 4
	// taken (0 left, the next in 100 ms). A request of 3: slow needs 60 s,
	// fast 300 ms: Retry-After 60.
	if !slow.AllowN(clk.Now(), "k", 1) || !fast.AllowN(clk.Now(), "k", 4) {
		t.Fatal("setup denied")
	}
	var d limit.Decision
	h := httplimit.Wrap(m, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}),
		httplimit.WithKey(func(*http.Request) (string, error) { return "k", nil }),
		httplimit.WithCost(func(*http.Request) int { return 3 }),
		httplimit.WithLegacyHeaders(true),
		httplimit.WithHook(func(_ *http.Request, _ string, dd limit.Decision) { d = dd }))
	rec := a20serve(h)
	hd := rec.Header()
	if rec.Code != 429 || hd.Get("Retry-After") != "60" {
		t.Fatalf("%d Retry-After %q", rec.Code, hd.Get("Retry-After"))
	}
	got := [4]string{hd.Get("RateLimit"), hd.Get("X-RateLimit-Limit"), hd.Get("X-RateLimit-Remaining")}
	want := [4]string{`"slow";r=0;t=60`, "3", "0"}
	if got != want {
		t.Errorf("Multi denial (Decision %+v): RateLimit %q, X-RateLimit-Limit %q, X-RateLimit-Remaining %q; want %q (slow named, r the least Remaining, t its RetryAfter)",
			d, got[0], got[1], got[2], want[:3])
	}
}
