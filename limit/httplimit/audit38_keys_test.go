package httplimit_test

// Audit 38: RemoteIP's keys from hostile X-Forwarded-For lines and
// RemoteAddr forms (IPv4-mapped, zones, NAT64, ports, several lines), and
// a fuzz of the header parser: whatever a client writes left of the
// trusted entries, the key is the trusted entry's prefix.

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/lfgrudge/grudge/limit/httplimit"
)

func a38req(remote string, xff ...string) *http.Request {
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = remote
	for _, v := range xff {
		r.Header.Add("X-Forwarded-For", v)
	}
	return r
}

func TestAudit38RemoteIPHostileForms(t *testing.T) {
	cases := []struct {
		name    string
		opts    []httplimit.IPOption
		remote  string
		xff     []string
		want    string
		wantErr error
	}{
		{"mapped remote", nil, "[::ffff:203.0.113.7]:443", nil, "203.0.113.7/32", nil},
		{"mapped remote /24", []httplimit.IPOption{httplimit.WithIPv4Prefix(24)}, "[::ffff:203.0.113.7]:1", nil, "203.0.113.0/24", nil},
		{"mapped hex remote", nil, "[::ffff:cb00:7107]:1", nil, "203.0.113.7/32", nil},
		{"mapped zoned remote", nil, "[::ffff:203.0.113.7%eth0]:1", nil, "203.0.113.7/32", nil},
		{"zoned link-local", nil, "[fe80::1%eth0]:80", nil, "fe80::/64", nil},
		{"bare v6 remote", nil, "2001:db8:1:2:3:4:5:6", nil, "2001:db8:1:2::/64", nil},
		{"bracketed v6 remote", nil, "[2001:db8:1:2::9]", nil, "2001:db8:1:2::/64", nil},
		{"upper hex v6", nil, "[2001:DB8:1:2::9]:1", nil, "2001:db8:1:2::/64", nil},
		{"nat64 stays v6", nil, "[64:ff9b::203.0.113.7]:1", nil, "64:ff9b::/64", nil},
		{"xff ignored by default", nil, "198.51.100.1:5", []string{"203.0.113.7"}, "198.51.100.1/32", nil},
		{"xff one proxy", []httplimit.IPOption{httplimit.WithTrustedProxies(1)}, "10.0.0.1:5", []string{"6.6.6.6, 203.0.113.7"}, "203.0.113.7/32", nil},
		{"xff spaces tabs", []httplimit.IPOption{httplimit.WithTrustedProxies(1)}, "10.0.0.1:5", []string{"6.6.6.6,\t 203.0.113.7 \t"}, "203.0.113.7/32", nil},
		{"xff mapped", []httplimit.IPOption{httplimit.WithTrustedProxies(1)}, "10.0.0.1:5", []string{"::ffff:203.0.113.7"}, "203.0.113.7/32", nil},
		{"xff v4 port", []httplimit.IPOption{httplimit.WithTrustedProxies(1)}, "10.0.0.1:5", []string{"203.0.113.7:8080"}, "203.0.113.7/32", nil},
		{"xff v6 port", []httplimit.IPOption{httplimit.WithTrustedProxies(1)}, "10.0.0.1:5", []string{"[2001:db8:1:2::9]:8080"}, "2001:db8:1:2::/64", nil},
		{"xff zoned", []httplimit.IPOption{httplimit.WithTrustedProxies(1)}, "10.0.0.1:5", []string{"fe80::1%25eth0"}, "fe80::/64", nil},
		{"xff two lines, two proxies", []httplimit.IPOption{httplimit.WithTrustedProxies(2)}, "10.0.0.1:5", []string{"6.6.6.6, 203.0.113.7", "10.1.1.1"}, "203.0.113.7/32", nil},
		{"xff client forges a line", []httplimit.IPOption{httplimit.WithTrustedProxies(1)}, "10.0.0.1:5", []string{"1.1.1.1, 2.2.2.2", "203.0.113.7"}, "203.0.113.7/32", nil},
		{"xff empty entry", []httplimit.IPOption{httplimit.WithTrustedProxies(1)}, "10.0.0.1:5", []string{"203.0.113.7,"}, "", httplimit.ErrForwardedFor},
		{"xff too few", []httplimit.IPOption{httplimit.WithTrustedProxies(3)}, "10.0.0.1:5", []string{"1.1.1.1, 2.2.2.2"}, "", httplimit.ErrForwardedFor},
		{"xff absent", []httplimit.IPOption{httplimit.WithTrustedProxies(1)}, "10.0.0.1:5", nil, "", httplimit.ErrForwardedFor},
		{"xff garbage", []httplimit.IPOption{httplimit.WithTrustedProxies(1)}, "10.0.0.1:5", []string{"unknown"}, "", httplimit.ErrForwardedFor},
		{"xff quoted", []httplimit.IPOption{httplimit.WithTrustedProxies(1)}, "10.0.0.1:5", []string{`"203.0.113.7"`}, "", httplimit.ErrForwardedFor},
		{"xff leading zeros", []httplimit.IPOption{httplimit.WithTrustedProxies(1)}, "10.0.0.1:5", []string{"203.000.113.007"}, "", httplimit.ErrForwardedFor},
		{"unix socket", nil, "@", nil, "", httplimit.ErrNoClientIP},
		{"empty remote", nil, "", nil, "", httplimit.ErrNoClientIP},
		{"remote path", nil, "/run/x.sock", nil, "", httplimit.ErrNoClientIP},
		{"remote too many colons", nil, "1.2.3.4:80:90", nil, "", httplimit.ErrNoClientIP},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := httplimit.RemoteIP(c.opts...)(a38req(c.remote, c.xff...))
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("key %q err %v, want an error matching %v", got, err, c.wantErr)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("key %q err %v, want %q", got, err, c.want)
			}
		})
	}
}

// FuzzAudit38ForwardedForLines: a client's arbitrary header lines first,
// then the trusted proxies' entries split over one or two lines: the key
// is always the outermost trusted entry's prefix (doc.go: "anything
// further left was written by the client and is ignored"), and no input
// panics; an untrusted-only request keys by a valid prefix or errs with
// ErrForwardedFor.
func FuzzAudit38ForwardedForLines(f *testing.F) {
	f.Add("1.1.1.1, 2.2.2.2", "", []byte{203, 0, 113, 7}, []byte{10, 0, 0, 1}, uint8(0))
	f.Add("::ffff:1.2.3.4,", "x", []byte{32, 1, 13, 184, 0, 1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 9}, []byte{10, 0, 0, 1}, uint8(1))
	f.Add("\t,,,", ",", []byte{1, 2, 3, 4}, []byte{0, 100, 255, 155, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4}, uint8(3))
	f.Fuzz(func(t *testing.T, forged1, forged2 string, client, proxy []byte, form uint8) {
		ca, ok1 := netip.AddrFromSlice(client)
		pa, ok2 := netip.AddrFromSlice(proxy)
		if !ok1 || !ok2 {
			return
		}
		entry := func(a netip.Addr, f uint8) string {
			switch f % 3 {
			case 1:
				return netip.AddrPortFrom(a, 8080).String()
			case 2:
				if a.Is4() {
					return netip.AddrFrom16(a.As16()).String() // mapped
				}
			}
			return a.String()
		}
		want := netip.PrefixFrom(ca.Unmap(), 32)
		if !ca.Unmap().Is4() {
			want = netip.PrefixFrom(ca, 64)
		}
		want = want.Masked()
		var lines []string
		ce, pe := entry(ca, form), entry(pa, form/3)
		switch form % 4 {
		case 0:
			lines = []string{forged1 + "," + forged2 + "," + ce + ", " + pe}
		case 1:
			lines = []string{forged1, forged2 + ", " + ce, pe}
		case 2:
			lines = []string{forged1 + "," + ce, pe}
		default:
			lines = []string{forged1, forged2, ce + "," + pe}
		}
		for _, l := range lines {
			if strings.ContainsAny(l, "\r\n") {
				return // not a header line a server would pass on
			}
		}
		got, err := httplimit.RemoteIP(httplimit.WithTrustedProxies(2))(a38req("10.9.9.9:1", lines...))
		if err != nil || got != want.String() {
			t.Fatalf("lines %q: key %q err %v, want %q", lines, got, err, want)
		}
		// The client's lines alone, one proxy trusted: a valid folded
		// prefix or ErrForwardedFor, never a panic.
		got, err = httplimit.RemoteIP(httplimit.WithTrustedProxies(1))(a38req("10.9.9.9:1", forged1, forged2))
		if err != nil {
			if !errors.Is(err, httplimit.ErrForwardedFor) {
				t.Fatalf("forged %q %q: err %v", forged1, forged2, err)
			}
			return
		}
		p, perr := netip.ParsePrefix(got)
		if perr != nil || p != p.Masked() || p.Addr().Is4In6() || (p.Addr().Is4() && p.Bits() != 32) || (p.Addr().Is6() && p.Bits() != 64) || p.Addr().Zone() != "" {
			t.Fatalf("forged %q %q: key %q is not a folded prefix (%v)", forged1, forged2, got, perr)
		}
	})
}
