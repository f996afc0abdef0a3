package httplimit_test

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/lfgrudge/grudge/limit/httplimit"
)

// TestAudit52ForwardedForHuge: X-Forwarded-For as large as net/http
// accepts (1 MiB of header) in hostile shapes: a million empty entries
// before the trusted ones, a thousand lines, a huge single entry, the
// trusted entries after a client line full of commas. The key is always
// the entry the outermost trusted proxy wrote (doc.go: "the n-th from the
// right"), or ErrForwardedFor when that entry is not an address; never a
// panic. (It costs about 32 bytes of allocation per comma: see the
// report.)
func TestAudit52ForwardedForHuge(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		name  string
		lines []string
		n     int
		want  string
		err   error
	}{
		{"commas then trusted", []string{strings.Repeat(",", mib-40) + "203.0.113.9, 198.51.100.1"}, 2, "203.0.113.9/32", nil},
		{"commas then one", []string{strings.Repeat(",", mib-40) + "203.0.113.9"}, 1, "203.0.113.9/32", nil},
		{"commas, n on an empty entry", []string{strings.Repeat(",", mib-40) + "203.0.113.9"}, 2, "", httplimit.ErrForwardedFor},
		{"a thousand lines", append(strings.Split(strings.Repeat("10.0.0.1,", 999), ","), "2001:db8:a:b:c::1, 198.51.100.1"), 2, "2001:db8:a:b::/64", nil},
		{"a thousand lines, n far left", append(strings.Split(strings.Repeat("10.0.0.1,", 999), ","), "2001:db8:a:b:c::1, 198.51.100.1"), 1000, "10.0.0.1/32", nil},
		{"huge entry", []string{strings.Repeat("9", mib-40) + ", 198.51.100.1"}, 2, "", httplimit.ErrForwardedFor},
		{"huge zone", []string{"fe80::1%" + strings.Repeat("z", mib-40) + ", 198.51.100.1"}, 2, "fe80::/64", nil},
		{"more proxies than entries", []string{strings.Repeat(",", 1000)}, 1002, "", httplimit.ErrForwardedFor},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "198.51.100.77:1"
		for _, l := range c.lines {
			r.Header.Add("X-Forwarded-For", l)
		}
		got, err := httplimit.RemoteIP(httplimit.WithTrustedProxies(c.n))(r)
		if c.err != nil {
			if !errors.Is(err, c.err) || got != "" {
				t.Errorf("%s: key %q err %v; want %v", c.name, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: key %q err %v; want %q", c.name, got, err, c.want)
		}
	}
}
