package httplimit

import (
	"math"
	"net/http"
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
// instead of repeating them. The field's lines are taken as one List
// (RFC 9110 §5.3, RFC 9651 §4.2: joined by ", "); a field not set yet
// is just add, and so is one
// whose sf-strings do not close (a recipient would discard the whole
// field, and the added item with it: RFC 9651 §4.2).
func addItem(h http.Header, field string, own []policy, add string) {
	old := h.Values(field)
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
		if names(own, bareItem(member)) {
			continue
		}
		b.WriteString(member)
		b.WriteString(", ")
	}
	b.WriteString(add)
	h.Set(field, b.String())
}

// exhaustedT returns the largest t of the RateLimit members in lines
// (the field's lines, taken as one List) that have no quota left (r=0),
// 0 if none: a retry before it is denied by that policy again.
func exhaustedT(lines []string) int64 {
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
// one (the parameters follow the bare Item, each ";key=value").
func param(member, key string) (int64, bool) {
	rest := member[len(bareItem(member)):]
	for rest != "" {
		rest = rest[1:] // the ';'
		p := bareItem(rest)
		rest = rest[len(p):]
		k, v, _ := strings.Cut(strings.TrimLeft(p, " "), "=")
		if k == key {
			n, err := strconv.ParseInt(v, 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// laterRetry reports whether old, a Retry-After value already set
// (delay-seconds, or an HTTP-date: RFC 9110 §10.2.3), is not earlier
// than secs seconds from now. An unreadable value is not.
func laterRetry(old string, secs int64) bool {
	if old == "" {
		return false
	}
	if n, err := strconv.ParseInt(old, 10, 64); err == nil {
		return n >= secs
	}
	at, err := http.ParseTime(old)
	return err == nil && !at.Before(time.Now().Add(time.Duration(secs)*time.Second))
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
// members' text, trimmed of spaces and tabs, at the commas outside an
// sf-string (a policy name may hold a comma); empty members are
// dropped. ok is false when an sf-string does not close.
func listMembers(v string) (out []string, ok bool) {
	start, quoted := 0, false
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case quoted && c == '\\':
			i++ // the escaped character
		case c == '"':
			quoted = !quoted
		case !quoted && c == ',':
			if m := strings.Trim(v[start:i], " \t"); m != "" {
				out = append(out, m)
			}
			start = i + 1
		}
	}
	if m := strings.Trim(v[start:], " \t"); m != "" {
		out = append(out, m)
	}
	return out, !quoted
}

// bareItem returns a List member's Item without its parameters: the
// text up to the first ';' outside an sf-string.
func bareItem(member string) string {
	quoted := false
	for i := 0; i < len(member); i++ {
		switch c := member[i]; {
		case quoted && c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case !quoted && c == ';':
			return member[:i]
		}
	}
	return member
}
