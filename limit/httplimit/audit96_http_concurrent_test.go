package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// Racing one-token requests of one client on a frozen clock, through the
// middleware, on a Tier with a RejectCost: strict decisions never admit
// past the burst on either engine, and on the count-min (TryUpdate,
// "exact under contention") they admit exactly the burst; a Multi never
// admits past its narrowest window. Every 429 carries Retry-After and
// every answer both fields; the handler runs exactly for the 200s.
func TestAudit96HTTPConcurrentTierAndMulti(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		for _, e := range []limit.Engine{limit.Buckets, limit.CountMin} {
			clk := sketchtest.NewFakeClock()
			clk.Set(4_000_000)
			opts := func(name string) []limit.Option {
				o := []limit.Option{limit.WithClock(clk), limit.WithName(name), limit.WithEngine(e), limit.WithSeed(9),
					limit.WithRejectCost(1), limit.WithCapacity(64, 0.01)}
				if e == limit.CountMin {
					o = append(o, limit.WithPeriod(1000*time.Hour))
				}
				return o
			}
			base, err := limit.New(20, 40, append(opts("base"), limit.WithMaxDebt(50))...)
			if err != nil {
				t.Fatal(err)
			}
			tier, err := base.Tier("plan", 5, 12) // 12 tokens of 200 ms: 2.4 s of the base's 2.5 s
			if err != nil {
				t.Fatal(err)
			}
			m, err := limit.NewMulti(limit.MustNew(50, 30, opts("wide")...), limit.MustNew(5, 9, opts("narrow")...))
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				name  string
				l     httplimit.Limiter
				burst int64
				exact bool
			}{
				{"tier", tier, 12, e == limit.CountMin},
				{"multi", m, 9, false},
			} {
				var calls atomic.Int64
				h := httplimit.Wrap(c.l, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { calls.Add(1) }))
				var ok, denied atomic.Int64
				var wg sync.WaitGroup
				for range 48 {
					wg.Go(func() {
						r := httptest.NewRequest(http.MethodGet, "/", nil)
						r.RemoteAddr = "203.0.113.50:9"
						w := httptest.NewRecorder()
						h.ServeHTTP(w, r)
						if w.Header().Get("RateLimit") == "" || w.Header().Get("RateLimit-Policy") == "" {
							t.Errorf("%v %s: answer without fields: %v", e, c.name, w.Header())
						}
						switch w.Code {
						case http.StatusOK:
							ok.Add(1)
						case http.StatusTooManyRequests:
							denied.Add(1)
							if w.Header().Get("Retry-After") == "" {
								t.Errorf("%v %s: 429 without Retry-After", e, c.name)
							}
						default:
							t.Errorf("%v %s: status %d", e, c.name, w.Code)
						}
					})
				}
				wg.Wait()
				if ok.Load() > c.burst || c.exact && ok.Load() != c.burst || ok.Load() == 0 {
					t.Errorf("%v %s: %d of 48 racing one-token requests admitted; burst %d (exact: %v)", e, c.name, ok.Load(), c.burst, c.exact)
				}
				if calls.Load() != ok.Load() || ok.Load()+denied.Load() != 48 {
					t.Errorf("%v %s: handler ran %d times for %d admitted, %d denied", e, c.name, calls.Load(), ok.Load(), denied.Load())
				}
			}
		}
	})
}
