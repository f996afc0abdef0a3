package httplimit_test

import (
	"math/rand"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// r is exact: right after an answer with r=k (and no time passing), k
// one-token requests are admitted and the next is denied; and after t
// seconds r has grown. Over exact and inexact limiters and a Multi.
func TestAudit26RemainingIsExact(t *testing.T) {
	type mk func(clk *sketchtest.FakeClock) httplimit.Limiter
	for i, build := range []mk{
		func(clk *sketchtest.FakeClock) httplimit.Limiter { return limit.MustNew(3, 7, limit.WithClock(clk)) },
		func(clk *sketchtest.FakeClock) httplimit.Limiter {
			return limit.MustNew(limit.Every(999*time.Millisecond), 300, limit.WithClock(clk))
		},
		func(clk *sketchtest.FakeClock) httplimit.Limiter {
			return limit.MustNew(limit.Limit(1.2345), 40, limit.WithClock(clk))
		},
		func(clk *sketchtest.FakeClock) httplimit.Limiter {
			return audit26Multi(t, limit.MustNew(2, 5, limit.WithName("a"), limit.WithClock(clk)),
				limit.MustNew(0.5, 9, limit.WithName("b"), limit.WithClock(clk)))
		},
	} {
		clk := sketchtest.NewFakeClock()
		l := build(clk)
		var cost atomic.Int64
		h := httplimit.Wrap(l, ok, httplimit.WithCost(func(*http.Request) int { return int(cost.Load()) }))
		serve := func(n int) *httptest.ResponseRecorder {
			cost.Store(int64(n))
			w := httptest.NewRecorder()
			h.ServeHTTP(w, audit26Req("192.0.2.1:1"))
			return w
		}
		rng := rand.New(rand.NewSource(int64(i)))
		for step := 0; step < 150; step++ {
			w := serve(1 + rng.Intn(3))
			_, p, okp := audit26Item(w.Header().Get("RateLimit"))
			if !okp {
				t.Fatalf("%d: RateLimit %q", i, w.Header().Get("RateLimit"))
			}
			if rng.Intn(4) == 0 {
				r := int(p["r"])
				for k := 0; k < r; k++ {
					if serve(1).Code != 200 {
						t.Fatalf("case %d step %d: r=%d but request %d of 1 was denied", i, step, r, k+1)
					}
				}
				if w := serve(1); w.Code == 200 {
					t.Fatalf("case %d step %d: r=%d but request %d was admitted", i, step, r, r+1)
				}
			} else if tt, has := p["t"]; has && rng.Intn(2) == 0 {
				before := p["r"]
				clk.Advance(time.Duration(tt) * time.Second)
				cost.Store(1)
				w2 := httptest.NewRecorder()
				// Read r without debiting: a request denied costs nothing
				// only if RejectCost is 0 (the default), so use a cost
				// that cannot fit.
				cost.Store(1 << 30)
				h.ServeHTTP(w2, audit26Req("192.0.2.1:1"))
				_, p2, _ := audit26Item(w2.Header().Get("RateLimit"))
				if p2["r"] <= before {
					t.Fatalf("case %d step %d: r=%d t=%d, yet %d s later r=%d (%s)", i, step, before, tt, tt, p2["r"], strconv.Quote(w2.Header().Get("RateLimit")))
				}
			}
			clk.Advance(time.Duration(rng.Intn(500)) * time.Millisecond)
		}
	}
}
