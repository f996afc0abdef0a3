package httplimit_test

import (
	"sync"
	"testing"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// Stacked middlewares under concurrent requests of one key, the clock
// frozen: the outer one (burst 50) admits exactly 50 of 120, the inner
// one (a Multi of bursts 20 and 30) exactly 20 of those; every answer is
// a valid List naming the outer policy and, when the inner one decided,
// its windows, each once; every inner denial's Retry-After is set.
func TestAudit57StackedConcurrent(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		clk := sketchtest.NewFakeClock()
		outer, err := httplimit.New(limit.MustNew(1, 50, limit.WithName("global"), limit.WithClock(clk)), httplimit.WithLegacyHeaders(true))
		if err != nil {
			t.Fatal(err)
		}
		multi, err := limit.NewMulti(limit.MustNew(1, 20, limit.WithName("a,b"), limit.WithClock(clk)),
			limit.MustNew(1, 30, limit.WithName(`q"\`), limit.WithClock(clk)))
		if err != nil {
			t.Fatal(err)
		}
		inner, err := outer.With(multi, httplimit.WithLegacyHeaders(false))
		if err != nil {
			t.Fatal(err)
		}
		h := outer.Handler(inner.Handler(ok))
		const n = 120
		codes := make([]int, n)
		policies := make([]int, n)
		bad := make([]string, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				w := a57Get(h, "192.0.2.30:1")
				codes[i] = w.Code
				items, err := a57ParseList(w.Header().Get("RateLimit-Policy"))
				if err != nil {
					bad[i] = err.Error()
					return
				}
				policies[i] = len(items)
				rl, err := a57ParseList(w.Header().Get("RateLimit"))
				if err != nil || len(rl) != len(items)-1 && len(items) == 3 || len(rl) != 1 && len(items) == 1 {
					bad[i] = "RateLimit " + w.Header().Get("RateLimit") + " with RateLimit-Policy " + w.Header().Get("RateLimit-Policy")
				}
				if w.Code == 429 && w.Header().Get("Retry-After") == "" {
					bad[i] = "429 without Retry-After"
				}
			})
		}
		wg.Wait()
		ok200, innerDenied, outerDenied := 0, 0, 0
		for i := range n {
			if bad[i] != "" {
				t.Fatalf("answer %d: %s", i, bad[i])
			}
			switch {
			case codes[i] == 200 && policies[i] == 3:
				ok200++
			case codes[i] == 429 && policies[i] == 3:
				innerDenied++
			case codes[i] == 429 && policies[i] == 1:
				outerDenied++
			default:
				t.Fatalf("answer %d: %d with %d policies", i, codes[i], policies[i])
			}
		}
		if ok200 != 20 || innerDenied != 30 || outerDenied != 70 {
			t.Fatalf("admitted %d, denied by the inner %d, by the outer %d; want 20, 30, 70", ok200, innerDenied, outerDenied)
		}
	})
}
