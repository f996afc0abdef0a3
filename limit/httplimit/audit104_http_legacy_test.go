package httplimit

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestAudit104HttpFixedLegacyFieldsOneMiddleware (audit 104; fixed at stop 60, the text
// below says what was wrong).
//
// Doc says: doc.go: "The legacy fields keep the least Remaining of the
// middlewares that set them"; SetHeaders' code comment: "One value each:
// the least Remaining of the middlewares that set them (an outer one's
// stay when they say less)"; its doc: "the legacy fields keep the least
// Remaining (over every line and spelling, as one line)". WithLegacyHeaders:
// X-RateLimit-Limit is the burst, Reset the seconds until full — the
// three describe one limiter.
//
// Code does: collapses only X-RateLimit-Remaining to one line (the
// least); X-RateLimit-Limit and X-RateLimit-Reset keep every line and
// spelling, merged under the canonical key in map order. Outer lines
// (Limit 100, Remaining 50, Reset 1) and (Limit 10, Remaining 0, Reset
// 60, another spelling), this decision Remaining 3: the answer says
// X-RateLimit-Remaining: 0 with X-RateLimit-Limit "100" and "10" and
// X-RateLimit-Reset "1" and "60" (in either order from run to run): a
// client reading the first line of each sees Limit 100, Remaining 0,
// Reset 1 — the full bucket of one middleware and the empty one of
// another, told it refills in 1 s when the empty one needs 60.
//
// Minimal repro: h["X-Ratelimit-Limit"]={"100"}, h["X-Ratelimit-Remaining"]
// ={"50"}, h["X-Ratelimit-Reset"]={"1"}, h["x-ratelimit-limit"]={"10"},
// h["x-ratelimit-remaining"]={"0"}, h["x-ratelimit-reset"]={"60"};
// SetHeaders(h, Decision{Allowed: true, Burst: 5, Remaining: 3}).
//
// Suggested fix: when theirs stays, also set Limit and Reset as one line
// each, from the same set as the least Remaining (pair the i-th lines of
// the three fields after fieldLines; if they cannot be paired, the
// least Limit and the largest Reset, which never promise more than any
// middleware does).
func TestAudit104HttpFixedLegacyFieldsOneMiddleware(t *testing.T) {
	m, d := a104Mid(t, time.Second, WithLegacyHeaders(true))
	d.Allowed, d.RetryAfter, d.NextAfter, d.Remaining, d.Burst = true, 0, 0, 3, 5
	h := http.Header{}
	h["X-Ratelimit-Limit"] = []string{"100"}
	h["X-Ratelimit-Remaining"] = []string{"50"}
	h["X-Ratelimit-Reset"] = []string{"1"}
	h["x-ratelimit-limit"] = []string{"10"}
	h["x-ratelimit-remaining"] = []string{"0"}
	h["x-ratelimit-reset"] = []string{"60"}
	m.SetHeaders(h, d)
	lim, rem, reset := h.Values("X-Ratelimit-Limit"), h.Values("X-Ratelimit-Remaining"), h.Values("X-Ratelimit-Reset")
	if len(lim) != 1 || len(rem) != 1 || len(reset) != 1 || lim[0] != "10" || rem[0] != "0" || reset[0] != "60" {
		t.Errorf("legacy fields of (100, 50, 1) and (10, 0, 60) with this decision's (5, 3, ...): got Limit %q, Remaining %q, Reset %q; want one line each, 10, 0, 60 (the middleware whose Remaining is the least)",
			lim, rem, reset)
	}
}

// TestAudit104HttpLegacyRemainingLines (passes): Remaining lines that
// are negative, signed, padded, non-integer or beyond int: the least
// readable one (Atoi) stays as one line when it is not more than this
// decision's; none readable, this one's three fields are set.
func TestAudit104HttpLegacyRemainingLines(t *testing.T) {
	m, d := a104Mid(t, time.Second, WithLegacyHeaders(true))
	d.Allowed, d.RetryAfter, d.NextAfter, d.Remaining, d.Burst = true, 0, 0, 3, 5
	for _, c := range []struct {
		lines []string
		want  string
		ours  bool
	}{
		{[]string{"-1"}, "0", false}, // the least, written as 0 since stop 65 (no sign)
		{[]string{"+2"}, "2", false},
		{[]string{" 2\t"}, "2", false},
		{[]string{"3"}, "3", false},
		{[]string{"4"}, "3", true},
		{[]string{"1.5"}, "3", true},
		{[]string{"abc", "x"}, "3", true},
		{[]string{"99999999999999999999"}, "3", true},
		{[]string{"", "7", "2", "oops"}, "2", false},
	} {
		h := http.Header{}
		h["X-Ratelimit-Limit"] = []string{"9"}
		h["X-Ratelimit-Reset"] = []string{"9"}
		h["x-ratelimit-remaining"] = append([]string(nil), c.lines...)
		m.SetHeaders(h, d)
		rem := h.Values("X-Ratelimit-Remaining")
		if len(rem) != 1 || rem[0] != c.want {
			t.Errorf("Remaining lines %q: got %q; want %q", c.lines, rem, c.want)
		}
		if _, ok := h[strings.ToLower("X-RateLimit-Remaining")]; ok { // the other spelling, on purpose
			t.Errorf("Remaining lines %q: the other spelling stays", c.lines)
		}
		wantLim := "9"
		if c.ours {
			wantLim = "5"
		}
		if got := h.Values("X-Ratelimit-Limit"); len(got) != 1 || got[0] != wantLim {
			t.Errorf("Remaining lines %q: Limit %q; want %q", c.lines, got, wantLim)
		}
	}
}
