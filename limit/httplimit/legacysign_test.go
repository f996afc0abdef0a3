package httplimit_test

import (
	"net/http"
	"testing"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
)

// TestLegacyOuterNegativeWrittenAsZero: an outer layer's negative
// X-RateLimit-Remaining, -Limit or -Reset (a sign these fields do not
// hold) is written as 0 where it stays, as a negative Remaining of the
// middleware's own Limiter is.
func TestLegacyOuterNegativeWrittenAsZero(t *testing.T) {
	l, err := limit.New(1, 5)
	if err != nil {
		t.Fatal(err)
	}
	m, err := httplimit.New(l, httplimit.WithLegacyHeaders(true))
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set("X-RateLimit-Remaining", "-3")
	h.Set("X-RateLimit-Limit", "-7")
	h.Set("X-RateLimit-Reset", "-2")
	m.SetHeaders(h, limit.Decision{Allowed: true, Limit: 1, Burst: 5, Remaining: 4})
	for _, f := range []string{"X-RateLimit-Remaining", "X-RateLimit-Limit", "X-RateLimit-Reset"} {
		if got := h.Values(f); len(got) != 1 || got[0] != "0" {
			t.Errorf("%s = %q; want [\"0\"]", f, got)
		}
	}
}
