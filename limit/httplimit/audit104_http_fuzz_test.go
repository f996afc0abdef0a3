package httplimit

import (
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
)

var a104Sixty = regexp.MustCompile(`\b(\d\d:\d\d):60\b`)

// FuzzAudit104HttpRetryAfter (passes on its seeds): for any value v and
// any now (years 1900 to 9000):
//   - parseRetryAfter never panics; whole >= 0, 0 <= frac < 1e9;
//   - a readable v's retryAfterText reads back as the same delay (below
//     int64's end), and is all digits or an IMF-fixdate;
//   - a date with second 60 is its second 59 plus one second;
//   - an rfc850 date lands in (now - 50y - 1d, now + 50y + 1d];
//   - through SetHeaders and deny (wall clock): one Retry-After line,
//     readable, not earlier than this denial's 1 s, the body its delay.
func FuzzAudit104HttpRetryAfter(f *testing.F) {
	base := int64(1796619600) // 2026-12-07T05:00:00Z
	for _, s := range []string{
		"", "0", " 0077 ", "999999999999999", "1000000000000000", "9223372036854775807", "92233720368547758080",
		"Tue, 31 Dec 2030 23:59:60 GMT", "Tuesday, 31-Dec-30 23:59:60 GMT", "Tue Dec 31 23:59:60 2030",
		"Thursday, 29-Feb-72 23:59:60 GMT", "Friday, 01-Jan-77 00:00:00 GMT", "Thursday, 01-Jan-76 00:00:00 GMT",
		"Sun, 01 Jan 2060 23:60:60 GMT", "12:59:60 Sun, 01 Jan 2060 23:59:59 GMT", "Sun, 60 Jan 2060 00:00:00 GMT",
		"Fri, 31 Dec 9999 23:59:60 GMT", "Mon, 01 Jan 0001 00:00:60 GMT", "Sun Feb 29 23:59:60 2032", "\xff:60",
		"Mon, 12 Jan 2026 12:34:60 GMT", "10, 20",
	} {
		f.Add(s, base)
		f.Add(s, base+40*365*86400)
	}
	f.Add("Tuesday, 29-Feb-00 12:00:00 GMT", base-80*365*86400)
	lo := time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	hi := time.Date(9000, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	lim := limit.MustNew(1, 1)
	m, err := New(lim, WithProblemJSON(true))
	if err != nil {
		f.Fatal(err)
	}
	pol := lim.Policies()[0]
	d := limit.Decision{Limit: pol.Limit, Burst: pol.Burst, Policy: pol.Name, RetryAfter: time.Second, NextAfter: time.Second}
	f.Fuzz(func(t *testing.T, v string, sec int64) {
		if len(v) > 200 {
			return
		}
		if sec < lo || sec > hi {
			sec = lo + int64(uint64(sec)%uint64(hi-lo))
		}
		now := time.Unix(sec, 123_456_789).UTC()
		a, ok := parseRetryAfter(v, now)
		if !ok {
			return
		}
		if a.whole < 0 || a.frac < 0 || a.frac >= 1e9 {
			t.Fatalf("parseRetryAfter(%q) = %+v", v, a)
		}
		if at, ok := parseHTTPDate(v, now); ok && at.Year() > 9999 {
			return // TestAudit104HttpLeapSecondYear10000
		}
		txt := retryAfterText(v, now)
		if strings.Trim(txt, "0123456789") != "" {
			if _, err := time.Parse(http.TimeFormat, txt); err != nil {
				t.Fatalf("retryAfterText(%q) = %q: neither digits nor an IMF-fixdate", v, txt)
			}
		}
		if a.whole < math.MaxInt64 {
			if b, ok := parseRetryAfter(txt, now); !ok || b != a {
				t.Fatalf("retryAfterText(%q) = %q reads %+v, %v; v reads %+v", v, txt, b, ok, a)
			}
		}
		if at, ok := parseHTTPDate(v, now); ok {
			if loc := a104Sixty.FindStringSubmatchIndex(v); loc != nil {
				w := v[:loc[3]] + ":59" + v[loc[1]:]
				if at59, ok := parseHTTPDate(w, now); !ok || !at59.Add(time.Second).Equal(at) {
					t.Fatalf("%q = %v; %q = %v, %v", v, at, w, at59, ok)
				}
			}
			w := v
			if loc := a104Sixty.FindStringSubmatchIndex(v); loc != nil {
				w = v[:loc[3]] + ":59" + v[loc[1]:]
			}
			if _, err := time.Parse(a104RFC850, strings.Trim(w, " \t")); err == nil {
				if at.Before(now.AddDate(-50, 0, -1)) || at.After(now.AddDate(50, 0, 1)) {
					t.Fatalf("rfc850 %q at now %v = %v: not within 50 years", v, now, at)
				}
			}
		}
		// Through SetHeaders and deny, with the wall clock.
		for attempt := 0; attempt < 20; attempt++ {
			t0 := time.Now()
			rec := httptest.NewRecorder()
			rec.Header()["retry-after"] = []string{v}
			m.SetHeaders(rec.Header(), d)
			m.deny(rec, d)
			t1 := time.Now()
			if t0.Unix() != t1.Unix() {
				continue
			}
			vs := rec.Result().Header.Values("Retry-After")
			if len(vs) != 1 {
				t.Fatalf("pre %q: Retry-After %q", v, vs)
			}
			h, ok := parseRetryAfter(vs[0], t1)
			if !ok || !h.atLeast(1) || h.whole > maxSFInteger {
				t.Fatalf("pre %q: Retry-After %q reads %+v, %v", v, vs[0], h, ok)
			}
			var p Problem
			if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || p.RetryAfter == nil || *p.RetryAfter != h.whole {
				t.Fatalf("pre %q: header %q (%d s), body %s", v, vs[0], h.whole, rec.Body.String())
			}
			return
		}
	})
}
