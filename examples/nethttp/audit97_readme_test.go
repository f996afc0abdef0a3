package main

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/examples/internal/check"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit97ReadmeDocumentedExamplesHourlyCap (audit 97; documented at
// stop 59, the text below says what was wrong; the docs now say "up to
// 2000 in its first hour, then 1000 an hour", and the test asserts it).
// examples/doc.go:6-8 said: "every client ... gets 10 requests per second with
// bursts of 20 and at most 1000 per hour (a limit.Multi of two named
// windows)"; nethttp/main.go:2: "per client, 10/s with bursts of 20 and at
// most 1000/h". The hourly window is a token bucket of burst 1000 that
// refills 1000 per hour (check.Middlewares: MustNew(f.PerHour, 1000)), so
// a client that starts with a full bucket gets its 1000 at once and the
// refill on top: about 2000 in its first hour, not at most 1000.
//
// The server's limiters read the real clock, so the same Multi is built
// here on a fake clock from the flags' defaults, and checked to answer
// with the server's RateLimit-Policy first; then a client asks 10 times a
// second for exactly one hour.
func TestAudit97ReadmeDocumentedExamplesHourlyCap(t *testing.T) {
	d := check.Defaults()
	clk := sketchtest.NewFakeClock()
	multi, err := limit.NewMulti(
		limit.MustNew(d.PerSecond, 20, limit.WithName("per-second"), limit.WithClock(clk)),
		limit.MustNew(d.PerHour, 1000, limit.WithName("per-hour"), limit.WithClock(clk)))
	if err != nil {
		t.Fatal(err)
	}
	policy := func(h http.Handler) string {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "192.0.2.97:1"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Result().Header.Get("RateLimit-Policy")
	}
	mine, err := httplimit.New(multi)
	if err != nil {
		t.Fatal(err)
	}
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	if got, want := policy(mine.Handler(ok)), policy(handler(d)); got != want {
		t.Fatalf("the replica's policy %q is not the server's %q", got, want)
	}
	// A fresh client (not the one the policy probe used) at 10/s, within
	// the per-second window, for one hour.
	base := clk.Now()
	for hour, most := range []int{2000, 1000} {
		admitted := 0
		for i := 0; i < 36_000; i++ {
			clk.SetTime(base.Add(time.Duration(hour)*time.Hour + time.Duration(i)*100*time.Millisecond))
			if multi.AllowN(clk.Now(), "192.0.2.1", 1) {
				admitted++
			}
		}
		if admitted > most || admitted < most-2 {
			t.Errorf("a client at 10/s got %d requests admitted in hour %d; examples/doc.go: up to 2000 in its first hour, then 1000 an hour", admitted, hour+1)
		}
	}
}
