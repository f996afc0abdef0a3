package httplimit

import (
	"net/http"
	"testing"
	"time"
)

// TestAudit150LegacySignedZeros: f9319d3 writes an outer negative legacy
// value as 0. Outer spellings of zero ("+0", "-0", "00", "-00", " -0\t")
// read as 0 and stay, written "0" (one line); a negative Limit or Reset
// that stays beside them is written 0, a positive one as it is (the
// least Limit, the latest Reset); "-0" beside "-7" for Reset gives 0; a
// Remaining beyond int64 in either sign is unreadable (ours are set),
// and MinInt64 itself is readable and written 0.
func TestAudit150LegacySignedZeros(t *testing.T) {
	m, d := a104Mid(t, time.Second, WithLegacyHeaders(true))
	d.Allowed, d.RetryAfter, d.NextAfter, d.Remaining, d.Burst = true, 0, 0, 3, 5
	for _, c := range []struct {
		rem, lim, reset    []string
		wRem, wLim, wReset string
	}{
		{[]string{"+0"}, []string{"9"}, []string{"4"}, "0", "9", "4"},
		{[]string{"-0"}, []string{"-0"}, []string{"-0"}, "0", "0", "0"},
		{[]string{"00"}, []string{"007"}, []string{"+8"}, "0", "7", "8"},
		{[]string{"-00"}, []string{"-5", "6"}, []string{"-7", "-0"}, "0", "0", "0"},
		{[]string{" -0\t"}, []string{"9"}, []string{"-7", "2"}, "0", "9", "2"},
		{[]string{"-9223372036854775808"}, []string{"-9223372036854775808"}, []string{"-9223372036854775808"}, "0", "0", "0"},
		{[]string{"3"}, []string{"9223372036854775807"}, []string{"9223372036854775807"}, "3", "9223372036854775807", "9223372036854775807"},
		{[]string{"-99999999999999999999"}, []string{"9"}, []string{"9"}, "3", "5", "0"},
		{[]string{"99999999999999999999"}, []string{"9"}, []string{"9"}, "3", "5", "0"},
	} {
		h := http.Header{}
		h["X-Ratelimit-Remaining"] = append([]string(nil), c.rem...)
		h["X-Ratelimit-Limit"] = append([]string(nil), c.lim...)
		h["X-Ratelimit-Reset"] = append([]string(nil), c.reset...)
		m.SetHeaders(h, d)
		rem, lim, reset := h.Values("X-Ratelimit-Remaining"), h.Values("X-Ratelimit-Limit"), h.Values("X-Ratelimit-Reset")
		if len(rem) != 1 || len(lim) != 1 || len(reset) != 1 || rem[0] != c.wRem || lim[0] != c.wLim || reset[0] != c.wReset {
			t.Errorf("outer Remaining %q, Limit %q, Reset %q: got %q, %q, %q; want %q, %q, %q",
				c.rem, c.lim, c.reset, rem, lim, reset, c.wRem, c.wLim, c.wReset)
		}
	}
}
