package httplimit_test

import (
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

// TestAudit51RetryAfterUnderHugeSteps: the middleware forwards the
// limiter's decisions under a clock stepping back by up to a year and
// forward by 2^29..2^32 ms and years: a 429's Retry-After is the
// Decision's RetryAfter in whole seconds rounded up (at least 1), which
// includes the lag after a step back, and once the clock has moved that
// many seconds the same request is admitted (httplimit/doc.go: "A
// denial is 429 with Retry-After in whole seconds, RetryAfter rounded
// up"; limit's waits are never early).
func TestAudit51RetryAfterUnderHugeSteps(t *testing.T) {
	for _, eng := range []limit.Engine{limit.Buckets, limit.CountMin} {
		clk := limittest.NewFakeClock()
		clk.Set(1_700_000_000_000)
		l := limit.MustNew(2, 4, limit.WithClock(clk), limit.WithEngine(eng), limit.WithSeed(51))
		var last limit.Decision
		mw, err := httplimit.New(l, httplimit.WithKey(func(*http.Request) (string, error) { return "k", nil }),
			httplimit.WithHook(func(_ *http.Request, _ string, d limit.Decision) { last = d }))
		if err != nil {
			t.Fatal(err)
		}
		h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
		serve := func() *httptest.ResponseRecorder {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
			return rec
		}
		rng := rand.New(rand.NewPCG(51, 1))
		denials, lagged := 0, 0
		for step := 0; step < 600; step++ {
			switch rng.IntN(6) {
			case 0:
				clk.Set(clk.NowMillis() - []int64{700, 3_600_000, 86_400_000, 365 * 86_400_000}[rng.IntN(4)])
			case 1:
				clk.Set(clk.NowMillis() + []int64{1 << 29, 1 << 30, 1 << 31, 1 << 32, 2 * 365 * 86_400_000}[rng.IntN(5)])
			default:
				clk.Set(clk.NowMillis() + int64(rng.IntN(600)))
			}
			rec := serve()
			if rec.Code != http.StatusTooManyRequests {
				continue
			}
			denials++
			ra, err := strconv.ParseInt(rec.Header().Get("Retry-After"), 10, 64)
			want := max(int64((last.RetryAfter+time.Second-1)/time.Second), 1)
			if err != nil || ra != want {
				t.Fatalf("%v step %d: Retry-After %q, want %d (RetryAfter %v)", eng, step, rec.Header().Get("Retry-After"), want, last.RetryAfter)
			}
			if ra > 3 {
				lagged++
			}
			clk.Advance(time.Duration(ra) * time.Second)
			if rec := serve(); rec.Code != http.StatusOK {
				t.Fatalf("%v step %d: denied again %d s later (Retry-After %d, RetryAfter %v): %v", eng, step, ra, ra, last.RetryAfter, rec.Header())
			}
		}
		if denials < 50 || lagged < 5 {
			t.Fatalf("%v: only %d denials, %d with a lag", eng, denials, lagged)
		}
	}
}
