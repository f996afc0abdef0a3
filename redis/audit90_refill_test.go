package redis

// Audit 90: the refill a Limiter announces (decide.go, refill; httplimit's
// RateLimit-Policy w is its ceiling in seconds, through
// common.PolicyRefills), swept over exact and inexact limits against the
// server itself.

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/common"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit90RedisRefillSweep: for each limit, a fresh key takes its whole
// Burst; the server's ResetAfter then is the time the key takes to be
// whole again. For a limit in exact units the registered refill equals
// it (refill: "how long an empty key takes to get Burst back as the
// server holds it ... rounded up to the ms"); for any limit it is never
// shorter, and the whole Burst is admitted again exactly refill later.
func TestAudit90RedisRefillSweep(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	ctx := context.Background()
	var rates []float64
	for k := 1.0; k <= 12; k++ {
		rates = append(rates, k, 1000/k, k/60, k/3600, 1/k, k/7, 1000/(k+988))
	}
	bursts := []float64{1, 2, 3, 7, 10, 33, 161, 289, 1000, 2.5, 5.14, 16793, 1<<24 + 1, 3e7 + 1}
	exact, inexact := 0, 0
	i := 0
	for _, rate := range rates {
		for _, burst := range bursts {
			lim := PerSecond(rate, burst)
			if burst/rate > 4e7 {
				continue // long drains: audit 60 steps through their rebases
			}
			i++
			clk := sketchtest.NewFakeClock()
			clk.Set(1_800_000_000_000)
			l, err := NewLimiter(e.admin, LimiterConfig{Name: fmt.Sprintf("a90rs%d", i), Limit: lim, Levels: 1, CellsPerLevel: 1,
				Clock: clk, ServerCheck: CheckSkip})
			if err != nil {
				t.Fatal(err)
			}
			refs := common.PolicyRefills(l)
			if len(refs) != 1 {
				t.Fatalf("%v: PolicyRefills %+v", lim, refs)
			}
			ref := refs[0].Refill
			d, err := l.AllowN(ctx, "k", burst)
			if err != nil || !d.Allowed {
				t.Fatalf("%v: the whole Burst from a fresh key: %+v, %v", lim, d, err)
			}
			if l.exactU {
				exact++
				if ref != d.ResetAfter {
					t.Errorf("%v (exact units, %v a token): refill %v; the server's ResetAfter after the whole Burst %v", lim, l.unit, ref, d.ResetAfter)
				}
			} else {
				inexact++
				if ref < d.ResetAfter {
					t.Errorf("%v (tokens): refill %v, short of the server's ResetAfter after the whole Burst %v", lim, ref, d.ResetAfter)
				}
			}
			clk.Advance(ref)
			if d2, err := l.AllowN(ctx, "k", burst); err != nil || !d2.Allowed {
				t.Errorf("%v: the whole Burst again refill (%v) later: %+v, %v", lim, ref, d2, err)
			}
		}
	}
	if exact == 0 || inexact == 0 {
		t.Errorf("%d exact and %d inexact limits: the sweep misses a kind", exact, inexact)
	}
}

// TestAudit90RedisHTTPLimitPolicyWindow: behind httplimit, a fresh key
// takes its whole (whole-token) Burst in one request; the response's
// RateLimit-Policy w is the server's ResetAfter then, rounded up to the
// second, for an exact limit, and never less for an inexact one
// (httplimit's doc: w is "the time to refill it from empty as the
// limiter holds it").
func TestAudit90RedisHTTPLimitPolicyWindow(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	i := 0
	for _, rate := range []float64{5, 10, 3, 1000.0 / 7, 1000.0 / 13, 7.0 / 60, 1.0 / 3, 1000.0 / 999, 0.3, math.Pi} {
		for _, burst := range []float64{1, 7, 161, 289, 16793, 1<<24 + 1} {
			lim := PerSecond(rate, burst)
			if burst/rate > 4e7 {
				continue
			}
			i++
			clk := sketchtest.NewFakeClock()
			clk.Set(1_800_000_000_000)
			l, err := NewLimiter(e.admin, LimiterConfig{Name: fmt.Sprintf("a90hw%d", i), Limit: lim, Levels: 1, CellsPerLevel: 1,
				Clock: clk, ServerCheck: CheckSkip})
			if err != nil {
				t.Fatal(err)
			}
			var last limit.Decision
			h := httplimit.Wrap(l, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}),
				httplimit.WithKey(httplimit.Header("X-User")),
				httplimit.WithCost(func(*http.Request) int { return int(burst) }),
				httplimit.WithHook(func(_ *http.Request, _ string, d limit.Decision) { last = d }))
			r := httptest.NewRequestWithContext(context.Background(), "GET", "/", nil)
			r.Header.Set("X-User", "ann")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			pol := w.Header().Get("RateLimit-Policy")
			j := strings.Index(pol, ";w=")
			if w.Code != 200 || j < 0 || !last.Allowed {
				t.Fatalf("%v: the whole Burst from a fresh key: %d, RateLimit-Policy %q, %+v", lim, w.Code, pol, last)
			}
			ws, err := strconv.ParseInt(pol[j+3:], 10, 64)
			if err != nil {
				t.Fatalf("%v: RateLimit-Policy %q", lim, pol)
			}
			want := max(int64(math.Ceil(last.ResetAfter.Seconds())), 1)
			if l.exactU && ws != want || !l.exactU && ws < want {
				t.Errorf("%v (exact units %v): RateLimit-Policy %q; the server's ResetAfter after the whole Burst %v (%d s rounded up)", lim, l.exactU, pol, last.ResetAfter, want)
			}
			if last.ResetAfter > time.Duration(ws)*time.Second {
				t.Errorf("%v: w %d s is short of the ResetAfter %v", lim, ws, last.ResetAfter)
			}
		}
	}
}
