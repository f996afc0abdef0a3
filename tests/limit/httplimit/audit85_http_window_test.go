package httplimit_test

// Audit 85: RateLimit-Policy's w for Tiers (audit 71/81 checked plain
// limiters): doc.go, "Answers": "w (window, seconds) the time to refill
// it from empty as the limiter holds it (ceil(burst/rate) for an exact
// policy, a little more for an inexact one of package limit ...)". So a
// key that spends the whole burst from empty is full again after w
// seconds and not (w-1): its X-RateLimit-Reset, ResetAfter rounded up,
// is w.

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

func TestAudit85HTTPTierWindow(t *testing.T) {
	type tc struct {
		base   limit.Limit
		bburst int
		rate   limit.Limit
		burst  int
	}
	cases := []tc{
		{10, 20, 0.7, 3}, {10, 20, 0.3, 5}, {10, 20, limit.Every(1300 * time.Millisecond), 5},
		{7, 14, 3.3, 7}, {1000, 1000, 1, 30}, {3, 6, 1, 6}, {10, 20, limit.Every(999 * time.Millisecond), 10},
	}
	for _, eng := range []limit.Engine{limit.Auto, limit.CountMin} {
		for _, c := range cases {
			clk := limittest.NewFakeClock()
			clk.Set(1_000_000)
			l, err := limit.New(c.base, c.bburst, limit.WithClock(clk), limit.WithEngine(eng), limit.WithMaxDebt(float64(c.base)*50))
			if err != nil {
				t.Fatal(err)
			}
			tier, err := l.Tier("tier", c.rate, c.burst)
			if err != nil {
				t.Fatalf("%v %+v: %v", eng, c, err)
			}
			var last limit.Decision
			h := httplimit.Wrap(tier, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}),
				httplimit.WithLegacyHeaders(true), httplimit.WithCost(func(*http.Request) int { return c.burst }),
				httplimit.WithHook(func(_ *http.Request, _ string, d limit.Decision) { last = d }))
			w := audit85httpServe(h, "192.0.2.5:1")
			pol := w.Header().Get("RateLimit-Policy")
			i := strings.Index(pol, ";w=")
			ws, err := strconv.ParseInt(pol[i+3:], 10, 64)
			if w.Code != 200 || i < 0 || err != nil {
				t.Fatalf("%v %+v: %d %q", eng, c, w.Code, pol)
			}
			reset := w.Header().Get("X-RateLimit-Reset")
			if reset != strconv.FormatInt(ws, 10) {
				t.Errorf("%v %+v (exact %v): RateLimit-Policy %q, but a full burst from empty resets in %q s (ResetAfter %v)", eng, c, tier.Exact(), pol, reset, last.ResetAfter)
			}
			// Full again at w, not 1 s before.
			clk.Advance(time.Duration(ws-1) * time.Second)
			if d := tier.PeekN(clk.Now(), "192.0.2.5/32", c.burst); d.Allowed && last.ResetAfter > time.Duration(ws-1)*time.Second {
				t.Errorf("%v %+v: full burst back before w-1", eng, c)
			}
			clk.Advance(time.Second)
			if d := tier.PeekN(clk.Now(), "192.0.2.5/32", c.burst); !d.Allowed {
				t.Errorf("%v %+v: w=%d s after a full burst from empty, a full burst is denied: %+v", eng, c, ws, d)
			}
		}
	}
}
