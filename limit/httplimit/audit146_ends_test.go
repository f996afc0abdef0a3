package httplimit_test

import (
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// TestAudit146HeadersAtClockEndsHold: a middleware over limiters (both
// engines, and a Multi of two) whose fake clock jumps between the ends
// of int64 ms, backwards included (a lag of up to 2^64 ms, whose
// durations saturate at InfDuration): every 429 carries Retry-After as
// 1 to 15 digits, >= 1; every RateLimit field's r and t are non-negative
// Integers of at most 15 digits (RFC 9651), and X-RateLimit-Reset too.
func TestAudit146HeadersAtClockEndsHold(t *testing.T) {
	ends := []int64{math.MinInt64, -1 << 40, -1, 0, 1 << 40, math.MaxInt64 - 1000, math.MaxInt64}
	digits := regexp.MustCompile(`^[0-9]{1,15}$`)
	param := regexp.MustCompile(`;([rt])=([^;,]*)`)
	for _, eng := range []limit.Engine{limit.CountMin, limit.Buckets} {
		for _, multi := range []bool{false, true} {
			for _, start := range ends {
				clk := limittest.NewFakeClock()
				clk.Set(start)
				l, err := limit.New(10, 3, limit.WithClock(clk), limit.WithEngine(eng), limit.WithName("fast"))
				if err != nil {
					t.Fatal(err)
				}
				var lim httplimit.Limiter = l
				if multi {
					l2, err := limit.New(limit.Every(1e9), 5, limit.WithClock(clk), limit.WithName("slow"))
					if err != nil {
						t.Fatal(err)
					}
					m, err := limit.NewMulti(l, l2)
					if err != nil {
						t.Fatal(err)
					}
					lim = m
				}
				h := httplimit.Wrap(lim, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), httplimit.WithLegacyHeaders(true))
				for _, to := range ends {
					clk.Set(to)
					for range 6 {
						w := httptest.NewRecorder()
						h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
						where := func() string {
							return "engine " + eng.String() + " multi " + map[bool]string{true: "yes", false: "no"}[multi]
						}
						if w.Code == http.StatusTooManyRequests {
							if ra := w.Header().Get("Retry-After"); !digits.MatchString(ra) || ra == "0" {
								t.Errorf("%s, New %d, clock %d: Retry-After %q", where(), start, to, ra)
							}
						}
						for _, f := range w.Header().Values("RateLimit") {
							for _, m := range param.FindAllStringSubmatch(f, -1) {
								if !digits.MatchString(m[2]) {
									t.Errorf("%s, New %d, clock %d: RateLimit %q: %s=%q", where(), start, to, f, m[1], m[2])
								}
							}
						}
						if x := w.Header().Get("X-RateLimit-Reset"); x != "" && !digits.MatchString(x) {
							t.Errorf("%s, New %d, clock %d: X-RateLimit-Reset %q", where(), start, to, x)
						}
					}
				}
			}
		}
	}
}
