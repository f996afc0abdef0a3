package httplimit

import (
	"math"
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
