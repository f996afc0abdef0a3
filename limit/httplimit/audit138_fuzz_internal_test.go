package httplimit

import (
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
)

// Audit 138: fuzzing the header fields an outer layer already set, under
// every spelling of their names and over several lines, which the
// earlier fuzz targets (audit 63, 85, 101, 104) feed only as one
// canonical key each.

// a138Spellings are four spellings of field: the canonical key, the
// name as given, lower case and upper case (the last three are keys
// h.Values does not see).
func a138Spellings(field string) [4]string {
	return [4]string{http.CanonicalHeaderKey(field), field, strings.ToLower(field), strings.ToUpper(field)}
}

// a138Put adds each line of lines (split at '\n', at most 6) to h under
// the spelling of field that two bits of mask pick.
func a138Put(h http.Header, field, lines string, mask uint32) {
	if lines == "" {
		return
	}
	sp := a138Spellings(field)
	for i, l := range strings.SplitN(lines, "\n", 6) {
		k := sp[(mask>>(2*uint(i)))&3]
		h[k] = append(h[k], l)
	}
}

// a138Canonical reports a spelling of field other than the canonical
// key left in h.
func a138Canonical(t *testing.T, h http.Header, field string) {
	t.Helper()
	for k := range h {
		if k != http.CanonicalHeaderKey(field) && strings.EqualFold(k, field) {
			t.Fatalf("%s still under the spelling %q: %q", field, k, h)
		}
	}
}

// a138Same reports whether two headers hold the same lines per key, in
// any order (the order of lines under different spellings is a map's).
func a138Same(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, va := range a {
		x, y := slices.Clone(va), slices.Clone(b[k])
		slices.Sort(x)
		slices.Sort(y)
		if !slices.Equal(x, y) {
			return false
		}
	}
	return true
}

// a138Ints returns the lines that read as an int64 (spaces and tabs
// around allowed), in the order given.
func a138Ints(h http.Header, field string) []int64 {
	var out []int64
	for _, v := range h.Values(field) {
		if n, err := strconv.ParseInt(strings.Trim(v, " \t"), 10, 64); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// FuzzAudit138LegacyMerge: X-RateLimit-Remaining, -Limit and -Reset
// already set over several lines and spellings. SetHeaders leaves each
// under its canonical key only; Remaining is one line, the least of the
// readable lines and this decision's (its own Limit and Reset with its
// own Remaining when it is the least; else the least readable Limit and
// the latest readable Reset, one line each, unreadable ones left as
// they were); the same input gives the same fields (up to the order of
// lines under different spellings).
func FuzzAudit138LegacyMerge(f *testing.F) {
	f.Add("7\n3", "10\n20", "5\n9", uint32(0b0110), int64(4), false)
	f.Add(" 2 \n\t1", "x\n8", "y", uint32(0xffff), int64(1), true)
	f.Add("abc\n-3", "", "", uint32(0b1011), int64(0), true)
	f.Add("9223372036854775808\n+4", "+9\n-1", "0\n99999999999999999999", uint32(0b11100100), int64(-5), false)
	f.Add("5", "a\nb\nc", "", uint32(0b111001), int64(9), false)
	f.Add("", "", "", uint32(0), int64(2), false)
	m, err := New(limit.MustNew(1, 5, limit.WithName("mine")), WithLegacyHeaders(true))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, rem, lim, reset string, mask uint32, dRem int64, deny bool) {
		for _, s := range []string{rem, lim, reset} {
			if len(s) > 200 || strings.ContainsAny(s, "\r\x00") {
				return
			}
		}
		before := http.Header{}
		a138Put(before, "X-RateLimit-Remaining", rem, mask)
		a138Put(before, "X-RateLimit-Limit", lim, mask>>12)
		a138Put(before, "X-RateLimit-Reset", reset, mask>>24|mask<<8)
		d := limit.Decision{Allowed: !deny, Limit: 1, Burst: 5, Policy: "mine", Remaining: int(dRem % 1_000_000),
			NextAfter: 400 * time.Millisecond, ResetAfter: 2 * time.Second}
		if deny {
			d.RetryAfter = 2500 * time.Millisecond
		}
		h := before.Clone()
		m.SetHeaders(h, d)
		h2 := before.Clone()
		m.SetHeaders(h2, d)
		if !a138Same(h, h2) {
			t.Fatalf("same input %q, two answers:\n%q\n%q", before, h, h2)
		}
		for _, fl := range []string{"X-RateLimit-Remaining", "X-RateLimit-Limit", "X-RateLimit-Reset"} {
			a138Canonical(t, h, fl)
		}
		// The reference: every spelling's lines as one field.
		flat := http.Header{}
		for k, vs := range before {
			for _, v := range vs {
				flat.Add(k, v)
			}
		}
		own := int64(max(d.Remaining, 0))
		rems := a138Ints(flat, "X-RateLimit-Remaining")
		if len(rems) == 0 || own < slices.Min(rems) {
			want := []string{strconv.FormatInt(own, 10)}
			if got := h.Values("X-RateLimit-Remaining"); !slices.Equal(got, want) {
				t.Fatalf("over %q: Remaining %q, want ours %q", before, got, want)
			}
			if got := h.Values("X-RateLimit-Limit"); !slices.Equal(got, []string{"5"}) {
				t.Fatalf("over %q: Limit %q, want ours 5", before, got)
			}
			if got := h.Values("X-RateLimit-Reset"); !slices.Equal(got, []string{"2"}) {
				t.Fatalf("over %q: Reset %q, want ours 2", before, got)
			}
			return
		}
		// The least, written as 0 when below it (stop 65: no sign).
		if got, want := h.Values("X-RateLimit-Remaining"), []string{strconv.FormatInt(max(slices.Min(rems), 0), 10)}; !slices.Equal(got, want) {
			t.Fatalf("over %q (ours %d): Remaining %q, want the least %q", before, own, got, want)
		}
		for _, c := range []struct {
			field string
			pick  func([]int64) int64
		}{{"X-RateLimit-Limit", slices.Min[[]int64]}, {"X-RateLimit-Reset", slices.Max[[]int64]}} {
			got := h.Values(c.field)
			if xs := a138Ints(flat, c.field); len(xs) > 0 {
				if want := []string{strconv.FormatInt(max(c.pick(xs), 0), 10)}; !slices.Equal(got, want) {
					t.Fatalf("over %q: %s %q, want %q", before, c.field, got, want)
				}
				continue
			}
			x, y := slices.Clone(got), slices.Clone(flat.Values(c.field))
			slices.Sort(x)
			slices.Sort(y)
			if !slices.Equal(x, y) {
				t.Fatalf("over %q: unreadable %s changed to %q", before, c.field, got)
			}
		}
	})
}

// a138Promise is the instant a Retry-After value v promises, read by a
// plain recipient (delay-seconds from at, or an IMF-fixdate or asctime
// date; rfc850 and leap seconds are left out: Go reads them otherwise
// than RFC 9110 asks), and whether v is one.
func a138Promise(v string, at time.Time) (time.Time, bool) {
	v = strings.Trim(v, " \t")
	if v != "" && strings.Trim(v, "0123456789") == "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n > maxSFInteger {
			n = maxSFInteger
		}
		return at.Add(time.Duration(min(n, int64(math.MaxInt64/time.Second)-1)) * time.Second), true
	}
	if _, err := time.Parse(time.RFC850, v); err == nil {
		return time.Time{}, false
	}
	d, err := http.ParseTime(v)
	return d, err == nil
}

// FuzzAudit138StackedSpellings: RateLimit, RateLimit-Policy and
// Retry-After already set over several lines and spellings, then a
// denial (or a Never one). SetHeaders never panics; each field ends
// under its canonical key only, RateLimit and RateLimit-Policy as one
// line ending with the middleware's item, a valid RFC 9651 List when the
// lines given form one (the strict parser of audit 63); on a denial
// Retry-After is one line that promises no earlier than this denial's
// RetryAfter rounded up, than any delay-seconds or date already set, and
// than the t of any strictly parsed member with r=0; a Never denial has
// none.
func FuzzAudit138StackedSpellings(f *testing.F) {
	f.Add(`"a";r=0;t=30`+"\n"+`"b";r=1`, `"a";q=1;w=30`, "10\n 20 ", uint32(0b0111), uint32(2500), false)
	f.Add(`"mine";r=0;t=99`+"\n"+`"x";r=0;t=7`, ``, "Fri, 01 Jan 2100 00:00:00 GMT\n5", uint32(0b1110), uint32(1), false)
	f.Add(`"a";r=0;t=3`, `"a";q=1;w=3`, "1\n2\n3", uint32(0xffffffff), uint32(10_000), true)
	f.Add(`tok;r=0;t=999999999999999`, `x`, "999999999999999999999\nSun Nov  6 08:49:37 2101", uint32(0b100111), uint32(0), false)
	f.Add(`"\"`, `",`, " \n\t", uint32(0b01), uint32(700), false)
	f.Add(`"a";r=0;t=4, "b";r=0;t=6`+"\n"+`"c";r=0;t=5`, "", "Thu, 01 Jan 1970 00:00:00 GMT", uint32(0b1001), uint32(900), false)
	m, err := New(limit.MustNew(1, 5, limit.WithName("mine")))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, rl, pol, ra string, mask, retryMs uint32, never bool) {
		for _, s := range []string{rl, pol, ra} {
			if len(s) > 300 || strings.ContainsAny(s, "\r\x00") {
				return
			}
		}
		before := http.Header{}
		a138Put(before, "RateLimit", rl, mask)
		a138Put(before, "RateLimit-Policy", pol, mask>>12)
		a138Put(before, "Retry-After", ra, mask>>20|mask<<12)
		retry := time.Duration(retryMs%100_000_000) * time.Millisecond
		d := limit.Decision{Limit: 1, Burst: 5, Policy: "mine", NextAfter: min(400*time.Millisecond, retry), RetryAfter: retry, ResetAfter: 5 * time.Second, Never: never}
		if never {
			d.RetryAfter, d.NextAfter = 0, 0
		}
		flat := http.Header{}
		for k, vs := range before {
			for _, v := range vs {
				flat.Add(k, v)
			}
		}
		h := before.Clone()
		t0 := time.Now()
		m.SetHeaders(h, d)
		t1 := time.Now()
		for _, fl := range []string{"RateLimit", "RateLimit-Policy", "Retry-After"} {
			a138Canonical(t, h, fl)
		}
		var strictT int64
		for fl, add := range map[string]string{"RateLimit": rateLimitField(`"mine"`, d), "RateLimit-Policy": m.policyValue()} {
			got := h.Values(fl)
			if len(got) != 1 || !strings.HasSuffix(got[0], add) {
				t.Fatalf("over %q: %s %q", before, fl, got)
			}
			// Members of the input lines, read strictly: any order of
			// spellings is one List only if the lines each parse.
			strict := true
			var ms []a63Member
			for _, v := range flat.Values(fl) {
				x, err := a63ParseList(v)
				if err != nil {
					strict = false
					break
				}
				ms = append(ms, x...)
			}
			if !strict {
				continue
			}
			if _, err := a63ParseList(got[0]); err != nil {
				t.Fatalf("over the valid Lists %q: %s %q is not one: %v", flat.Values(fl), fl, got[0], err)
			}
			if fl == "RateLimit" {
				strictT = a63ExhaustedT(ms)
			}
		}
		got := h.Values("Retry-After")
		if never {
			if len(got) != 0 {
				t.Fatalf("Never denial over %q: Retry-After %q", before, got)
			}
			return
		}
		if len(got) != 1 {
			t.Fatalf("over %q: Retry-After %q", before, got)
		}
		// The promise, for the recipient reading it at the latest
		// instant SetHeaders could have stamped it (delay-seconds are
		// from the response).
		p, ok := a138Promise(got[0], t0)
		if !ok {
			t.Fatalf("over %q: Retry-After %q unreadable", before, got)
		}
		floor := max(ceilSeconds(retry), 1, min(strictT, maxSFInteger))
		if p.Before(t0.Truncate(time.Second).Add(time.Duration(floor) * time.Second)) {
			t.Fatalf("over %q (retry %v, listed t %d): Retry-After %q earlier than %d s", before, retry, strictT, got[0], floor)
		}
		for _, v := range flat.Values("Retry-After") {
			q, ok := a138Promise(v, t1)
			if !ok || q.Year() > 9999 {
				continue
			}
			if strings.Trim(strings.Trim(v, " \t"), "0123456789") != "" {
				// A date: compared as instants (the delay-seconds answer
				// counts from t1 at the latest).
				if p2, _ := a138Promise(got[0], t1); p2.Before(q) {
					t.Fatalf("over %q: Retry-After %q earlier than the date %q kept before", before, got[0], v)
				}
				continue
			}
			if p2, _ := a138Promise(got[0], t1); p2.Before(q.Add(-(t1.Sub(t0) + time.Second))) {
				t.Fatalf("over %q: Retry-After %q earlier than %q set before", before, got[0], v)
			}
		}
	})
}

// FuzzAudit138StackedNames: two stacked middlewares whose policy names
// are fuzzed (any printable ASCII: commas, quotes, backslashes,
// semicolons, parentheses, '%' before a quote, the same name twice),
// the outer one admitting, the inner one deciding. RateLimit-Policy and
// RateLimit are each one line that parses as an RFC 9651 List whose
// members are the outer's item then the inner's (only the inner's when
// the names are equal: doc.go, "an inner policy of the same name
// replaces the outer one's"), each with its own r; on a retryable
// denial Retry-After is delay-seconds no earlier than the inner
// RetryAfter rounded up (at least 1) nor than the outer's t when its r
// is 0; the legacy Remaining is the least.
func FuzzAudit138StackedNames(f *testing.F) {
	f.Add("global", "route", uint8(0), uint16(1500), uint8(0), uint16(2500), false, false)
	f.Add(`a,b`, `a;b`, uint8(3), uint16(999), uint8(1), uint16(10), false, false)
	f.Add(`"q\`, `%`, uint8(0), uint16(4000), uint8(0), uint16(1), false, false)
	f.Add(`x`, `x`, uint8(0), uint16(9000), uint8(0), uint16(100), false, false)
	f.Add(`(a"`, `) "`, uint8(2), uint16(0), uint8(5), uint16(0), true, false)
	f.Add(`%"`, `\\`, uint8(0), uint16(1), uint8(0), uint16(0), false, true)
	f.Fuzz(func(t *testing.T, nameA, nameB string, rA uint8, tA uint16, rB uint8, retryB uint16, allowed, never bool) {
		if len(nameA) > 40 || len(nameB) > 40 {
			return
		}
		mk := func(name string) *Middleware {
			l, err := limit.New(1, 10, limit.WithName(name))
			if err != nil {
				return nil
			}
			m, err := New(l, WithLegacyHeaders(true))
			if err != nil {
				return nil
			}
			return m
		}
		a, b := mk(nameA), mk(nameB)
		if a == nil || b == nil {
			return
		}
		ms := func(v uint16) time.Duration { return time.Duration(v) * time.Millisecond }
		dA := limit.Decision{Allowed: true, Limit: 1, Burst: 10, Policy: nameA, Remaining: int(rA % 11), NextAfter: ms(tA)}
		if dA.Remaining == 10 {
			dA.NextAfter = 0
		} else if dA.NextAfter == 0 {
			dA.NextAfter = time.Millisecond
		}
		dA.ResetAfter = time.Duration(10-dA.Remaining) * time.Second
		dB := limit.Decision{Allowed: allowed, Limit: 1, Burst: 10, Policy: nameB, Remaining: int(rB % 11), NextAfter: min(ms(retryB), time.Second)}
		if !allowed {
			dB.Remaining, dB.RetryAfter, dB.Never = 0, ms(retryB), never
			if dB.RetryAfter == 0 && !never {
				dB.RetryAfter = time.Millisecond
			}
			dB.NextAfter = min(dB.NextAfter, dB.RetryAfter)
			if never {
				dB.RetryAfter, dB.NextAfter = 0, 0
			}
		}
		if dB.Remaining == 10 {
			dB.NextAfter = 0
		}
		dB.ResetAfter = time.Duration(10-dB.Remaining) * time.Second
		h := http.Header{}
		a.SetHeaders(h, dA)
		b.SetHeaders(h, dB)
		same := nameA == nameB
		for _, fl := range []string{"RateLimit-Policy", "RateLimit"} {
			vs := h.Values(fl)
			if len(vs) != 1 {
				t.Fatalf("%s: %q", fl, vs)
			}
			out, err := a63ParseList(vs[0])
			if err != nil {
				t.Fatalf("names %q, %q: %s %q is not a List: %v", nameA, nameB, fl, vs[0], err)
			}
			want := []string{nameA, nameB}
			if same {
				want = want[1:]
			}
			var got []string
			for _, m := range out {
				got = append(got, m.bare.s)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%s %q: names %q, want %q", fl, vs[0], got, want)
			}
			if fl == "RateLimit" {
				rs := []int{dA.Remaining, dB.Remaining}
				if same {
					rs = rs[1:]
				}
				for i, m := range out {
					if r, ok := m.params["r"]; !ok || r.n != int64(rs[i]) {
						t.Fatalf("RateLimit %q: member %d r %+v, want %d", vs[0], i, m.params["r"], rs[i])
					}
				}
			}
		}
		least := min(dA.Remaining, dB.Remaining)
		if got := h.Get("X-RateLimit-Remaining"); got != strconv.Itoa(least) {
			t.Fatalf("X-RateLimit-Remaining %q, want %d", got, least)
		}
		ra := h.Values("Retry-After")
		if allowed || never {
			if len(ra) != 0 {
				t.Fatalf("allowed %v never %v: Retry-After %q", allowed, never, ra)
			}
			return
		}
		want := max(ceilSeconds(dB.RetryAfter), 1)
		if dA.Remaining == 0 { // read before a same-named inner item replaces it
			want = max(want, ceilSeconds(dA.NextAfter))
		}
		if len(ra) != 1 || ra[0] != strconv.FormatInt(want, 10) {
			t.Fatalf("names %q, %q, outer %+v, inner %+v: Retry-After %q, want %d", nameA, nameB, dA, dB, ra, want)
		}
	})
}
