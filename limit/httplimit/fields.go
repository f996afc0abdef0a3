package httplimit

import (
	"math"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lfgrudge/grudge/internal/common"
	"github.com/lfgrudge/grudge/limit"
)

// Draft is the version of the IETF RateLimit header fields followed: -10,
// the latest with published text (RateLimit-Policy with q and w;
// RateLimit with r, the remaining quota, and t, the seconds until more
// quota is available; Retry-After not earlier than t; the
// quota-exceeded problem type).
const Draft = "draft-ietf-httpapi-ratelimit-headers-10"

// maxSFInteger is the largest Integer of RFC 9651 Structured Fields
// (15 decimal digits).
const maxSFInteger = 999_999_999_999_999

// checkName reports whether name can be a Structured Field String
// (RFC 9651 §3.3.3: printable ASCII, 0x20 to 0x7E).
func checkName(name string) error {
	if name == "" {
		return bad("Name", name, "policy name must not be empty")
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < 0x20 || c > 0x7e {
			return bad("Name", name, "policy name must be printable ASCII (an sf-string); got %q", name)
		}
	}
	return nil
}

// sfString serializes s (checked by checkName) as an sf-string: quoted,
// with '"' and '\' escaped by a backslash.
func sfString(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	b.WriteByte('"')
	return b.String()
}

// ceilSeconds returns d in whole seconds rounded up, clamped to
// [0, maxSFInteger].
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := (d + time.Second - 1) / time.Second
	if d > time.Duration(math.MaxInt64)-time.Second || int64(s) > maxSFInteger {
		return maxSFInteger
	}
	return int64(s)
}

// policyField returns the RateLimit-Policy item of the draft for a token
// bucket: the quota q is the burst (what a full bucket admits at once)
// and the window w the time to refill it from empty, burst/rate seconds
// rounded up (at least 1, at most the largest integer the field takes).
func policyField(quotedName string, p limit.Policy, refill time.Duration) string {
	return quotedName + ";q=" + strconv.FormatInt(sfInt(p.Burst), 10) + ";w=" + strconv.FormatInt(windowSeconds(p, refill), 10)
}

// windowSeconds is ceil(burst/rate), or of refill (the limiter's own,
// 0 when it does not say) when that is longer, in whole seconds, in [1,
// maxSFInteger], computed in float64 seconds (a Duration overflows past
// 292 years). A quotient within 4 ulps of a whole number is that
// number: a rate the limiter holds exactly (Every(140ms), burst 50: 7 s)
// comes out of the division a few ulps above it, and would otherwise
// announce a second too many. (A relative 1e-9 rounded windows of 5e8 s
// and more down by up to a second: audit 52.)
func windowSeconds(p limit.Policy, refill time.Duration) int64 {
	w := common.SnapWhole(float64(p.Burst) / float64(p.Limit))
	// The refill as the limiter holds the policy, when it says: an
	// inexact policy refills a little slower than Burst/Limit (audit26:
	// Every(999ms) x 10000 announced 9990 s for a 10000 s refill).
	w = max(w, refill.Seconds())
	w = math.Ceil(w)
	if !(w < maxSFInteger) {
		return maxSFInteger
	}
	return max(int64(w), 1)
}

// rateLimitField returns the RateLimit value of the draft: r the
// remaining quota (the Decision's Remaining) and t the seconds until
// additional quota is available (the next whole token: NextAfter rounded
// up), left out when the bucket is full (no more quota can become
// available).
func rateLimitField(quotedName string, d limit.Decision) string {
	f := quotedName + ";r=" + strconv.FormatInt(sfInt(d.Remaining), 10)
	if d.NextAfter > 0 {
		f += ";t=" + strconv.FormatInt(ceilSeconds(d.NextAfter), 10)
	}
	return f
}

// sfInt returns n capped at the largest Integer a Structured Field holds
// (15 digits): a burst or Remaining above it (the Redis module's bursts
// reach 2^53) is announced as that, less than the truth, never more.
func sfInt(n int) int64 { return min(int64(n), maxSFInteger) }

// addItem sets field in h to add appended to the List the field already
// holds, less every member that names one of own: stacked middlewares
// (a global limit around a per-route one) each list their policies,
// and a Middleware that sets the field again replaces its own items
// instead of repeating them. The field's lines, under any spelling of
// its name, are taken as one List (RFC 9110 §5.3, RFC 9651 §4.2: joined
// by ", "); a field not set yet is just add, and so is one whose
// strings or inner lists do not close (a recipient would discard the
// whole field, and the added item with it: RFC 9651 §4.2); a member
// that is not an Item or an Inner List (sfMember: "foo bar", "1.2.3")
// is dropped, for the same reason (audit 138).
func addItem(h http.Header, field string, own []policy, add string) {
	old := fieldLines(h, field)
	if len(old) == 0 {
		h.Set(field, add)
		return
	}
	members, ok := listMembers(strings.Join(old, ", "))
	if !ok {
		h.Set(field, add)
		return
	}
	var b strings.Builder
	for _, member := range members {
		if names(own, bareItem(member)) || !sfMember(member) {
			continue
		}
		b.WriteString(member)
		b.WriteString(", ")
	}
	b.WriteString(add)
	h.Set(field, b.String())
}

// fieldLines returns the lines of field in h, the canonical key's first,
// then those set under another spelling (h["RateLimit"] = ..., which
// h.Values does not see) in the spellings' byte order, which it moves to
// the canonical key: the field is then written under one key. The order
// is fixed, not the map's: lines that only parse joined in one order (a
// string split across two spellings) give one answer (audit 141).
func fieldLines(h http.Header, field string) []string {
	key := http.CanonicalHeaderKey(field)
	var others []string // nil unless an outer layer used another spelling
	for k := range h {
		if k != key && strings.EqualFold(k, field) {
			others = append(others, k)
		}
	}
	slices.Sort(others)
	for _, k := range others {
		h[key] = append(h[key], h[k]...)
		delete(h, k)
	}
	return h[key]
}

// exhaustedT returns the largest t of the RateLimit members in h (the
// field's lines, under any spelling, taken as one List) that have no
// quota left (r=0), 0 if none: a retry before it is denied by that
// policy again.
func exhaustedT(h http.Header) int64 {
	lines := fieldLines(h, "RateLimit")
	if len(lines) == 0 {
		return 0
	}
	members, _ := listMembers(strings.Join(lines, ", "))
	var t int64
	for _, m := range members {
		if r, ok := param(m, "r"); ok && r == 0 {
			if v, ok := param(m, "t"); ok {
				t = max(t, v)
			}
		}
	}
	return t
}

// param returns the Integer parameter key of a List member, if it has
// one: the parameters follow the bare Item, each ";key" or ";key=value",
// and of a key given more than once the last counts (RFC 9651 §4.2.3.2).
// An Integer beyond int64 reads as the largest.
func param(member, key string) (int64, bool) {
	rest := member[len(bareItem(member)):]
	var n int64
	found := false
	for rest != "" {
		rest = rest[1:] // the ';'
		p := bareItem(rest)
		rest = rest[len(p):]
		k, v, _ := strings.Cut(strings.TrimLeft(p, " "), "=")
		if k != key {
			continue
		}
		x, err := strconv.ParseInt(v, 10, 64)
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			x, err = math.MaxInt64, nil
			if strings.HasPrefix(v, "-") {
				x = math.MinInt64
			}
		}
		n, found = x, err == nil
	}
	return n, found
}

// extremeInt returns the least (least) or the greatest of the lines
// that read as an integer (surrounding spaces and tabs allowed), and
// whether any did.
func extremeInt(lines []string, least bool) (int64, bool) {
	var x int64
	found := false
	for _, v := range lines {
		n, err := strconv.ParseInt(strings.Trim(v, " \t"), 10, 64)
		if err == nil && (!found || least && n < x || !least && n > x) {
			x, found = n, true
		}
	}
	return x, found
}

// retryAfter is a Retry-After value as a delay from now: whole seconds
// less frac nanoseconds (0 <= frac < 1e9). Delay-seconds are exact (frac
// 0); an HTTP-date, which has whole seconds, is its difference from now
// to the nanosecond (frac is now's fraction of a second), so a date
// floor(now)+10 s is 10 s less that fraction away, and 0 once past.
// whole alone is the delay rounded up.
type retryAfter struct{ whole, frac int64 }

// after reports whether a stands for a later instant than b.
func (a retryAfter) after(b retryAfter) bool {
	if a.whole != b.whole {
		return a.whole > b.whole // frac < 1 s: the whole seconds decide
	}
	return a.frac < b.frac
}

// atLeast reports whether a is at least n seconds.
func (a retryAfter) atLeast(n int64) bool {
	return a.whole > n || a.whole == n && a.frac == 0
}

// parseRetryAfter reads a Retry-After value (delay-seconds, with or
// without surrounding spaces, or an HTTP-date: RFC 9110 §10.2.3) as a
// delay from now; false if it is neither. A delay beyond int64 seconds
// reads as the largest.
func parseRetryAfter(v string, now time.Time) (retryAfter, bool) {
	v = strings.Trim(v, " \t")
	if v == "" {
		return retryAfter{}, false
	}
	if strings.Trim(v, "0123456789") == "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return retryAfter{whole: math.MaxInt64}, true // all digits: only out of range
		}
		return retryAfter{whole: n}, true
	}
	at, ok := parseHTTPDate(v, now)
	if !ok {
		return retryAfter{}, false
	}
	// In whole Unix seconds: no Duration to overflow past 292 years.
	d := at.Unix() - now.Unix()
	if d <= 0 {
		return retryAfter{}, true // past (or within now's second, before now)
	}
	return retryAfter{whole: d, frac: int64(now.Nanosecond())}, true
}

// retryAfterText returns a readable Retry-After value v as a sender
// writes it (RFC 9110 §10.2.3, §5.6.7): delay-seconds as a plain integer,
// an HTTP-date in IMF-fixdate form (a kept rfc850 or asctime date, whose
// two-digit year or spacing a recipient may read otherwise, is rewritten).
func retryAfterText(v string, now time.Time) string {
	v = strings.Trim(v, " \t")
	if strings.Trim(v, "0123456789") == "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return strconv.FormatInt(n, 10)
		}
		return strconv.FormatInt(maxSFInteger, 10) // beyond int64
	}
	if at, ok := parseHTTPDate(v, now); ok {
		if at.UTC().Year() > 9999 { // no IMF-fixdate holds it (four digits)
			return strconv.FormatInt(min(max(at.Unix()-now.Unix(), 0), maxSFInteger), 10)
		}
		return at.UTC().Format(http.TimeFormat)
	}
	return v
}

// leapSecond matches a time of day at second 60 (RFC 9110 §5.6.7 allows
// 23:59:60, a leap second), which http.ParseTime refuses.
var leapSecond = regexp.MustCompile(`\b(\d\d:\d\d):60\b`)

// parseHTTPDate reads an HTTP-date in any of its three forms, as RFC
// 9110 §5.6.7 asks a recipient to: a leap second (second 60) is the
// second after 59, and an rfc850 date's two-digit year is the one within
// 50 years ahead of now, else the most recent past year with those
// digits (Go's parser takes 69 to 99 as 19xx, 00 to 68 as 20xx).
func parseHTTPDate(v string, now time.Time) (time.Time, bool) {
	leap := time.Duration(0)
	if loc := leapSecond.FindStringSubmatchIndex(v); loc != nil {
		v = v[:loc[3]] + ":59" + v[loc[1]:]
		leap = time.Second
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return time.Time{}, false
	}
	if _, err := time.Parse(time.RFC850, v); err == nil {
		// The instant in now's century; a century earlier if that is
		// more than 50 years ahead of now, a century later if that one
		// is not. Rebuilt from its fields: Feb 29 of a year that has
		// none is no date at all.
		u := now.UTC()
		at2 := func(y int) (time.Time, bool) {
			d := time.Date(y, at.Month(), at.Day(), at.Hour(), at.Minute(), at.Second(), 0, time.UTC)
			return d, d.Day() == at.Day()
		}
		y := u.Year()/100*100 + at.Year()%100
		d, ok := at2(y)
		switch {
		case d.After(u.AddDate(50, 0, 0)):
			d, ok = at2(y - 100)
		case !d.Add(100 * 365 * 24 * time.Hour).After(u.AddDate(50, 0, 0)):
			if d2, ok2 := at2(y + 100); !d2.After(u.AddDate(50, 0, 0)) {
				d, ok = d2, ok2
			}
		}
		if !ok {
			return time.Time{}, false
		}
		at = d
	}
	return at.Add(leap), true
}

// names reports whether item is the sf-string of one of own's names
// (serialized the one way sfString writes it).
func names(own []policy, item string) bool {
	for _, p := range own {
		if p.quoted == item {
			return true
		}
	}
	return false
}

// listMembers splits a Structured Field List (RFC 9651 §3.1) into its
// members' text, trimmed of spaces and tabs, at the commas outside a
// String, a Display String and an Inner List (a policy name may hold a
// comma); empty members are dropped. ok is false when one of them does
// not close.
func listMembers(v string) (out []string, ok bool) {
	for {
		i, closed := indexTop(v, ',')
		if !closed {
			return out, false
		}
		m := v
		if i >= 0 {
			m = v[:i]
		}
		if m = strings.Trim(m, " \t"); m != "" {
			out = append(out, m)
		}
		if i < 0 {
			return out, true
		}
		v = v[i+1:]
	}
}

// bareItem returns a List member's Item (or Inner List) without its
// parameters: the text up to the first ';' outside a String, a Display
// String and an Inner List.
func bareItem(member string) string {
	if i, closed := indexTop(member, ';'); closed && i >= 0 {
		return member[:i]
	}
	return member
}

// indexTop returns the index of the first c in v outside a String, a
// Display String and an Inner List (skipNested), or -1; closed is false
// when one of them runs to the end of v unclosed.
func indexTop(v string, c byte) (int, bool) {
	for i := 0; i < len(v); i++ {
		j, closed := skipNested(v, i)
		if !closed {
			return -1, false
		}
		if j > i {
			i = j - 1
			continue
		}
		if v[i] == c {
			return i, true
		}
	}
	return -1, true
}

// skipNested returns the index just past the String (`"..."`, where a
// backslash escapes the next character), Display String (`%"..."`,
// where it does not: RFC 9651 §3.3.8) or Inner List (`(...)`, which may
// hold Strings) starting at v[i], or i if none starts there; closed is
// false when it runs to the end of v unclosed.
func skipNested(v string, i int) (int, bool) {
	switch v[i] {
	case '"':
		display := i > 0 && v[i-1] == '%'
		for j := i + 1; j < len(v); j++ {
			switch v[j] {
			case '\\':
				if !display {
					j++
				}
			case '"':
				return j + 1, true
			}
		}
		return len(v), false
	case '(':
		for j := i + 1; j < len(v); j++ {
			switch v[j] {
			case ')':
				return j + 1, true
			case '"':
				k, closed := skipNested(v, j)
				if !closed {
					return len(v), false
				}
				j = k - 1
			}
		}
		return len(v), false
	}
	return i, true
}
