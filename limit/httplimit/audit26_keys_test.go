package httplimit_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
)

// audit26Req is a GET / with RemoteAddr remote and the header lines hdr
// (name, value pairs, added in order: repeated names give several lines).
func audit26Req(remote string, hdr ...string) *http.Request {
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = remote
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Add(hdr[i], hdr[i+1])
	}
	return r
}

// audit26Key runs k on the request and returns the key or the error.
func audit26Key(t *testing.T, k httplimit.KeyFunc, remote string, hdr ...string) (string, error) {
	t.Helper()
	return k(audit26Req(remote, hdr...))
}

// audit26CountLim is a Limiter that admits everything and counts its calls.
type audit26CountLim struct {
	calls atomic.Int64
	keys  atomic.Value // last key
}

func (l *audit26CountLim) DecideContext(_ context.Context, key string, n int) (limit.Decision, error) {
	l.calls.Add(1)
	l.keys.Store(key)
	return limit.Decision{Allowed: true, Limit: 10, Burst: 5, Remaining: 4, Policy: "p", NextAfter: 1}, nil
}
func (l *audit26CountLim) Policies() []limit.Policy {
	return []limit.Policy{{Name: "p", Limit: 10, Burst: 5}}
}

// RemoteIP without trusted proxies: the documented folding of
// RemoteAddr in every form net/http or a test may set, IPv4-mapped
// addresses as IPv4 (also under a non-default IPv4 prefix), zones
// dropped, X-Forwarded-For ignored.
func TestAudit26RemoteIPForms(t *testing.T) {
	def := httplimit.RemoteIP()
	v4p24 := httplimit.RemoteIP(httplimit.WithIPv4Prefix(24))
	v6p48 := httplimit.RemoteIP(httplimit.WithIPv6Prefix(48))
	v6p128 := httplimit.RemoteIP(httplimit.WithIPv6Prefix(128))
	for _, c := range []struct {
		k      httplimit.KeyFunc
		remote string
		want   string
	}{
		{def, "192.0.2.1:80", "192.0.2.1/32"},
		{def, "192.0.2.1", "192.0.2.1/32"},
		{def, "[2001:db8:1:2:3:4:5:6]:443", "2001:db8:1:2::/64"},
		{def, "2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"},
		{def, "[2001:db8:1:2:3:4:5:6]", "2001:db8:1:2::/64"},
		{def, "[::ffff:192.0.2.1]:80", "192.0.2.1/32"},
		{def, "::ffff:192.0.2.1", "192.0.2.1/32"},
		{def, "[fe80::1%eth0]:80", "fe80::/64"},
		{def, "fe80::1%eth0", "fe80::/64"},
		{def, "[::1]:1", "::/64"},
		{v4p24, "192.0.2.77:1", "192.0.2.0/24"},
		{v4p24, "[::ffff:192.0.2.77]:1", "192.0.2.0/24"}, // mapped: IPv4 prefix, not the IPv6 one
		{v6p48, "[2001:db8:1:2::9]:1", "2001:db8:1::/48"},
		{v6p128, "[2001:db8:1:2::9%x]:1", "2001:db8:1:2::9/128"},
		{httplimit.RemoteIP(httplimit.WithIPv4Prefix(0)), "203.0.113.9:1", "0.0.0.0/0"},
	} {
		got, err := audit26Key(t, c.k, c.remote, "X-Forwarded-For", "198.51.100.66")
		if err != nil || got != c.want {
			t.Errorf("RemoteAddr %q: key %q, %v; want %q", c.remote, got, err, c.want)
		}
	}
}

// RemoteAddr without an IP ("", "@", a socket path): ErrNoClientIP, and
// the default answer is 500 with the status text only; the limiter is
// not asked.
func TestAudit26NoClientIP(t *testing.T) {
	lim := &audit26CountLim{}
	h := httplimit.Wrap(lim, ok)
	for _, remote := range []string{"", "@", "/run/app.sock", ":80", "unknown", "[]:80", "1.2.3.4%eth0:80"} {
		_, err := audit26Key(t, httplimit.RemoteIP(), remote)
		if !errors.Is(err, httplimit.ErrNoClientIP) || !strings.HasPrefix(err.Error(), "httplimit: ") {
			t.Errorf("RemoteAddr %q: %v; want ErrNoClientIP", remote, err)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, audit26Req(remote))
		if w.Code != 500 || w.Body.String() != "Internal Server Error\n" {
			t.Errorf("RemoteAddr %q: %d %q; want 500 with the status text only", remote, w.Code, w.Body.String())
		}
		if w.Header().Get("RateLimit-Policy") != "" || w.Header().Get("Retry-After") != "" {
			t.Errorf("RemoteAddr %q: an undecided answer carries rate-limit fields", remote)
		}
	}
	if lim.calls.Load() != 0 {
		t.Fatalf("the limiter was asked %d times for requests without a key", lim.calls.Load())
	}
}

// Out-of-range prefixes and proxy counts panic with "httplimit:".
func TestAudit26RemoteIPPanics(t *testing.T) {
	for _, o := range [][]httplimit.IPOption{
		{httplimit.WithIPv4Prefix(-1)}, {httplimit.WithIPv4Prefix(33)},
		{httplimit.WithIPv6Prefix(-1)}, {httplimit.WithIPv6Prefix(129)},
		{httplimit.WithTrustedProxies(-1)},
	} {
		func() {
			defer func() {
				if p, _ := recover().(string); !strings.HasPrefix(p, "httplimit:") {
					t.Errorf("panic %v; want one starting httplimit:", p)
				}
			}()
			httplimit.RemoteIP(o...)
		}()
	}
}

// X-Forwarded-For with n trusted proxies: exactly the n-th entry from
// the right, over all the header lines in order, whatever surrounds it
// (spaces, tabs, a port, brackets with a port, a zone, an IPv4-mapped
// address: IPv4) and whatever RemoteAddr says.
func TestAudit26ForwardedForEntry(t *testing.T) {
	one := httplimit.RemoteIP(httplimit.WithTrustedProxies(1))
	two := httplimit.RemoteIP(httplimit.WithTrustedProxies(2))
	for _, c := range []struct {
		k     httplimit.KeyFunc
		lines []string
		want  string
	}{
		{one, []string{"198.51.100.7"}, "198.51.100.7/32"},
		{one, []string{"6.6.6.6, 198.51.100.7"}, "198.51.100.7/32"},
		{one, []string{"6.6.6.6,198.51.100.7"}, "198.51.100.7/32"},
		{one, []string{" \t198.51.100.7\t "}, "198.51.100.7/32"},
		{one, []string{"198.51.100.7:5555"}, "198.51.100.7/32"},
		{one, []string{"[2001:db8:7:8::1]:443"}, "2001:db8:7:8::/64"},
		{one, []string{"2001:db8:7:8::1"}, "2001:db8:7:8::/64"},
		{one, []string{"fe80::1%eth0"}, "fe80::/64"},
		{one, []string{"::ffff:198.51.100.7"}, "198.51.100.7/32"},
		{one, []string{"[::ffff:198.51.100.7]:80"}, "198.51.100.7/32"},
		{one, []string{"6.6.6.6", "198.51.100.7"}, "198.51.100.7/32"},
		{two, []string{"6.6.6.6, 198.51.100.7, 10.0.0.1"}, "198.51.100.7/32"},
		{two, []string{"6.6.6.6, 198.51.100.7", "10.0.0.1"}, "198.51.100.7/32"},
		{two, []string{"6.6.6.6", "198.51.100.7", "10.0.0.1"}, "198.51.100.7/32"},
		{two, []string{"", "198.51.100.7, 10.0.0.1"}, "198.51.100.7/32"},
		{two, []string{",,,junk, 198.51.100.7", "10.0.0.1"}, "198.51.100.7/32"},
	} {
		var hdr []string
		for _, l := range c.lines {
			hdr = append(hdr, "X-Forwarded-For", l)
		}
		for _, remote := range []string{"10.9.9.9:1", "", "@"} {
			got, err := audit26Key(t, c.k, remote, hdr...)
			if err != nil || got != c.want {
				t.Errorf("XFF %q, RemoteAddr %q: key %q, %v; want %q", c.lines, remote, got, err, c.want)
			}
		}
	}
}

// X-Forwarded-For refused: too few entries, no header, an empty or
// unparsable trusted entry. ErrForwardedFor, 400 with the status text
// only (never the client's text echoed), the limiter not asked.
func TestAudit26ForwardedForRefused(t *testing.T) {
	lim := &audit26CountLim{}
	two := httplimit.RemoteIP(httplimit.WithTrustedProxies(2))
	h := httplimit.Wrap(lim, ok, httplimit.WithKey(two))
	for _, lines := range [][]string{
		nil,
		{"198.51.100.7"},
		{""},
		{"198.51.100.7, , 10.0.0.1"},
		{"<script>, 10.0.0.1"},
		{"unknown, 10.0.0.1"},
		{"[2001:db8::1, 10.0.0.1"},
		{"198.51.100.7:99999, 10.0.0.1"},
		{"_gateway, 10.0.0.1"},
	} {
		var hdr []string
		for _, l := range lines {
			hdr = append(hdr, "X-Forwarded-For", l)
		}
		_, err := audit26Key(t, two, "192.0.2.1:1", hdr...)
		if !errors.Is(err, httplimit.ErrForwardedFor) {
			t.Errorf("XFF %q: %v; want ErrForwardedFor", lines, err)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, audit26Req("192.0.2.1:1", hdr...))
		if w.Code != 400 || w.Body.String() != "Bad Request\n" {
			t.Errorf("XFF %q: %d %q; want 400 with the status text only", lines, w.Code, w.Body.String())
		}
	}
	if lim.calls.Load() != 0 {
		t.Fatalf("the limiter was asked %d times", lim.calls.Load())
	}
}

// Spoofing: with n trusted proxies, whatever the client writes in front
// of (or as separate lines before) the n entries the proxies append,
// the key is that of the n-th entry from the right; two clients behind
// the same proxies are never merged, and one client is never split.
func TestAudit26ForwardedForSpoofing(t *testing.T) {
	junk := []string{"", ",", " , ,", "198.51.100.8", "203.0.113.1, 203.0.113.2", "2001:db8::1", "::ffff:198.51.100.8",
		"for=192.0.2.60", strings.Repeat("1.1.1.1,", 50), "\"quoted\"", "a b c", "10.0.0.1"}
	for n := 1; n <= 3; n++ {
		k := httplimit.RemoteIP(httplimit.WithTrustedProxies(n))
		for _, client := range []string{"198.51.100.7", "198.51.100.9", "2001:db8:aa:bb::1"} {
			want, err := httplimit.RemoteIP()(audit26Req(client))
			if err != nil {
				t.Fatal(err)
			}
			tail := []string{client}
			for i := 1; i < n; i++ {
				tail = append(tail, "10.0.0."+string(rune('0'+i)))
			}
			for _, j := range junk {
				// One line: client's text, then the proxies' entries.
				line := strings.Join(append([]string{j}, tail...), ", ")
				if got, err := audit26Key(t, k, "10.0.0.99:1", "X-Forwarded-For", line); err != nil || got != want {
					t.Errorf("n=%d XFF %q: %q, %v; want %q", n, line, got, err, want)
				}
				// Client's own line first, proxies' on another.
				if got, err := audit26Key(t, k, "10.0.0.99:1", "X-Forwarded-For", j, "X-Forwarded-For", strings.Join(tail, ", ")); err != nil || got != want {
					t.Errorf("n=%d XFF lines %q + %q: %q, %v; want %q", n, j, tail, got, err, want)
				}
			}
		}
	}
}

// WithTrustedProxies(0) (the default) ignores X-Forwarded-For entirely.
func TestAudit26ForwardedForIgnoredByDefault(t *testing.T) {
	for _, k := range []httplimit.KeyFunc{httplimit.RemoteIP(), httplimit.RemoteIP(httplimit.WithTrustedProxies(0))} {
		got, err := audit26Key(t, k, "192.0.2.1:1", "X-Forwarded-For", "198.51.100.7", "X-Forwarded-For", "junk")
		if err != nil || got != "192.0.2.1/32" {
			t.Errorf("key %q, %v; want the RemoteAddr's", got, err)
		}
	}
}

// Header and Func keys: the header's value (the first line), ErrNoHeader
// (400, status text only) when absent or empty; Func cannot fail;
// every KeyFunc refuses a nil request with ErrNilRequest.
func TestAudit26HeaderAndFuncKeys(t *testing.T) {
	k := httplimit.Header("X-Api-Key")
	if got, err := audit26Key(t, k, "", "X-Api-Key", "alice", "X-Api-Key", "bob"); err != nil || got != "alice" {
		t.Fatalf("Header key %q, %v", got, err)
	}
	for _, hdr := range [][]string{nil, {"X-Api-Key", ""}, {"X-Other", "x"}} {
		if _, err := audit26Key(t, k, "192.0.2.1:1", hdr...); !errors.Is(err, httplimit.ErrNoHeader) {
			t.Errorf("headers %q: %v; want ErrNoHeader", hdr, err)
		}
		lim := &audit26CountLim{}
		w := httptest.NewRecorder()
		httplimit.Wrap(lim, ok, httplimit.WithKey(k)).ServeHTTP(w, audit26Req("192.0.2.1:1", hdr...))
		if w.Code != 400 || w.Body.String() != "Bad Request\n" || lim.calls.Load() != 0 {
			t.Errorf("headers %q: %d %q, %d limiter calls", hdr, w.Code, w.Body.String(), lim.calls.Load())
		}
	}
	f := httplimit.Func(func(r *http.Request) string { return r.URL.Path })
	if got, err := f(audit26Req("")); err != nil || got != "/" {
		t.Fatalf("Func key %q, %v", got, err)
	}
	for _, k := range []httplimit.KeyFunc{httplimit.RemoteIP(), httplimit.RemoteIP(httplimit.WithTrustedProxies(1)), k, f} {
		if _, err := k(nil); !errors.Is(err, httplimit.ErrNilRequest) {
			t.Errorf("nil request: %v", err)
		}
	}
	for _, fn := range []func(){func() { httplimit.Header("") }, func() { httplimit.Func(nil) }} {
		func() {
			defer func() {
				if p, _ := recover().(string); !strings.HasPrefix(p, "httplimit:") {
					t.Errorf("panic %v", p)
				}
			}()
			fn()
		}()
	}
}
