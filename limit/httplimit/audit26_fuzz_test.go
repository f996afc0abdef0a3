package httplimit_test

import (
	"errors"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
)

// audit26Fold is the documented key of a: IPv4-mapped as IPv4, zone
// dropped, /32 or /64.
func audit26Fold(a netip.Addr) string {
	a = a.Unmap().WithZone("")
	bits := 64
	if a.Is4() {
		bits = 32
	}
	p, _ := a.Prefix(bits)
	return p.String()
}

// audit26Entry formats a as a proxy might append it: form 0 bare, 1 with
// a port, 2 with spaces around, 3 with a tab and a port.
func audit26Entry(a netip.Addr, port uint16, form uint8) string {
	switch form % 4 {
	case 1:
		return netip.AddrPortFrom(a, port).String()
	case 2:
		return "  " + a.String() + " "
	case 3:
		return "\t" + netip.AddrPortFrom(a, port).String()
	}
	return a.String()
}

// Whatever a client writes before the entries its n trusted proxies
// append (on the same line or on lines of its own), the key is the
// documented fold of the n-th entry from the right.
func FuzzAudit26ForwardedForSpoof(f *testing.F) {
	f.Add("", []byte{198, 51, 100, 7}, uint16(80), uint8(0), uint8(1), false)
	f.Add("1.2.3.4, ::1", []byte{0x20, 1, 0xd, 0xb8, 0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6}, uint16(443), uint8(1), uint8(2), true)
	f.Add(",,, ,", []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 1, 2, 3, 4}, uint16(0), uint8(3), uint8(3), false)
	f.Fuzz(func(t *testing.T, client string, raw []byte, port uint16, form, n uint8, lines bool) {
		a, ok := netip.AddrFromSlice(raw)
		if !ok {
			return
		}
		n = n%3 + 1
		tail := []string{audit26Entry(a, port, form)}
		for i := 1; i < int(n); i++ {
			tail = append(tail, "10.0.0."+strconv.Itoa(i))
		}
		r := audit26Req("192.0.2.200:1")
		if lines {
			r.Header.Add("X-Forwarded-For", client)
			r.Header.Add("X-Forwarded-For", strings.Join(tail, ", "))
		} else {
			r.Header.Add("X-Forwarded-For", client+", "+strings.Join(tail, ", "))
		}
		got, err := httplimit.RemoteIP(httplimit.WithTrustedProxies(int(n)))(r)
		if want := audit26Fold(a); err != nil || got != want {
			t.Fatalf("n=%d XFF %q: key %q, %v; want %q", n, r.Header.Values("X-Forwarded-For"), got, err, want)
		}
	})
}

// Any RemoteAddr: a key is the documented fold of the address it holds
// (host:port, [host]:port, or a bare address), and an error is
// ErrNoClientIP exactly when RemoteAddr holds none.
func FuzzAudit26RemoteAddr(f *testing.F) {
	for _, s := range []string{"192.0.2.1:80", "[2001:db8::1%eth0]:443", "::ffff:1.2.3.4", "", "@", "[::1]", "1.2.3.4:x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r := audit26Req(s)
		got, err := httplimit.RemoteIP()(r)
		var want netip.Addr
		if ap, e := netip.ParseAddrPort(s); e == nil {
			want = ap.Addr()
		} else if a, e := netip.ParseAddr(s); e == nil {
			want = a
		} else if a, e := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")); e == nil && strings.HasPrefix(s, "[") {
			want = a
		}
		if err != nil {
			if !errors.Is(err, httplimit.ErrNoClientIP) {
				t.Fatalf("RemoteAddr %q: %v; want ErrNoClientIP", s, err)
			}
			if want.IsValid() {
				t.Fatalf("RemoteAddr %q holds %v, refused: %v", s, want, err)
			}
			return
		}
		if want.IsValid() && got != audit26Fold(want) {
			t.Fatalf("RemoteAddr %q: key %q; want %q", s, got, audit26Fold(want))
		}
		if p, e := netip.ParsePrefix(got); e != nil || p.Masked() != p {
			t.Fatalf("RemoteAddr %q: key %q is not a masked prefix", s, got)
		}
	})
}

// Any policy (name, limit, burst) New accepts and any Decision of it:
// the fields are valid Structured Fields naming the policy, and a
// denial's Retry-After is a positive integer no earlier than t.
func FuzzAudit26Fields(f *testing.F) {
	f.Add("api", 2.0, 3, 1, int64(400e6), int64(1500e6), false, false)
	f.Add(`a"\`, 1e-9, 1<<24, 0, int64(0), int64(0), true, false)
	f.Fuzz(func(t *testing.T, name string, rate float64, burst, remaining int, next, retry int64, allowed, never bool) {
		burst = max(burst%(1<<24), 0)
		remaining = max(remaining%(burst+1), 0)
		m, err := httplimit.New(audit14Limiter{[]limit.Policy{{Name: name, Limit: limit.Limit(rate), Burst: burst}}})
		if err != nil {
			return
		}
		d := limit.Decision{Allowed: allowed, Never: never && !allowed, Limit: limit.Limit(rate), Burst: burst, Remaining: remaining, Policy: name}
		if next > 0 {
			d.NextAfter = time.Duration(next)
		}
		if !allowed && retry > 0 {
			d.RetryAfter = max(time.Duration(retry), d.NextAfter)
		}
		h := http.Header{}
		m.SetHeaders(h, d)
		get := func(k string) string {
			if v := h.Values(k); len(v) == 1 {
				return v[0]
			}
			return ""
		}
		if limit.Limit(rate) == limit.Inf || rate > 1e308 {
			return
		}
		pn, pp, ok := audit26Item(get("RateLimit-Policy"))
		if !ok || pn != name || pp["q"] != int64(burst) || pp["w"] < 1 {
			t.Fatalf("RateLimit-Policy %q", get("RateLimit-Policy"))
		}
		rn, rp, ok := audit26Item(get("RateLimit"))
		if !ok || rn != name || rp["r"] != int64(remaining) {
			t.Fatalf("RateLimit %q", get("RateLimit"))
		}
		ra := get("Retry-After")
		if d.Allowed || d.Never {
			if ra != "" {
				t.Fatalf("Retry-After %q on %+v", ra, d)
			}
			return
		}
		s, err := strconv.ParseInt(ra, 10, 64)
		if err != nil || s < 1 || s < rp["t"] {
			t.Fatalf("Retry-After %q, t %d on %+v", ra, rp["t"], d)
		}
	})
}
