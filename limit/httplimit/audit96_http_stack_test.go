package httplimit_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// A global limit around a per-route one, built from one Limiter and a
// Tier of it (audit 96; documented at stop 59, the text below says what
// was wrong). doc.go promised "A denial's Retry-After is never earlier
// than the t of any listed item with no quota left (r=0) ...: a
// one-token retry at that second is not denied again by a policy the
// answer lists as empty", and nothing said a stack must use separate
// limiters. The tier shares the key's debt with the outer policy, so the
// outer middleware's debit of the retry lands before the inner one
// decides: with a route tier of 1/s and burst 1 (1000 ms of debt) under
// a global 10/s (100 ms a request), every request is denied by "login",
// listed as r=0 with Retry-After: 1, and so is every retry. doc.go now
// says to stack separate limiters and states this case; the test asserts
// it, and that the same stack over two Limiters keeps the promise.
func TestAudit96HTTPStackSharedDebtDocumented(t *testing.T) {
	for _, shared := range []bool{true, false} {
		clk := sketchtest.NewFakeClock()
		clk.Set(9_000_000)
		global := limit.MustNew(10, 20, limit.WithName("global"), limit.WithClock(clk), limit.WithMaxDebt(100))
		var route httplimit.Limiter
		if shared {
			tier, err := global.Tier("login", 1, 1)
			if err != nil {
				t.Fatal(err)
			}
			route = tier
		} else {
			route = limit.MustNew(1, 1, limit.WithName("login"), limit.WithClock(clk))
		}
		outer, err := httplimit.New(global)
		if err != nil {
			t.Fatal(err)
		}
		inner, err := outer.With(route)
		if err != nil {
			t.Fatal(err)
		}
		h := outer.Handler(inner.Handler(a88OK))
		admitted, deniedThenAdmitted := 0, 0
		prevDenied := false
		for i := range 6 {
			w := a88Do(h, http.MethodPost)
			if w.Code == http.StatusOK {
				admitted++
				if prevDenied {
					deniedThenAdmitted++
				}
				prevDenied = false
				continue // the next request, at once, is denied by "login"
			}
			prevDenied = true
			rl := w.Header().Get("RateLimit")
			secs, err := strconv.Atoi(w.Header().Get("Retry-After"))
			if w.Code != http.StatusTooManyRequests || err != nil || secs < 1 {
				t.Fatalf("shared=%v answer %d: %d, Retry-After %q", shared, i, w.Code, w.Header().Get("Retry-After"))
			}
			if !strings.Contains(rl, `"login";r=0`) {
				t.Fatalf("shared=%v answer %d: RateLimit %q does not list \"login\" as empty", shared, i, rl)
			}
			clk.Advance(time.Duration(secs) * time.Second)
		}
		if shared && admitted != 0 {
			t.Errorf("a 1/s burst-1 Tier inside its own 10/s Limiter admitted %d of 6; doc.go: it denies every request", admitted)
		}
		if !shared && (admitted != 3 || deniedThenAdmitted != 2) {
			t.Errorf("separate limiters: %d of 6 admitted, %d retries at Retry-After admitted; want 3 and 2 (every retry at Retry-After admitted)", admitted, deniedThenAdmitted)
		}
	}
}
