package httplimit_test

import (
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
)

// Any RemoteAddr and X-Forwarded-For: no panic, and a key is a valid
// prefix of the configured length.
func FuzzRemoteIP(f *testing.F) {
	f.Add("192.0.2.1:80", "198.51.100.1, 10.0.0.1", 1)
	f.Add("[2001:db8::1%eth0]:443", "::ffff:1.2.3.4", 0)
	f.Add("", ",,,", 3)
	f.Fuzz(func(t *testing.T, remote, xff string, proxies int) {
		proxies &= 3
		key := httplimit.RemoteIP(httplimit.WithTrustedProxies(proxies))
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = remote
		r.Header.Set("X-Forwarded-For", xff)
		k, err := key(r)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "httplimit: ") {
				t.Fatalf("error without prefix: %v", err)
			}
			return
		}
		p, perr := netip.ParsePrefix(k)
		if perr != nil {
			t.Fatalf("key %q is not a prefix: %v", k, perr)
		}
		if want := map[bool]int{true: 32, false: 64}[p.Addr().Is4()]; p.Bits() != want || p.Masked() != p {
			t.Fatalf("key %q: want a masked /%d", k, want)
		}
	})
}

// Any policy name New accepts is serialized as an sf-string that parses
// back to the same name.
func FuzzPolicyName(f *testing.F) {
	f.Add("default")
	f.Add(`a"b\c`)
	f.Add("é")
	f.Fuzz(func(t *testing.T, name string) {
		m, err := httplimit.New(limit.MustNew(1, 1, limit.WithName(name+"x"), limit.WithSize(1, 1)))
		if err != nil {
			return
		}
		w := httptest.NewRecorder()
		m.SetHeaders(w.Header(), limit.Decision{Burst: 1, Remaining: 1})
		v := w.Header().Get("RateLimit")
		got, rest, ok := parseSFString(v)
		if !ok || got != name+"x" || rest != ";r=1" {
			t.Fatalf("RateLimit %q does not parse back to %q (got %q, rest %q)", v, name+"x", got, rest)
		}
	})
}

// parseSFString parses a leading sf-string (RFC 9651 §4.2.5).
func parseSFString(s string) (string, string, bool) {
	if len(s) == 0 || s[0] != '"' {
		return "", "", false
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\':
			i++
			if i == len(s) || (s[i] != '"' && s[i] != '\\') {
				return "", "", false
			}
			b.WriteByte(s[i])
		case c == '"':
			return b.String(), s[i+1:], true
		case c < 0x20 || c > 0x7e:
			return "", "", false
		default:
			b.WriteByte(c)
		}
	}
	return "", "", false
}
