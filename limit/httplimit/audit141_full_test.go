package httplimit_test

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// A limiter that is full (a tiny count-min, every cell at MaxDebt from
// other keys: Stats().Saturation says so): what a fresh client sees over
// HTTP/1.1 and HTTP/2 is an ordinary denial, 429 with RateLimit r=0 and
// its t, Retry-After >= t, well-formed fields, the plain-text body, and
// no mention of saturation or of its key; and Retry-After is honest: the
// same request that many seconds later, nothing else happening, is
// admitted.
func TestAudit141FullLimiterClientView(t *testing.T) {
	a141NoLeak(t)
	clk := sketchtest.NewFakeClock()
	l := limit.MustNew(1, 2, limit.WithName("p"), limit.WithClock(clk), limit.WithSize(2, 16), limit.WithSeed(141))
	for i := range 400 {
		for range 4 {
			l.Allow(fmt.Sprintf("filler-%d", i))
		}
	}
	if s := l.Stats().Saturation; s < 0.9 {
		t.Fatalf("Saturation %v after filling; want the limiter full", s)
	}
	h := httplimit.Wrap(l, a141OK, httplimit.WithKey(httplimit.Header("K")), httplimit.WithLegacyHeaders(true))
	for _, s := range a141Servers(t, h) {
		denied := 0
		for i := range 20 {
			key := fmt.Sprintf("%s-fresh-%d", s.name, i)
			res, body := a141Get(t, s, "GET", "/", http.Header{"K": {key}})
			a141CheckFields(t, s.name, res.Header)
			if res.StatusCode == 200 {
				continue
			}
			denied++
			ra, err := strconv.Atoi(res.Header.Get("Retry-After"))
			if res.StatusCode != 429 || err != nil || ra < 1 || body != "rate limit exceeded; retry after the Retry-After delay\n" ||
				res.Header.Get("X-RateLimit-Remaining") != "0" || res.Header.Get("RateLimit-Policy") != `"p";q=2;w=2` {
				t.Errorf("%s %s: %d %q %v", s.name, key, res.StatusCode, body, res.Header)
			}
			var r, tt int
			if n, _ := fmt.Sscanf(res.Header.Get("RateLimit"), `"p";r=%d;t=%d`, &r, &tt); n != 2 || r != 0 || tt < 1 || tt > ra {
				t.Errorf("%s: RateLimit %q with Retry-After %d", s.name, res.Header.Get("RateLimit"), ra)
			}
			clk.Advance(time.Duration(ra) * time.Second)
			res, _ = a141Get(t, s, "GET", "/", http.Header{"K": {key}})
			if res.StatusCode != 200 {
				t.Errorf("%s %s: retry after Retry-After %d: %d", s.name, key, ra, res.StatusCode)
			}
			// Full again for the next fresh key.
			for j := range 400 {
				for range 4 {
					l.Allow(fmt.Sprintf("filler-%d", j))
				}
			}
		}
		if denied == 0 {
			t.Errorf("%s: a full limiter denied no fresh key", s.name)
		}
		t.Logf("%s: %d of 20 fresh keys denied", s.name, denied)
	}
}
