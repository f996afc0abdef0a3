package httplimit_test

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit52MultiConcurrentSetLimit: requests through a Multi of two
// count-min windows while both windows' rates and bursts flip (and a
// With'd middleware over one window shares the key function), at
// GOMAXPROCS 1, 2, 4 and 8 (run under -race): every answer has a
// two-item RateLimit-Policy naming a then b with q one of the bursts the
// window had, a RateLimit naming one of them with r <= its q, and a
// denial's Retry-After; no data race.
func TestAudit52MultiConcurrentSetLimit(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		a := limit.MustNew(20, 10, limit.WithName("a"), limit.WithEngine(limit.CountMin), limit.WithMaxDebt(40))
		b := limit.MustNew(5, 20, limit.WithName("b"), limit.WithEngine(limit.CountMin), limit.WithMaxDebt(40))
		multi, err := limit.NewMulti(a, b)
		if err != nil {
			t.Fatal(err)
		}
		m, err := httplimit.New(multi, httplimit.WithKey(httplimit.Header("X-K")))
		if err != nil {
			t.Fatal(err)
		}
		m2, err := m.With(a)
		if err != nil {
			t.Fatal(err)
		}
		h, h2 := m.Handler(ok), m2.Handler(ok)
		qs := map[string]map[int64]bool{"a": {10: true, 12: true}, "b": {20: true, 15: true}}
		var stop atomic.Bool
		var wg sync.WaitGroup
		errs := make(chan string, 8)
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 400; i++ {
					hh, single := h, i%5 == 0
					if single {
						hh = h2
					}
					w := get(hh, "192.0.2.1:1", "X-K", fmt.Sprint("k", g, i%3))
					pol := w.Header().Get("RateLimit-Policy")
					items := strings.Split(pol, ", ")
					if single {
						items = append(items, `"b";q=20;w=4`)
					}
					bad := len(items) != 2
					for j, it := range items {
						if bad {
							break
						}
						n, p, okp := audit26Item(it)
						bad = !okp || n != []string{"a", "b"}[j] || !qs[n][p["q"]] || p["w"] < 1
					}
					n, p, okr := audit26Item(w.Header().Get("RateLimit"))
					bad = bad || !okr || qs[n] == nil || p["r"] > 20
					if w.Code == 429 && w.Header().Get("Retry-After") == "" {
						bad = true
					}
					if bad {
						select {
						case errs <- fmt.Sprintf("%d %q %q %q", w.Code, pol, w.Header().Get("RateLimit"), w.Header().Get("Retry-After")):
						default:
						}
						return
					}
				}
			}()
		}
		var flip sync.WaitGroup
		flip.Add(1)
		go func() {
			defer flip.Done()
			for i := 0; !stop.Load(); i++ {
				if i%2 == 0 {
					_ = a.SetBurst(12)
					_ = b.SetLimit(4)
					_ = b.SetBurst(15)
				} else {
					_ = a.SetBurst(10)
					_ = b.SetLimit(5)
					_ = b.SetBurst(20)
				}
			}
		}()
		wg.Wait()
		stop.Store(true)
		flip.Wait()
		select {
		case e := <-errs:
			t.Fatal(e)
		default:
		}
	})
}
