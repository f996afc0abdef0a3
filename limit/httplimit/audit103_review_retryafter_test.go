package httplimit

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
)

// a103Mid is a Middleware over a 1/s burst-1 limiter, problem+json on,
// and a denial of it waiting ra (as the limiter would hand SetHeaders).
func a103Mid(t *testing.T, ra time.Duration, opts ...Option) (*Middleware, limit.Decision) {
	t.Helper()
	lim := limit.MustNew(1, 1)
	m, err := New(lim, append([]Option{WithProblemJSON(true)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	p := lim.Policies()[0]
	d := limit.Decision{Limit: p.Limit, Burst: p.Burst, Policy: p.Name, RetryAfter: ra, NextAfter: ra}
	return m, d
}

// a103Deny runs SetHeaders then deny on a recorder whose header holds
// pre (the Retry-After lines an outer middleware set) and returns the
// answer's one Retry-After line and the body's retryAfter.
func a103Deny(t *testing.T, m *Middleware, d limit.Decision, pre []string) (string, int64) {
	t.Helper()
	rec := httptest.NewRecorder()
	if pre != nil {
		rec.Header()["Retry-After"] = append([]string(nil), pre...)
	}
	m.SetHeaders(rec.Header(), d)
	m.deny(rec, d)
	vs := rec.Result().Header.Values("Retry-After")
	if len(vs) != 1 {
		t.Fatalf("pre %q: want one Retry-After line; got %q", pre, vs)
	}
	var p Problem
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || p.RetryAfter == nil {
		t.Fatalf("pre %q: body %q: %v", pre, rec.Body.String(), err)
	}
	return vs[0], *p.RetryAfter
}

// TestAudit103ReviewFixedRetryAfterRFC850TwoDigitYear (audit 103; fixed at stop 60, the text
// below says what was wrong).
//
// Doc says (doc.go): "A denial's Retry-After is never earlier than ... a
// Retry-After already set"; SetHeaders' doc: "Retry-After is the latest
// of this one's, one already set (seconds or an HTTP-date ...)";
// parseRetryAfter's doc: "an HTTP-date: RFC 9110 §10.2.3". RFC 9110
// §5.6.7 (HTTP-date, obs-date rfc850-date): "Recipients of a timestamp
// value in rfc850-date format, which uses a two-digit year, MUST
// interpret a timestamp that appears to be more than 50 years in the
// future as representing the most recent year in the past that had the
// same last two digits" — so, in 2026, "-69" is 2069 (43 years ahead).
//
// Code does: http.ParseTime (time.Parse's "06": 69..99 -> 19yy) reads
// "Tuesday, 01-Jan-69 00:00:00 GMT" as 1969, "past", and the answer's
// Retry-After is the denial's own "1": ~43 years earlier than the value
// already set, as a recipient following RFC 9110 reads it.
//
// Minimal repro: outer Retry-After "<Weekday>, 01-Jan-69 00:00:00 GMT"
// (any year Y in (now, now+50] with Y%100 >= 69 and Y < 2100), inner
// denial of 1 s -> "Retry-After: 1", body retryAfter 1.
//
// Suggested fix: in parseRetryAfter, when the value is an rfc850-date
// (the day name is followed by ", dd-Mon-yy"), apply RFC 9110's 50-year
// rule to at's year relative to now (at.Year()+100 while at.Year()+100
// <= now.Year()+50), or drop the obsolete form explicitly in the doc.
func TestAudit103ReviewFixedRetryAfterRFC850TwoDigitYear(t *testing.T) {
	now := time.Now().UTC()
	y := max(now.Year()+1, 2069)
	if y > now.Year()+50 || y >= 2100 {
		return // time.Parse's window agrees with RFC 9110 this year
	}
	at := time.Date(y, time.January, 1, 0, 0, 0, 0, time.UTC)
	v := fmt.Sprintf("%s, 01-Jan-%02d 00:00:00 GMT", at.Weekday(), y%100)
	m, d := a103Mid(t, time.Second)
	h, body := a103Deny(t, m, d, []string{v})
	want := int64(at.Sub(now) / time.Second)
	if body < want {
		t.Errorf("Retry-After already set %q (RFC 9110: %d, %d s away); the answer says Retry-After %q, body retryAfter %d: earlier than the value already set",
			v, y, want, h, body)
	}
}

// TestAudit103ReviewFixedRetryAfterLeapSecondDate (audit 103; fixed at stop 60, the text
// below says what was wrong).
//
// Doc says (doc.go): "A denial's Retry-After is never earlier than ...
// a Retry-After already set"; parseRetryAfter reads "an HTTP-date: RFC
// 9110 §10.2.3". RFC 9110 §5.6.7: time-of-day = hour ":" minute ":"
// second "; 00:00:00 - 23:59:60 (leap second)", and "A recipient that
// parses a timestamp value in an HTTP field MUST accept all three
// HTTP-date formats".
//
// Code does: http.ParseTime (time.Parse) rejects a second of 60, so a
// valid IMF-fixdate at a leap second is "neither" and ignored; the
// answer's Retry-After becomes this denial's own seconds, years earlier
// than the value already set.
//
// Minimal repro: outer Retry-After "Tue, 31 Dec 2030 23:59:60 GMT",
// inner denial of 1 s -> "Retry-After: 1", body retryAfter 1.
//
// Suggested fix: in parseRetryAfter, when ParseTime fails and the
// value's time-of-day ends in ":60", parse it with ":59" and add one
// second (time has no leap seconds: 23:59:60 is 00:00:00 next day).
func TestAudit103ReviewFixedRetryAfterLeapSecondDate(t *testing.T) {
	now := time.Now().UTC()
	y := now.Year() + 4
	at := time.Date(y, time.December, 31, 23, 59, 59, 0, time.UTC)
	v := fmt.Sprintf("%s, 31 Dec %d 23:59:60 GMT", at.Weekday().String()[:3], y)
	m, d := a103Mid(t, time.Second)
	h, body := a103Deny(t, m, d, []string{v})
	want := int64(at.Sub(now) / time.Second)
	if body < want {
		t.Errorf("Retry-After already set %q (a valid HTTP-date, %d s away); the answer says Retry-After %q, body retryAfter %d: earlier than the value already set",
			v, want, h, body)
	}
}

// TestAudit103ReviewFixedRetryAfterKeptObsoleteDateForm (audit 103; fixed at stop 60, the text
// below says what was wrong).
//
// Doc says: RFC 9110 §5.6.7: "When a sender generates a field that
// contains one or more timestamps defined as HTTP-date, the sender MUST
// generate those timestamps in the IMF-fixdate format"; SetHeaders
// writes the field anew (h.Set, one line from several: "the latest
// readable value stays if it is not earlier, as one line").
//
// Code does: keeps the kept line's text as it was, so an outer value in
// the obsolete asctime or rfc850 form is re-generated by this middleware
// in that form (and an rfc850 date keeps its two-digit year, which
// recipients read by the 50-year rule, see RetryAfterRFC850TwoDigitYear).
//
// Minimal repro: outer Retry-After "Mon Dec  1 00:00:00 <now+5y>" (asctime),
// inner denial of 1 s -> the answer's Retry-After is that asctime text.
//
// Suggested fix: when the kept line is a date, write
// at.UTC().Format(http.TimeFormat) instead of its text (and a kept
// delay-seconds as strconv.FormatInt, dropping blanks and leading zeros).
func TestAudit103ReviewFixedRetryAfterKeptObsoleteDateForm(t *testing.T) {
	y := time.Now().UTC().Year() + 5
	at := time.Date(y, time.December, 1, 0, 0, 0, 0, time.UTC)
	for _, v := range []string{at.Format(time.ANSIC), at.Format("Monday, 02-Jan-06 15:04:05 GMT")} {
		m, d := a103Mid(t, time.Second)
		h, _ := a103Deny(t, m, d, []string{v})
		if got, err := time.Parse(http.TimeFormat, h); err != nil || !got.Equal(at) {
			t.Errorf("Retry-After already set %q; the answer's Retry-After %q is not the IMF-fixdate %q a sender must generate",
				v, h, at.Format(http.TimeFormat))
		}
	}
}

// TestAudit103ReviewFixedLegacyRemainingSecondLine (audit 103; fixed at stop 60, the text
// below says what was wrong).
//
// Doc says (doc.go): "The legacy fields keep the least Remaining of the
// middlewares that set them"; SetHeaders' code comment: "Every spelling
// of the three fields is one field (fieldLines)".
//
// Code does: reads only the first line of X-RateLimit-Remaining
// (old[0]); an outer middleware that set "0" under another spelling (or
// a second line) is compared as if it were not there: with lines ["5",
// "0"] and this decision's Remaining 3, the answer says
// X-RateLimit-Remaining: 3 although a middleware already said 0.
//
// Minimal repro: h["X-Ratelimit-Remaining"] = ["5"],
// h["x-ratelimit-remaining"] = ["0"]; SetHeaders with Remaining 3.
//
// Suggested fix: take the least readable integer over every line of the
// field (as Retry-After takes the latest), and keep the set whose
// Remaining that is.
func TestAudit103ReviewFixedLegacyRemainingSecondLine(t *testing.T) {
	m, d := a103Mid(t, time.Second, WithLegacyHeaders(true))
	d.Allowed, d.RetryAfter, d.NextAfter, d.Remaining = true, 0, 0, 3
	d.Burst = 10
	h := http.Header{}
	h["X-Ratelimit-Remaining"] = []string{"5"}
	h["x-ratelimit-remaining"] = []string{"0"}
	m.SetHeaders(h, d)
	if got := h.Values("X-Ratelimit-Remaining"); len(got) != 1 || got[0] != "0" {
		t.Errorf("X-RateLimit-Remaining lines 5 and 0 already set, this decision's 3: got %q; want the least, 0", got)
	}
}

// TestAudit103ReviewParseRetryAfterEdges (passes): parseRetryAfter's
// arithmetic at a whole second, just past it and just before the next,
// delay-seconds with leading zeros, beyond int64, signs and garbage.
func TestAudit103ReviewParseRetryAfterEdges(t *testing.T) {
	base := time.Date(2026, 12, 7, 5, 0, 0, 0, time.UTC)
	date := func(s int) string { return base.Add(time.Duration(s) * time.Second).Format(http.TimeFormat) }
	for _, c := range []struct {
		v    string
		now  time.Time
		want retryAfter
		ok   bool
	}{
		{date(10), base, retryAfter{10, 0}, true}, // a date exactly at a whole second from a whole now
		{date(10), base.Add(1), retryAfter{10, 1}, true},
		{date(10), base.Add(999_999_999), retryAfter{10, 999_999_999}, true},
		{date(0), base, retryAfter{}, true},
		{date(0), base.Add(1), retryAfter{}, true},
		{date(1), base.Add(999_999_999), retryAfter{1, 999_999_999}, true},
		{"Thu, 01 Jan 1970 00:00:00 GMT", base, retryAfter{}, true},
		{"Mon, 01 Jan 0001 00:00:00 GMT", base, retryAfter{}, true},
		{"Fri, 31 Dec 9999 23:59:59 GMT", base, retryAfter{time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC).Unix() - base.Unix(), 0}, true},
		{"Sat, 01 Jan 10000 00:00:00 GMT", base, retryAfter{}, false},
		{"010", base, retryAfter{10, 0}, true},
		{" \t0000000000000000000000000000000000007 ", base, retryAfter{7, 0}, true},
		{"9223372036854775807", base, retryAfter{math.MaxInt64, 0}, true},
		{"9223372036854775808", base, retryAfter{math.MaxInt64, 0}, true},
		{strings.Repeat("9", 5000), base, retryAfter{math.MaxInt64, 0}, true},
		{"-1", base, retryAfter{}, false},
		{"+1", base, retryAfter{}, false},
		{"1.5", base, retryAfter{}, false},
		{"1e3", base, retryAfter{}, false},
		{"1_000", base, retryAfter{}, false},
		{"٣", base, retryAfter{}, false},
		{"", base, retryAfter{}, false},
		{" \t ", base, retryAfter{}, false},
	} {
		got, ok := parseRetryAfter(c.v, c.now)
		if ok != c.ok || ok && got != c.want {
			t.Errorf("parseRetryAfter(%.40q, now+%dns) = %v, %v; want %v, %v", c.v, c.now.Nanosecond(), got, ok, c.want, c.ok)
		}
	}
	// after and atLeast at the boundaries.
	if !(retryAfter{11, 999_999_999}).after(retryAfter{10, 0}) || (retryAfter{10, 1}).after(retryAfter{10, 0}) ||
		!(retryAfter{10, 0}).after(retryAfter{10, 1}) || (retryAfter{10, 5}).after(retryAfter{10, 5}) {
		t.Error("after misorders instants")
	}
	if !(retryAfter{10, 0}).atLeast(10) || (retryAfter{10, 1}).atLeast(10) || !(retryAfter{11, 999_999_999}).atLeast(10) {
		t.Error("atLeast wrong at a whole second")
	}
}

// TestAudit103ReviewRetryAfterModel (passes): random sets of lines
// already set (delay-seconds with and without leading zeros and blanks,
// IMF-fixdate, rfc850 and asctime dates around now, past dates, huge
// values, garbage) under random spellings, and a random denial: the
// answer's one Retry-After stands for the latest of now + ra and every
// readable line, clamped to 999999999999999, and the body's retryAfter
// is it rounded up. Instants are compared in whole seconds of the
// attempt's wall second with now strictly inside it (so a date floor+k
// and delay-seconds n never tie: k vs n + frac); an attempt that crossed
// a second is redone.
func TestAudit103ReviewRetryAfterModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(103, 1))
	const frac = 0.5 // any value in (0, 1): only the ordering matters
	m, d := a103Mid(t, time.Second)
	for iter := 0; iter < 400; iter++ {
		raMs := rng.Int64N(20_000) + 1
		var lines []string
		var keys []string
		var best float64 // latest readable line, in seconds from floor(now): set per attempt
		var done bool
		for attempt := 0; attempt < 50 && !done; attempt++ {
			t0 := time.Now()
			if t0.Nanosecond() == 0 {
				continue
			}
			floor := t0.Truncate(time.Second)
			lines, keys, best = nil, nil, math.Inf(-1)
			for range rng.IntN(5) {
				var v string
				var at float64
				ok := true
				switch rng.IntN(8) {
				case 0:
					n := rng.Int64N(25)
					v, at = strconv.FormatInt(n, 10), float64(n)+frac
				case 1:
					n := rng.Int64N(25)
					v, at = " 00"+strconv.FormatInt(n, 10)+"\t", float64(n)+frac
				case 2, 3:
					k := rng.Int64N(28) - 3
					v, at = floor.Add(time.Duration(k)*time.Second).UTC().Format(http.TimeFormat), float64(k)
				case 4:
					k := rng.Int64N(28) - 3
					v, at = floor.Add(time.Duration(k)*time.Second).UTC().Format(time.ANSIC), float64(k)
				case 5:
					k := rng.Int64N(28) - 3
					v, at = floor.Add(time.Duration(k)*time.Second).UTC().Format("Monday, 02-Jan-06 15:04:05 GMT"), float64(k)
				case 6:
					v, at = []string{"1000000000000000", "99999999999999999999999", "999999999999999"}[rng.IntN(3)], 0
					n, err := strconv.ParseFloat(v, 64)
					if err != nil {
						t.Fatal(err)
					}
					at = n + frac
				default:
					v, ok = []string{"", "soon", "-5", "1.5", "Mon, 99 Jan 2026 00:00:00 GMT", "10, 20"}[rng.IntN(6)], false
				}
				lines = append(lines, v)
				keys = append(keys, []string{"Retry-After", "retry-after", "RETRY-AFTER"}[rng.IntN(3)])
				if ok {
					best = max(best, at)
				}
			}
			d.RetryAfter = time.Duration(raMs) * time.Millisecond
			d.NextAfter = d.RetryAfter
			rec := httptest.NewRecorder()
			for i, v := range lines {
				rec.Header()[keys[i]] = append(rec.Header()[keys[i]], v)
			}
			m.SetHeaders(rec.Header(), d)
			m.deny(rec, d)
			if t1 := time.Now(); t1.Unix() != t0.Unix() {
				continue
			}
			done = true
			ra := (raMs + 999) / 1000
			want := max(best, float64(ra)+frac)
			want = min(want, maxSFInteger+frac)
			vs := rec.Result().Header.Values("Retry-After")
			if len(vs) != 1 {
				t.Fatalf("lines %q: got Retry-After %q", lines, vs)
			}
			var got float64
			if n, err := strconv.ParseFloat(strings.Trim(vs[0], " \t"), 64); err == nil && strings.Trim(strings.Trim(vs[0], " \t"), "0123456789") == "" {
				got = n + frac
			} else if at, err := http.ParseTime(strings.Trim(vs[0], " \t")); err == nil {
				got = float64(at.Unix() - floor.Unix())
			} else {
				t.Fatalf("lines %q: answer %q unreadable", lines, vs[0])
			}
			if got != want {
				t.Errorf("lines %q, ra %d: answer %q stands for floor+%v; want floor+%v", lines, ra, vs[0], got, want)
			}
			var p Problem
			if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || p.RetryAfter == nil {
				t.Fatalf("body %q: %v", rec.Body.String(), err)
			}
			if up := int64(math.Ceil(got - frac)); *p.RetryAfter != up {
				t.Errorf("lines %q: header %q rounds up to %d; body says %d", lines, vs[0], up, *p.RetryAfter)
			}
		}
		if !done {
			t.Fatal("inconclusive: every attempt straddled a wall-clock second")
		}
	}
}

// TestAudit103ReviewParseRetryAfterHostile (passes): parseRetryAfter
// on hostile values (seeds and random bytes) never panics, frac is in
// [0, 1e9), whole >= 0, and a past or present date reads as 0.
func TestAudit103ReviewParseRetryAfterHostile(t *testing.T) {
	rng := rand.New(rand.NewPCG(103, 2))
	seeds := []string{"", "0", "010", "Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT",
		"Sun Nov  6 08:49:37 1994", strings.Repeat("9", 30), "\t7 ", "Mon, 01 Jan 0000 00:00:00 GMT",
		"Fri, 31 Dec 9999 23:59:59 GMT", "\x00", "\xff\xfe", "Sun, 06 Nov 1994 08:49:37 GMT\r\nX: y"}
	alphabet := "0123456789 \t,:-SunMonNovGMT\xff"
	for i := 0; i < 3000; i++ {
		v := ""
		if i < len(seeds) {
			v = seeds[i]
		} else {
			b := make([]byte, rng.IntN(40))
			for j := range b {
				b[j] = alphabet[rng.IntN(len(alphabet))]
			}
			v = string(b)
		}
		now := time.Unix(rng.Int64N(1<<36)-(1<<35), rng.Int64N(1e9))
		a, ok := parseRetryAfter(v, now)
		if !ok {
			continue
		}
		if a.whole < 0 || a.frac < 0 || a.frac >= 1e9 || a.whole == 0 && a.frac != 0 {
			t.Errorf("parseRetryAfter(%q) = %+v", v, a)
		}
	}
}
