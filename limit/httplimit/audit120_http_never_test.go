package httplimit_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// Finding (audit 120). The package doc: "A request whose cost exceeds
// the burst can never be admitted: 429 without Retry-After, and the body
// says not to retry"; Middleware: "A request that can never be admitted
// (cost above the burst) is 429 without Retry-After"; WithDeniedHandler:
// "The header fields (RateLimit-Policy, RateLimit, Retry-After unless
// d.Never) are already set when f runs".
//
// Input: a Retry-After already in the response header when the
// middleware decides (an outer layer's, as SetHeaders' doc expects for
// denials: "one already set ... stays"), here "5" and a lower-case
// "retry-after: 7", and a request of cost 3 on a burst of 2 (Never).
//
// Observed: the 429 goes out with "Retry-After: 5" (resp. 7) while its
// body says "it can never be admitted: do not retry" and, with
// WithProblemJSON, the body has no retryAfter: SetHeaders leaves a
// preset Retry-After alone on a Never decision (it only touches the
// field when !d.Never), so a client that honours Retry-After retries a
// request that can never be admitted, in a loop. A denied handler sees
// Retry-After on a Never decision too.
//
// Suggested fix: in SetHeaders, on a denial with d.Never, remove every
// line and spelling of Retry-After (fieldLines(h, "Retry-After") then
// h.Del("Retry-After")), or document that a preset one is kept.
func TestAudit120FixedNeverKeepsPresetRetryAfter(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	cost3 := httplimit.WithCost(func(*http.Request) int { return 3 })
	for _, problem := range []bool{false, true} {
		for _, preset := range []struct{ key, val string }{{"Retry-After", "5"}, {"retry-after", "7"}} {
			m, err := httplimit.New(limit.MustNew(1, 2, limit.WithClock(clk)), cost3, httplimit.WithProblemJSON(problem))
			if err != nil {
				t.Fatal(err)
			}
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = "192.0.2.1:1"
			w := httptest.NewRecorder()
			w.Header()[preset.key] = []string{preset.val}
			m.Handler(ok).ServeHTTP(w, r)
			if w.Code != http.StatusTooManyRequests {
				t.Fatalf("cost 3 > burst 2: status %d", w.Code)
			}
			if problem {
				var p httplimit.Problem
				if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || p.RetryAfter != nil {
					t.Fatalf("problem %+v, %v: want no retryAfter (Never)", p, err)
				}
			}
			if ra := w.Header().Values("Retry-After"); len(ra) != 0 || len(w.Header()[preset.key]) != 0 {
				t.Errorf("problem %v, preset %s: %s: a Never 429 (body %q) carries Retry-After %q",
					problem, preset.key, preset.val, w.Body.String(), w.Header()[preset.key])
			}
		}
	}
	// The denied handler sees it too.
	var seen []string
	m, err := httplimit.New(limit.MustNew(1, 2, limit.WithClock(clk)), cost3,
		httplimit.WithDeniedHandler(func(w http.ResponseWriter, r *http.Request, d limit.Decision) {
			if !d.Never {
				t.Errorf("cost 3 > burst 2 not Never: %+v", d)
			}
			seen = w.Header().Values("Retry-After")
			w.WriteHeader(http.StatusTooManyRequests)
		}))
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "192.0.2.1:1"
	w := httptest.NewRecorder()
	w.Header().Set("Retry-After", "5")
	m.Handler(ok).ServeHTTP(w, r)
	if len(seen) != 0 {
		t.Errorf("WithDeniedHandler on a Never decision sees Retry-After %q; the doc: \"Retry-After unless d.Never\"", seen)
	}
}
