package httplimit_test

// Audit 85: fuzzers through the handler (not the parsers alone): the key
// the limiter is asked for, the status and body of every error, and the
// client's inability to choose its key through X-Forwarded-For entries
// left of the trusted ones (doc.go, "Keys": "only the entry the
// outermost trusted proxy wrote ... it is never trusted by default").

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
)

// audit85httpRec records the keys it is asked for and admits them.
type audit85httpRec struct{ keys []string }

func (l *audit85httpRec) DecideContext(_ context.Context, key string, n int) (limit.Decision, error) {
	l.keys = append(l.keys, key)
	return limit.Decision{Allowed: true, Limit: 1, Burst: 5, Policy: "p", Remaining: 4, NextAfter: 1e9, ResetAfter: 1e9}, nil
}
func (l *audit85httpRec) Policies() []limit.Policy {
	return []limit.Policy{{Name: "p", Limit: 1, Burst: 5}}
}

// audit85httpKeyOf serves one request and returns the status, the body
// and the key the limiter saw ("" if none).
func audit85httpKeyOf(t *testing.T, key httplimit.KeyFunc, remote string, xff []string) (int, string, string) {
	t.Helper()
	lim := &audit85httpRec{}
	h := httplimit.Wrap(lim, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(200) }), httplimit.WithKey(key))
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = remote
	for _, v := range xff {
		r.Header.Add("X-Forwarded-For", v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if len(lim.keys) > 1 {
		t.Fatalf("limiter asked %d times", len(lim.keys))
	}
	k := ""
	if len(lim.keys) == 1 {
		k = lim.keys[0]
	}
	return w.Code, w.Body.String(), k
}

func audit85httpFold(a netip.Addr, v4, v6 int) string {
	a = a.Unmap().WithZone("")
	bits := v6
	if a.Is4() {
		bits = v4
	}
	p, err := a.Prefix(bits)
	if err != nil {
		panic(err)
	}
	return p.String()
}

// The client writes anything (commas, several lines, addresses, ports,
// junk) left of the n entries the trusted proxies appended; the key is
// always the outermost proxy's entry folded, whatever the client wrote
// and however the proxies split the field into lines.
func FuzzAudit85HTTPForwardedSpoof(f *testing.F) {
	f.Add("6.6.6.6", []byte{203, 0, 113, 7}, uint8(1), uint8(0), uint8(32), uint8(64))
	f.Add("::1, 1.2.3.4\n[2001:db8::1]:80,", []byte{0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9}, uint8(2), uint8(3), uint8(24), uint8(48))
	f.Add(",,,\n\n", []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 1, 2, 3}, uint8(3), uint8(5), uint8(0), uint8(128))
	f.Add(strings.Repeat("9.9.9.9,", 300), []byte{198, 51, 100, 1}, uint8(1), uint8(2), uint8(31), uint8(0))
	f.Fuzz(func(t *testing.T, forged string, raw []byte, n, split, v4, v6 uint8) {
		client, ok := netip.AddrFromSlice(raw)
		if !ok {
			return
		}
		nn := int(n%3) + 1
		v4b, v6b := int(v4%33), int(v6%129)
		key := httplimit.RemoteIP(httplimit.WithTrustedProxies(nn), httplimit.WithIPv4Prefix(v4b), httplimit.WithIPv6Prefix(v6b))
		// The entries the proxies appended: the client's address (as the
		// outermost saw it, with a port on odd split), then the proxies'.
		entry := client.String()
		if split&1 == 1 {
			entry = netip.AddrPortFrom(client, 4242).String()
		}
		tail := []string{entry}
		for i := 1; i < nn; i++ {
			tail = append(tail, "10.0.0."+string(rune('0'+i)))
		}
		var lines []string
		if forged != "" {
			lines = strings.Split(forged, "\n")
		}
		for i, e := range tail {
			// Each proxy either appends to the last line or adds a line.
			if len(lines) == 0 || split>>(i+1)&1 == 1 {
				lines = append(lines, e)
			} else {
				lines[len(lines)-1] += ", " + e
			}
		}
		code, body, got := audit85httpKeyOf(t, key, "192.0.2.250:9", lines)
		want := audit85httpFold(client, v4b, v6b)
		if code != 200 || got != want {
			t.Fatalf("forged %q, lines %q, %d proxies: %d %q, key %q; want 200 and %q", forged, lines, nn, code, body, got, want)
		}
	})
}

// audit85httpRemoteOracle reads RemoteAddr as the doc says: "host:port",
// or a bare address.
func audit85httpRemoteOracle(s string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr(), true
	}
	if h, _, err := net.SplitHostPort(s); err == nil {
		if a, err := netip.ParseAddr(h); err == nil {
			return a, true
		}
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return a, true
	}
	return netip.Addr{}, false
}

// Any RemoteAddr: either the limiter is asked for the folded address
// (200), or the answer is 500 with the status text only and the limiter
// is not asked; X-Forwarded-For, Forwarded and X-Real-IP (untrusted by
// default) never change the key.
func FuzzAudit85HTTPRemoteAddr(f *testing.F) {
	for _, s := range []string{"192.0.2.1:80", "[2001:db8::1%eth0]:443", "fe80::1%25en0", "::ffff:192.0.2.1", "", "@", "/tmp/s", "[::1]", "1.2.3.4:99999", "[1.2.3.4]:80", "localhost:80", "[0::", "0::]"} {
		f.Add(s, "6.6.6.6", uint8(32), uint8(64))
	}
	f.Fuzz(func(t *testing.T, remote, spoof string, v4, v6 uint8) {
		v4b, v6b := int(v4%33), int(v6%129)
		key := httplimit.RemoteIP(httplimit.WithIPv4Prefix(v4b), httplimit.WithIPv6Prefix(v6b))
		code, body, got := audit85httpKeyOf(t, key, remote, nil)
		if a, ok := audit85httpRemoteOracle(remote); ok {
			if want := audit85httpFold(a, v4b, v6b); code != 200 || got != want {
				t.Fatalf("RemoteAddr %q: %d %q key %q; want 200 %q", remote, code, body, got, want)
			}
		} else if code == 200 {
			// Also read (RemoteAddr is the server's, not the client's): a
			// bare address with a leading "[" and/or a trailing "]".
			a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(remote, "["), "]"))
			if err != nil || !(strings.HasPrefix(remote, "[") || strings.HasSuffix(remote, "]")) || got != audit85httpFold(a, v4b, v6b) {
				t.Fatalf("RemoteAddr %q: admitted with key %q", remote, got)
			}
		} else if code != 500 || body != "Internal Server Error\n" || got != "" {
			t.Fatalf("RemoteAddr %q: %d %q, limiter asked %q; want 500 and the status text only", remote, code, body, got)
		}
		if code != 200 {
			return
		}
		// Untrusted headers change nothing.
		lim := &audit85httpRec{}
		h := httplimit.Wrap(lim, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}), httplimit.WithKey(key))
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = remote
		for _, k := range []string{"X-Forwarded-For", "Forwarded", "X-Real-Ip", "True-Client-Ip", "Cf-Connecting-Ip"} {
			r.Header.Add(k, spoof)
		}
		h.ServeHTTP(httptest.NewRecorder(), r)
		if len(lim.keys) != 1 || lim.keys[0] != got {
			t.Fatalf("RemoteAddr %q with spoofed headers %q: keys %q; want %q", remote, spoof, lim.keys, got)
		}
	})
}

// Any X-Forwarded-For with n trusted proxies: 200 with the key of the
// n-th entry from the right, or 400 with the status text only and the
// limiter not asked (never a 500, never error text).
func FuzzAudit85HTTPForwardedAny(f *testing.F) {
	f.Add("1.2.3.4, 5.6.7.8\n9.9.9.9", uint8(2))
	f.Add("[2001:db8::1], [2001:db8::2]:8", uint8(1))
	f.Add("\xff\xfe, \x00", uint8(1))
	f.Add("", uint8(1))
	f.Add("fe80::1%eth0,", uint8(2))
	f.Fuzz(func(t *testing.T, s string, n uint8) {
		nn := int(n%4) + 1
		lines := strings.Split(s, "\n")
		code, body, got := audit85httpKeyOf(t, httplimit.RemoteIP(httplimit.WithTrustedProxies(nn)), "192.0.2.250:9", lines)
		var parts []string
		for _, l := range lines {
			parts = append(parts, strings.Split(l, ",")...)
		}
		want := ""
		if len(parts) >= nn {
			e := strings.TrimSpace(parts[len(parts)-nn])
			if a, err := netip.ParseAddr(e); err == nil {
				want = audit85httpFold(a, 32, 64)
			} else if ap, err := netip.ParseAddrPort(e); err == nil {
				want = audit85httpFold(ap.Addr(), 32, 64)
			}
		}
		if want != "" {
			if code != 200 || got != want {
				t.Fatalf("%q, %d proxies: %d %q key %q; want 200 %q", lines, nn, code, body, got, want)
			}
		} else if code != 400 || body != "Bad Request\n" || got != "" {
			t.Fatalf("%q, %d proxies: %d %q key %q; want 400 and the status text only", lines, nn, code, body, got)
		}
	})
}

// audit85httpScript answers one scripted Decision.
type audit85httpScript struct {
	name string
	d    limit.Decision
}

func (l *audit85httpScript) DecideContext(context.Context, string, int) (limit.Decision, error) {
	return l.d, nil
}
func (l *audit85httpScript) Policies() []limit.Policy {
	return []limit.Policy{{Name: l.name, Limit: 1, Burst: 10}}
}

// Three stacked middlewares with scripted decisions: the outer two admit
// (r and t fuzzed), the inner one decides (fuzzed). The answer lists the
// three items in order, each r its Remaining and t its NextAfter rounded
// up; on a retryable denial Retry-After (and the problem's retryAfter)
// is the latest of the inner RetryAfter rounded up (at least 1) and the
// t of every item with r=0; the legacy fields are those of the least
// Remaining (the outermost of equals).
func FuzzAudit85HTTPStackedFields(f *testing.F) {
	f.Add(uint8(0), uint16(1500), uint8(2), uint16(0), uint8(0), uint16(700), uint16(900), false, false)
	f.Add(uint8(0), uint16(9000), uint8(0), uint16(4001), uint8(0), uint16(100), uint16(100), false, false)
	f.Add(uint8(3), uint16(1), uint8(1), uint16(999), uint8(0), uint16(0), uint16(0), true, false)
	f.Add(uint8(0), uint16(5000), uint8(0), uint16(5000), uint8(0), uint16(0), uint16(0), false, true)
	f.Fuzz(func(t *testing.T, ra uint8, ta uint16, rb uint8, tb uint16, rc uint8, tc, retry uint16, allowed, never bool) {
		ms := func(v uint16) time.Duration { return time.Duration(v) * time.Millisecond }
		ceil := func(d time.Duration) int64 { return int64((d + time.Second - 1) / time.Second) }
		mk := func(name string, r uint8, next time.Duration) limit.Decision {
			d := limit.Decision{Allowed: true, Limit: 1, Burst: 10, Policy: name, Remaining: int(r % 11), NextAfter: next}
			if d.Remaining == 10 {
				d.NextAfter = 0
			} else if d.NextAfter == 0 {
				d.NextAfter = time.Millisecond
			}
			d.ResetAfter = d.NextAfter + time.Duration(9-min(d.Remaining, 9))*time.Second
			return d
		}
		da, db := mk("a", ra, ms(ta)), mk("b", rb, ms(tb))
		dc := mk("c", rc, ms(tc))
		dc.Allowed = allowed
		if !allowed {
			if never {
				dc.Never, dc.RetryAfter = true, limit.InfDuration
			} else {
				dc.RetryAfter = max(ms(retry), dc.NextAfter, time.Millisecond)
			}
		}
		var hs [3]*httplimit.Middleware
		for i, d := range []limit.Decision{da, db, dc} {
			m, err := httplimit.New(&audit85httpScript{d.Policy, d}, httplimit.WithLegacyHeaders(true), httplimit.WithProblemJSON(true))
			if err != nil {
				t.Fatal(err)
			}
			hs[i] = m
		}
		h := hs[0].Handler(hs[1].Handler(hs[2].Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))))
		w := audit85httpServe(h, "192.0.2.1:1")
		item := func(d limit.Decision) string {
			s := `"` + d.Policy + `";r=` + strconv.Itoa(d.Remaining)
			if d.NextAfter > 0 {
				s += ";t=" + strconv.FormatInt(ceil(d.NextAfter), 10)
			}
			return s
		}
		if want := item(da) + ", " + item(db) + ", " + item(dc); w.Header().Get("RateLimit") != want {
			t.Fatalf("RateLimit %q; want %q", w.Header().Get("RateLimit"), want)
		}
		least := da
		for _, d := range []limit.Decision{db, dc} {
			if d.Remaining < least.Remaining {
				least = d
			}
		}
		if got, want := w.Header().Get("X-RateLimit-Remaining")+"/"+w.Header().Get("X-RateLimit-Limit")+"/"+w.Header().Get("X-RateLimit-Reset"),
			strconv.Itoa(least.Remaining)+"/10/"+strconv.FormatInt(ceil(least.ResetAfter), 10); got != want {
			t.Fatalf("legacy %q; want %q", got, want)
		}
		switch {
		case allowed:
			if w.Code != 200 || w.Header().Get("Retry-After") != "" {
				t.Fatalf("admitted: %d Retry-After %q", w.Code, w.Header().Get("Retry-After"))
			}
		case never:
			if w.Code != 429 || w.Header().Get("Retry-After") != "" || strings.Contains(w.Body.String(), "retryAfter") {
				t.Fatalf("never: %d Retry-After %q body %q", w.Code, w.Header().Get("Retry-After"), w.Body.String())
			}
		default:
			want := max(ceil(dc.RetryAfter), 1)
			for _, d := range []limit.Decision{da, db, dc} {
				if d.Remaining == 0 {
					want = max(want, ceil(d.NextAfter))
				}
			}
			ws := strconv.FormatInt(want, 10)
			if w.Code != 429 || w.Header().Get("Retry-After") != ws || !strings.Contains(w.Body.String(), `"retryAfter":`+ws+"}") {
				t.Fatalf("denial: %d Retry-After %q body %q; want %s", w.Code, w.Header().Get("Retry-After"), w.Body.String(), ws)
			}
		}
	})
}
