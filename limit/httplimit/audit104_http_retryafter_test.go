package httplimit

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
)

// a104Mid is a Middleware over a 1/s burst-1 limiter with problem+json
// (and opts), and a denial of it waiting ra.
func a104Mid(t *testing.T, ra time.Duration, opts ...Option) (*Middleware, limit.Decision) {
	t.Helper()
	lim := limit.MustNew(1, 1)
	m, err := New(lim, append([]Option{WithProblemJSON(true)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	p := lim.Policies()[0]
	return m, limit.Decision{Limit: p.Limit, Burst: p.Burst, Policy: p.Name, RetryAfter: ra, NextAfter: ra}
}

// a104Deny runs SetHeaders and deny on a recorder already holding the
// Retry-After lines pre; it returns the one Retry-After line, the body's
// retryAfter and the wall second (Unix) both ran in, redoing a run that
// straddled a wall second.
func a104Deny(t *testing.T, m *Middleware, d limit.Decision, pre []string) (string, int64, time.Time) {
	t.Helper()
	for attempt := 0; attempt < 20; attempt++ {
		t0 := time.Now()
		rec := httptest.NewRecorder()
		if pre != nil {
			rec.Header()["Retry-After"] = append([]string(nil), pre...)
		}
		m.SetHeaders(rec.Header(), d)
		m.deny(rec, d)
		t1 := time.Now()
		if t1.Unix() != t0.Unix() {
			continue
		}
		vs := rec.Result().Header.Values("Retry-After")
		if len(vs) != 1 {
			t.Fatalf("pre %q: want one Retry-After line; got %q", pre, vs)
		}
		var p Problem
		if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || p.RetryAfter == nil {
			t.Fatalf("pre %q: body %q: %v", pre, rec.Body.String(), err)
		}
		return vs[0], *p.RetryAfter, t1
	}
	t.Fatal("inconclusive: every attempt straddled a wall second")
	return "", 0, time.Time{}
}

const a104RFC850 = "Monday, 02-Jan-06 15:04:05 GMT"

// TestAudit104HttpFixedRFC850FiftyYearsByTimestamp (audit 104; fixed at stop 60, the text
// below says what was wrong).
//
// Doc says: parseHTTPDate: "an rfc850 date's two-digit year is the one
// within 50 years ahead of now, else the most recent past year with
// those digits"; SetHeaders: "dates are read as RFC 9110 §5.6.7 asks".
// RFC 9110 §5.6.7: recipients "MUST interpret a timestamp that appears
// to be more than 50 years in the future as representing the most
// recent year in the past that had the same last two digits" — the
// timestamp, not its year number, is compared with now + 50 years.
//
// Code does: compares year numbers only (y > now.Year()+50), so every
// date of year now.Year()+50 stays ahead, including those after
// now.AddDate(50, 0, 0): on 2026-12-07, "Thursday, 31-Dec-76 00:00:00
// GMT" is read as 2076-12-31 (50 years and 24 days ahead) instead of
// 1976-12-31 (past). SetHeaders then keeps it and rewrites it as the
// unambiguous IMF-fixdate "Thu, 31 Dec 2076 00:00:00 GMT" (body
// retryAfter ~1.58e9 s), where an RFC 9110 recipient of the original
// reads a past date, i.e. the middleware's own Retry-After: 1.
//
// Minimal repro: parseHTTPDate("Thursday, 31-Dec-76 00:00:00 GMT",
// 2026-12-07T05:00Z) -> 2076-12-31; want 1976-12-31.
//
// Suggested fix: after mapping the two-digit year, compare instants:
// if at.After(now.AddDate(50, 0, 0)) { at = at.AddDate(-100, 0, 0) }
// (and the symmetric "+100 while at <= now.AddDate(-50,0,0)" step only
// as the fallback that picks the most recent past year).
func TestAudit104HttpFixedRFC850FiftyYearsByTimestamp(t *testing.T) {
	now := time.Date(2026, 12, 7, 5, 0, 0, 0, time.UTC)
	v := "Thursday, 31-Dec-76 00:00:00 GMT"
	at, ok := parseHTTPDate(v, now)
	if !ok || at.Year() != 1976 {
		t.Errorf("parseHTTPDate(%q, %v) = %v, %v; want 1976-12-31 (2076-12-31 is more than 50 years after now)", v, now, at, ok)
	}
	// The mirror, past the century: on 2080-01-05, "-30" by year number
	// is 2130 (2030 <= 2080-50), though 2130-12-31 is 50 years and 360
	// days ahead: RFC 9110 reads 2030.
	now2 := time.Date(2080, 1, 5, 0, 0, 0, 0, time.UTC)
	v2 := "Tuesday, 31-Dec-30 00:00:00 GMT"
	if at, ok := parseHTTPDate(v2, now2); !ok || at.Year() != 2030 {
		t.Errorf("parseHTTPDate(%q, %v) = %v, %v; want 2030-12-31 (2130-12-31 is more than 50 years after now)", v2, now2, at, ok)
	}

	// Through SetHeaders with the real clock: the last second of year
	// now.Year()+50 is more than 50 years ahead (unless now is that
	// year's last second, less 50 years).
	real := time.Now().UTC()
	target := time.Date(real.Year()+50, time.December, 31, 23, 59, 59, 0, time.UTC)
	if !target.After(real.AddDate(50, 0, 0).Add(time.Minute)) {
		return // the very end of a year: nothing to show
	}
	pre := target.Format(a104RFC850)
	m, d := a104Mid(t, time.Second)
	h, body, _ := a104Deny(t, m, d, []string{pre})
	if h != "1" || body != 1 {
		t.Errorf("Retry-After already set %q (RFC 9110: year %d, past); the answer says Retry-After %q, body retryAfter %d; want 1 and 1",
			pre, target.Year()-100, h, body)
	}
}

// TestAudit104HttpFixedRFC850Feb29CenturyYear (audit 104; fixed at stop 60, the text
// below says what was wrong).
//
// Doc says: parseHTTPDate reads an rfc850 date's two-digit year as "the
// one within 50 years ahead of now, else the most recent past year with
// those digits": the instant the text names in that year.
//
// Code does: time.Parse reads "-00" as 2000 (a leap year), accepts
// "29-Feb-00", and the remap at.AddDate(y-2000, 0, 0) to 2100 (or 1900),
// which has no Feb 29, normalizes to Mar 1: parseHTTPDate("Tuesday,
// 29-Feb-00 12:00:00 GMT", 2060-06-01) returns 2100-03-01 12:00, a day
// the text does not name (and SetHeaders would rewrite it as "Mon, 01
// Mar 2100 12:00:00 GMT").
//
// Minimal repro: parseHTTPDate("Tuesday, 29-Feb-00 12:00:00 GMT",
// time.Date(2060, 6, 1, 0, 0, 0, 0, time.UTC)).
//
// Suggested fix: build the remapped date with time.Date(y, at.Month(),
// at.Day(), ...) and reject it (false) when its month or day differ from
// at's (Feb 29 of a year with none is not a date).
func TestAudit104HttpFixedRFC850Feb29CenturyYear(t *testing.T) {
	v := "Tuesday, 29-Feb-00 12:00:00 GMT"
	for _, now := range []time.Time{
		time.Date(2060, 6, 1, 0, 0, 0, 0, time.UTC), // -00 is 2100
		time.Date(1930, 6, 1, 0, 0, 0, 0, time.UTC), // -00 is 1900
	} {
		at, ok := parseHTTPDate(v, now)
		if ok && (at.Month() != time.February || at.Day() != 29) {
			t.Errorf("parseHTTPDate(%q, now %d) = %v: not Feb 29 (year %d has none); want false", v, now.Year(), at, at.Year())
		}
	}
	// Control: in 2026, -00 is 2000, which has a Feb 29.
	if at, ok := parseHTTPDate(v, time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)); !ok || !at.Equal(time.Date(2000, 2, 29, 12, 0, 0, 0, time.UTC)) {
		t.Errorf("control: parseHTTPDate(%q, 2026) = %v, %v", v, at, ok)
	}
}

// TestAudit104HttpLeapSecondEdges (passes): a second of 60 in each of
// the three forms at the end of a year, a month, Feb 28 of a common year
// and Feb 29 of a leap year is the next day's 00:00:00; 60 elsewhere (a
// year 2060, a minute 60, a second 61, a day 60, a second 60 with more
// digits) is not taken for a leap second; weekdays are not checked
// (http.ParseTime ignores them), before and after a remap.
func TestAudit104HttpLeapSecondEdges(t *testing.T) {
	now := time.Date(2026, 12, 7, 5, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		v    string
		want time.Time
		ok   bool
	}{
		{"Tue, 31 Dec 2030 23:59:60 GMT", time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC), true},
		{"Tuesday, 31-Dec-30 23:59:60 GMT", time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC), true},
		{"Tue Dec 31 23:59:60 2030", time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC), true},
		{"Mon, 30 Jun 2031 23:59:60 GMT", time.Date(2031, 7, 1, 0, 0, 0, 0, time.UTC), true},
		{"Fri, 28 Feb 2031 23:59:60 GMT", time.Date(2031, 3, 1, 0, 0, 0, 0, time.UTC), true},
		{"Thu, 29 Feb 2032 23:59:60 GMT", time.Date(2032, 3, 1, 0, 0, 0, 0, time.UTC), true},
		{"Sun Feb 29 23:59:60 2032", time.Date(2032, 3, 1, 0, 0, 0, 0, time.UTC), true},
		{"Thursday, 29-Feb-72 23:59:60 GMT", time.Date(2072, 3, 1, 0, 0, 0, 0, time.UTC), true}, // remap 1972 -> 2072, then the leap
		{"Wednesday, 31-Dec-75 23:59:60 GMT", time.Date(2076, 1, 1, 0, 0, 0, 0, time.UTC), true},
		{"Sat, 31 Dec 2061 23:59:60 GMT", time.Date(2062, 1, 1, 0, 0, 0, 0, time.UTC), true},
		{"Sun, 01 Jan 2060 00:00:00 GMT", time.Date(2060, 1, 1, 0, 0, 0, 0, time.UTC), true}, // year 2060
		{"Sun Jan  1 00:00:00 2060", time.Date(2060, 1, 1, 0, 0, 0, 0, time.UTC), true},
		{"Sun Jan  1 12:60:00 2060", time.Time{}, false},
		{"Sun, 01 Jan 2060 23:60:60 GMT", time.Time{}, false},
		{"Sun, 01 Jan 2060 23:59:61 GMT", time.Time{}, false},
		{"Sun, 01 Jan 2060 23:59:600 GMT", time.Time{}, false},
		{"Sun, 60 Jan 2060 23:59:60 GMT", time.Time{}, false},
		{"Sun, 01 Jan 2060 24:00:60 GMT", time.Time{}, false},
		{"12:59:60 Sun, 01 Jan 2060 23:59:59 GMT", time.Time{}, false},
		{"Sun, 01 Jan 2060 23:59:59 GMT 12:59:60", time.Time{}, false},
		{"Mon, 31 Dec 2030 23:59:60 GMT", time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC), true}, // wrong weekday: ignored
		{"Monday, 31-Dec-70 00:00:00 GMT", time.Date(2070, 12, 31, 0, 0, 0, 0, time.UTC), true},
		{"Tue, 31 Dec 2030 23:59:60 UTC", time.Time{}, false},
	} {
		at, ok := parseHTTPDate(c.v, now)
		if ok != c.ok || ok && !at.Equal(c.want) {
			t.Errorf("parseHTTPDate(%q) = %v, %v; want %v, %v", c.v, at, ok, c.want, c.ok)
		}
		// retryAfterText writes the same instant as an IMF-fixdate.
		if ok {
			txt := retryAfterText(c.v, now)
			if back, err := time.Parse(http.TimeFormat, txt); err != nil || !back.Equal(at) {
				t.Errorf("retryAfterText(%q) = %q: not the IMF-fixdate of %v", c.v, txt, at)
			}
		}
	}
}

// TestAudit104HttpRFC850CenturyBoundary (passes): the two-digit year
// across a century boundary of now (year granularity agrees with the
// timestamp rule away from the 50-year edge).
func TestAudit104HttpRFC850CenturyBoundary(t *testing.T) {
	for _, c := range []struct {
		now  time.Time
		v    string
		year int
	}{
		{time.Date(2099, 12, 31, 23, 0, 0, 0, time.UTC), "Friday, 01-Jan-00 00:00:00 GMT", 2100},
		{time.Date(2099, 12, 31, 23, 0, 0, 0, time.UTC), "Thursday, 31-Dec-99 23:59:59 GMT", 2099},
		{time.Date(2100, 1, 1, 0, 30, 0, 0, time.UTC), "Thursday, 31-Dec-99 23:59:59 GMT", 2099},
		{time.Date(2100, 1, 1, 0, 30, 0, 0, time.UTC), "Friday, 01-Jan-49 00:00:00 GMT", 2149},
		{time.Date(2100, 1, 1, 0, 30, 0, 0, time.UTC), "Friday, 01-Jan-51 00:00:00 GMT", 2051},
		{time.Date(2049, 6, 1, 0, 0, 0, 0, time.UTC), "Friday, 01-Jan-99 00:00:00 GMT", 2099},
		{time.Date(2049, 6, 1, 0, 0, 0, 0, time.UTC), "Friday, 01-Jan-00 00:00:00 GMT", 2000},
		{time.Date(2050, 6, 1, 0, 0, 0, 0, time.UTC), "Friday, 01-Jan-00 00:00:00 GMT", 2100},
		{time.Date(1999, 6, 1, 0, 0, 0, 0, time.UTC), "Friday, 01-Jan-49 00:00:00 GMT", 2049},
		{time.Date(1999, 6, 1, 0, 0, 0, 0, time.UTC), "Friday, 01-Jan-50 00:00:00 GMT", 1950},
		{time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC), "Friday, 01-Jan-69 00:00:00 GMT", 2069},
		{time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC), "Friday, 01-Jan-77 00:00:00 GMT", 1977},
		// now in another zone: the year is now's UTC year.
		{time.Date(2050, 1, 1, 1, 0, 0, 0, time.FixedZone("x", 3*3600)), "Friday, 01-Jan-00 00:00:00 GMT", 2000},
	} {
		at, ok := parseHTTPDate(c.v, c.now)
		if !ok || at.Year() != c.year {
			t.Errorf("parseHTTPDate(%q, now %v) = %v, %v; want year %d", c.v, c.now, at, ok, c.year)
		}
	}
}

// TestAudit104HttpKeptForms (passes): a kept value is written as a
// sender writes it, the body's retryAfter is the header's delay rounded
// up, and a delay beyond the largest Integer (within int64 or beyond)
// is written as 999999999999999 in both.
func TestAudit104HttpKeptForms(t *testing.T) {
	m, d := a104Mid(t, time.Second)
	for _, c := range []struct {
		pre  string
		want string // "" = an IMF-fixdate
	}{
		{"  000120\t", "120"},
		{"999999999999999", "999999999999999"},
		{"1000000000000000", "999999999999999"},
		{strconv.FormatInt(math.MaxInt64, 10), "999999999999999"},
		{"92233720368547758080", "999999999999999"},
		{"  99999999999999999999999999999999  ", "999999999999999"},
		{"Fri, 31 Dec 9999 23:59:59 GMT", ""},
		{fmt.Sprintf("Tue Dec 31 23:59:60 %d", time.Now().Year()+3), ""},
	} {
		h, body, now := a104Deny(t, m, d, []string{c.pre})
		if c.want != "" {
			if h != c.want {
				t.Errorf("kept %q: header %q; want %q", c.pre, h, c.want)
			}
			if n, _ := strconv.ParseInt(h, 10, 64); body != n {
				t.Errorf("kept %q: header %q, body %d", c.pre, h, body)
			}
			continue
		}
		at, err := time.Parse(http.TimeFormat, h)
		if err != nil {
			t.Errorf("kept %q: header %q is no IMF-fixdate", c.pre, h)
			continue
		}
		if want := at.Unix() - now.Unix(); body != want {
			t.Errorf("kept %q: header %q is %d s away; body %d", c.pre, h, want, body)
		}
	}
}

// TestAudit104HttpFixedLeapSecondYear10000 (audit 104; fixed at stop 60, the text
// below says what was wrong).
//
// Doc says: SetHeaders: "a kept value is written as a sender writes it,
// a plain integer or an IMF-fixdate"; retryAfterText: "an HTTP-date in
// IMF-fixdate form"; RFC 9110 §5.6.7: IMF-fixdate's year = 4DIGIT. The
// package doc: the problem+json body's retryAfter is the Retry-After
// delay (deny: "The Retry-After field SetHeaders set").
//
// Code does: the last valid HTTP-date, "Fri, 31 Dec 9999 23:59:60 GMT"
// (a leap second, now read as the next second), is kept and rewritten
// as at.Format(http.TimeFormat) = "Sat, 01 Jan 10000 00:00:00 GMT": a
// five-digit year no recipient (http.ParseTime included) can read, so
// the answer's Retry-After is unreadable — a client falls back to no
// delay at all — and deny, reading it back, finds nothing and writes
// retryAfter 1 in the body while the header meant ~2.5e11 s.
//
// Minimal repro: outer Retry-After "Fri, 31 Dec 9999 23:59:60 GMT",
// inner denial of 1 s -> header "Sat, 01 Jan 10000 00:00:00 GMT", body 1.
//
// Suggested fix: in retryAfterText, a date past 9999-12-31T23:59:59Z is
// written as delay-seconds (at.Unix() - now.Unix(), below the largest
// Integer), or parseHTTPDate caps the leap second at 9999-12-31 23:59:59
// (or the original text is kept when the IMF-fixdate cannot hold it).
func TestAudit104HttpFixedLeapSecondYear10000(t *testing.T) {
	pre := "Fri, 31 Dec 9999 23:59:60 GMT"
	m, d := a104Mid(t, time.Second)
	h, body, now := a104Deny(t, m, d, []string{pre})
	a, ok := parseRetryAfter(h, now)
	if !ok || a.whole < time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC).Unix()-now.Unix() || body != a.whole {
		t.Errorf("Retry-After already set %q (a valid HTTP-date, ~%d s away): the answer's Retry-After %q reads %+v, %v; body retryAfter %d",
			pre, time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC).Unix()-now.Unix(), h, a, ok, body)
	}
}
