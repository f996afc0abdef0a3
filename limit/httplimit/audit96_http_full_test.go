package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// A limiter past its capacity (limit's doc: the Buckets engine's
// eviction floor, the count-min's collisions) denies some fresh clients
// for debt that is not theirs ("a collision can only deny a key early,
// never admit it past its own limit"; the durations are "only late,
// never early under collisions"). Through the middleware such a denial
// is still a usable answer: its fields are the limiter's decision
// (Retry-After = ceil(RetryAfter), t = ceil(NextAfter)), Stats reports
// the saturation, and a retry at Retry-After, with nothing else
// written meanwhile, is admitted.
func TestAudit96HTTPFullLimiterDenialsRetry(t *testing.T) {
	for _, e := range []limit.Engine{limit.Buckets, limit.CountMin} {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_000_000)
		opts := []limit.Option{limit.WithClock(clk), limit.WithSeed(96), limit.WithName("api"), limit.WithEngine(e)}
		if e == limit.Buckets {
			opts = append(opts, limit.WithCapacity(16, 0.01))
		} else {
			opts = append(opts, limit.WithSize(2, 64), limit.WithPeriod(1000*time.Hour))
		}
		l, err := limit.New(10, 5, opts...)
		if err != nil {
			t.Fatal(err)
		}
		g := a96NewRig(t, l, httplimit.WithKey(httplimit.Header("X-Client")))
		do := func(client string) *httptest.ResponseRecorder {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.Header.Set("X-Client", client)
			w := httptest.NewRecorder()
			g.h.ServeHTTP(w, r)
			return w
		}
		denied, fill := 0, 0
		for v := 0; v < 300 && denied < 20; v++ {
			// Fill the engine with keys at full debt, at this instant.
			for range 400 {
				l.AllowN(clk.Now(), "hog-"+strconv.Itoa(fill), 5)
				fill++
			}
			if v == 0 {
				if s := l.Stats().Saturation; !(s > 0) {
					t.Errorf("%v: Saturation %v with %d keys at full debt on a small engine", e, s, fill)
				}
			}
			client := "victim-" + strconv.Itoa(v)
			w := do(client)
			a96Check(t, e.String()+" "+client, w, g.last, true)
			if w.Code == http.StatusOK {
				continue
			}
			denied++
			secs, _ := strconv.Atoi(w.Header().Get("Retry-After"))
			clk.Advance(time.Duration(secs) * time.Second)
			if w := do(client); w.Code != http.StatusOK {
				t.Errorf("%v: %s denied for others' debt, retried at Retry-After %d s: %d, RateLimit %q", e, client, secs, w.Code, w.Header().Get("RateLimit"))
			}
		}
		if denied == 0 {
			t.Errorf("%v: no fresh client denied: the engine is not full", e)
		}
	}
}
