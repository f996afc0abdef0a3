package httplimit_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// a101Addr builds an address from fuzz bytes: IPv4, IPv4-mapped IPv6,
// or IPv6 (with an optional zone).
func a101Addr(b []byte, kind uint8, zone string) netip.Addr {
	var a16 [16]byte
	copy(a16[:], b)
	switch kind % 3 {
	case 0:
		return netip.AddrFrom4([4]byte(a16[:4]))
	case 1:
		return netip.AddrFrom16(netip.AddrFrom4([4]byte(a16[:4])).As16()) // ::ffff:a.b.c.d
	}
	a := netip.AddrFrom16(a16)
	if a.Is4In6() {
		return a
	}
	if zone = strings.Map(func(r rune) rune {
		if r <= ' ' || r >= 0x7f || r == '%' || r == ']' || r == ',' || r == '[' {
			return -1
		}
		return r
	}, zone); zone != "" {
		a = a.WithZone(zone)
	}
	return a
}

// a101Want is the key the doc promises: IPv4 (mapped included) to its
// first v4 bits, IPv6 to its first v6 bits, CIDR form, no zone.
func a101Want(a netip.Addr, v4, v6 int) string {
	a = a.WithZone("")
	if a.Is4In6() {
		a = netip.AddrFrom4(a.As4())
	}
	if a.Is4() {
		return netip.PrefixFrom(a, v4).Masked().String()
	}
	return netip.PrefixFrom(a, v6).Masked().String()
}

// Passing check. Every form of RemoteAddr that names the same address
// ("ip:port", "[ip]:port", the bare ip, "[ip]") keys to the doc's prefix
// (doc.go: "RemoteIP (the default) keys by the connection's address,
// IPv6 folded to its /64 (WithIPv6Prefix to change), IPv4 kept whole";
// key.go: "IPv4-mapped IPv6 addresses count as IPv4", "The key is the
// prefix in CIDR form"), for every prefix length.
func FuzzAudit101HttpkeyRemoteAddrForms(f *testing.F) {
	f.Add([]byte{203, 0, 113, 7}, uint8(0), "", uint16(80), uint8(32), uint8(64))
	f.Add([]byte{10, 1, 2, 3}, uint8(1), "", uint16(0), uint8(24), uint8(128))
	f.Add([]byte{0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 2, 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4}, uint8(2), "eth0", uint16(65535), uint8(0), uint8(64))
	f.Add([]byte{0xfe, 0x80, 15: 1}, uint8(2), "25eth 0", uint16(443), uint8(32), uint8(127))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 1, 2, 3, 4}, uint8(2), "z", uint16(1), uint8(31), uint8(1))
	f.Add([]byte{0x00, 0x64, 0xff, 0x9b, 11: 0, 12: 192, 13: 0, 14: 2, 15: 1}, uint8(2), "", uint16(80), uint8(32), uint8(64))
	f.Fuzz(func(t *testing.T, b []byte, kind uint8, zone string, port uint16, v4, v6 uint8) {
		a := a101Addr(b, kind, zone)
		v4b, v6b := int(v4%33), int(v6%129)
		key := httplimit.RemoteIP(httplimit.WithIPv4Prefix(v4b), httplimit.WithIPv6Prefix(v6b))
		want := a101Want(a, v4b, v6b)
		forms := []string{netip.AddrPortFrom(a, port).String(), a.String()}
		if a.Is6() {
			forms = append(forms, "["+a.String()+"]")
		} else {
			forms = append(forms, "["+a.String()+"]:"+strconv.Itoa(int(port)))
		}
		for _, ra := range forms {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = ra
			got, err := key(r)
			if err != nil || got != want {
				t.Fatalf("RemoteAddr %q (v4 /%d, v6 /%d): key %q, %v; want %q", ra, v4b, v6b, got, err, want)
			}
		}
	})
}

// Passing check, end to end. Behind WithTrustedProxies(n), whatever the
// client writes to X-Forwarded-For (any bytes, commas, empty elements,
// extra lines, entries that look like addresses), its bucket is the one
// of the address the outermost trusted proxy appended (doc.go: "only the
// entry the outermost trusted proxy wrote (the n-th from the right: the
// address that proxy saw connect)"): a second request with other
// garbage is denied by the first's debt (burst 1), and another client's
// request through the same proxies is admitted.
func FuzzAudit101HttpkeyForwardedForSpoof(f *testing.F) {
	f.Add("9.9.9.9", "1.1.1.1, 2.2.2.2", uint8(1), true)
	f.Add("", ",,,,", uint8(2), false)
	f.Add("203.0.113.7, 203.0.113.8", "203.0.113.8", uint8(3), true)
	f.Add("::ffff:203.0.113.7", "[2001:db8::1]:80\n\n", uint8(1), false)
	f.Add("198.51.100.2,", "198.51.100.2, ", uint8(2), true)
	f.Add(strings.Repeat(",", 2000), strings.Repeat(" ,", 1000), uint8(4), true)
	f.Fuzz(func(t *testing.T, g1, g2 string, n uint8, joined bool) {
		proxies := int(n%4) + 1
		clk := limittest.NewFakeClock()
		clk.Set(1_000_000)
		lim := limit.MustNew(limit.Every(time.Hour), 1, limit.WithClock(clk), limit.WithSize(4, 1024))
		m, err := httplimit.New(lim, httplimit.WithKey(httplimit.RemoteIP(httplimit.WithTrustedProxies(proxies))))
		if err != nil {
			t.Fatal(err)
		}
		h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		// The trusted chain: the outermost proxy appends the client's
		// address, each inner one the address of the proxy before it.
		chain := func(client string) []string {
			out := []string{client}
			for i := 1; i < proxies; i++ {
				out = append(out, "10.0.0."+strconv.Itoa(i))
			}
			return out
		}
		do := func(garbage, client string) int {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = "10.0.0.99:1234"
			var lines []string
			if garbage != "" {
				lines = strings.Split(garbage, "\n")
			}
			if joined { // proxies join what they received and append
				all := append(lines, chain(client)...)
				lines = []string{strings.Join(all, ", ")}
			} else { // proxies append lines of their own
				lines = append(lines, chain(client)...)
			}
			r.Header["X-Forwarded-For"] = lines
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			return rec.Code
		}
		if c := do(g1, "192.0.2.1"); c != http.StatusOK {
			t.Fatalf("first request (garbage %q): %d, want 200", g1, c)
		}
		if c := do(g2, "192.0.2.1"); c != http.StatusTooManyRequests {
			t.Fatalf("same client, other garbage %q after %q: %d, want 429 (the client changed its key)", g2, g1, c)
		}
		if c := do(g1, "192.0.2.2"); c != http.StatusOK {
			t.Fatalf("another client (garbage %q): %d, want 200", g1, c)
		}
	})
}

// Passing check. Hostile X-Forwarded-For values never panic the
// middleware and never reach the body: a request whose trusted entry is
// missing or unreadable is 400 with the status text only (doc.go: "the
// default answers 400 for the client's own faults ... with the status
// text only: no error text ever reaches a response") and debits nothing.
func TestAudit101HttpkeyForwardedForHostile(t *testing.T) {
	clk := limittest.NewFakeClock()
	lim := limit.MustNew(limit.Every(time.Hour), 1, limit.WithClock(clk))
	m, err := httplimit.New(lim, httplimit.WithKey(httplimit.RemoteIP(httplimit.WithTrustedProxies(2))))
	if err != nil {
		t.Fatal(err)
	}
	h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	big := strings.Repeat("<script>", 1<<12)
	for _, lines := range [][]string{
		nil, {""}, {","}, {"1.2.3.4"}, {big + ", 1.2.3.4"}, {"unknown, 1.2.3.4"},
		{"1.2.3.4%eth0, 5.6.7.8"}, {"[2001:db8::1], 5.6.7.8"}, {"1.2.3.4 , ", ""},
		{"for=192.0.2.1, 5.6.7.8"}, {"\x00, 5.6.7.8"}, {"fe80::1%, 5.6.7.8"},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header["X-Forwarded-For"] = lines
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		body := rec.Body.String()
		if rec.Code != http.StatusBadRequest || strings.TrimSpace(body) != http.StatusText(http.StatusBadRequest) {
			t.Errorf("X-Forwarded-For %.60q: %d %.80q, want 400 with the status text only", lines, rec.Code, body)
		}
		if rec.Header().Get("RateLimit") != "" || rec.Header().Get("Retry-After") != "" {
			t.Errorf("X-Forwarded-For %.60q: rate-limit fields on an undecided answer: %v", lines, rec.Header())
		}
	}
	if got := lim.Stats(); got.Admitted+got.Denied != 0 {
		t.Errorf("undecided requests were counted: %+v", got)
	}
}

// Passing check. Only X-Forwarded-For is ever read, and only with
// WithTrustedProxies: by default a client's X-Forwarded-For, Forwarded
// (RFC 7239) and X-Real-IP change nothing (doc.go: "X-Forwarded-For is
// used only with WithTrustedProxies(n) ... it is never trusted by
// default"), and with trusted proxies a request that carries its address
// only in Forwarded or X-Real-IP is refused (ErrForwardedFor), not keyed
// by them.
func TestAudit101HttpkeyOtherForwardingHeadersIgnored(t *testing.T) {
	spoof := func(r *http.Request) {
		r.Header.Set("Forwarded", `for=192.0.2.60;proto=http, for="[2001:db8::1]"`)
		r.Header.Set("X-Real-IP", "198.51.100.9")
		r.Header.Set("True-Client-IP", "198.51.100.10")
		r.Header.Set("CF-Connecting-IP", "198.51.100.11")
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "203.0.113.5:4000"
	spoof(r)
	r.Header.Set("X-Forwarded-For", "192.0.2.1")
	if k, err := httplimit.RemoteIP()(r); err != nil || k != "203.0.113.5/32" {
		t.Errorf("default RemoteIP with spoofed forwarding headers: %q, %v; want 203.0.113.5/32", k, err)
	}
	r.Header.Del("X-Forwarded-For")
	if k, err := httplimit.RemoteIP(httplimit.WithTrustedProxies(1))(r); !errors.Is(err, httplimit.ErrForwardedFor) {
		t.Errorf("trusted proxies, no X-Forwarded-For but Forwarded/X-Real-IP: %q, %v; want ErrForwardedFor", k, err)
	}
}
