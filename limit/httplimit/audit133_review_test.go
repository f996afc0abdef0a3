package httplimit_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
)

// TestAudit133SetHeadersNegativeRemaining: SetHeaders doc (stop 64): "A
// negative d.Remaining (a Limiter breaking Decision's contract) is
// written as 0: the fields hold no sign." Called directly (not through
// ServeHTTP, which audit 130 covers): r=0 in RateLimit and
// X-RateLimit-Remaining 0, on an allowed and a denied decision; a stacked
// outer value above 0 gives way to it and one of 0 stays; a
// non-negative Remaining is written as it is.
func TestAudit133SetHeadersNegativeRemaining(t *testing.T) {
	l := limit.MustNew(10, 5, limit.WithName("p"))
	m, err := httplimit.New(l, httplimit.WithLegacyHeaders(true))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		d     limit.Decision
		outer string
		wantR string
	}{
		{limit.Decision{Allowed: true, Limit: 10, Burst: 5, Policy: "p", Remaining: -3, ResetAfter: time.Second}, "", "0"},
		{limit.Decision{Allowed: false, Limit: 10, Burst: 5, Policy: "p", Remaining: -1, RetryAfter: time.Second, ResetAfter: time.Second, NextAfter: time.Second}, "", "0"},
		{limit.Decision{Allowed: true, Limit: 10, Burst: 5, Policy: "p", Remaining: -7, ResetAfter: time.Second}, "2", "0"},
		{limit.Decision{Allowed: true, Limit: 10, Burst: 5, Policy: "p", Remaining: -7, ResetAfter: time.Second}, "0", "0"},
		{limit.Decision{Allowed: true, Limit: 10, Burst: 5, Policy: "p", Remaining: 4, ResetAfter: time.Second}, "", "4"},
		{limit.Decision{Allowed: true, Limit: 10, Burst: 5, Policy: "p", Remaining: 0, ResetAfter: time.Second}, "", "0"},
	} {
		h := http.Header{}
		if c.outer != "" {
			h.Set("X-RateLimit-Remaining", c.outer)
		}
		m.SetHeaders(h, c.d)
		rl := h.Get("RateLimit")
		if !strings.Contains(rl, ";r="+c.wantR) || strings.Contains(rl, "r=-") {
			t.Errorf("Remaining %d: RateLimit %q, want r=%s", c.d.Remaining, rl, c.wantR)
		}
		if got := h.Values("X-RateLimit-Remaining"); len(got) != 1 || got[0] != c.wantR {
			t.Errorf("Remaining %d (outer %q): X-RateLimit-Remaining %q, want %q", c.d.Remaining, c.outer, got, c.wantR)
		}
	}
}
