package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// Passing check (audit 120). Through the whole Handler (not the KeyFunc
// alone), any RemoteAddr, X-Forwarded-For lines, trusted-proxy count,
// key header and cost: no panic; a key error is answered with the
// documented status and the status text only ("no error text ever
// reaches a response"), without rate-limit fields and without calling
// next; a decided request carries RateLimit-Policy and RateLimit, and
// the key the hook sees is a masked CIDR prefix (RemoteIP) or the header
// value (Header).
func FuzzAudit120HTTPHandlerKeys(f *testing.F) {
	f.Add("203.0.113.7:80", "198.51.100.1, 10.0.0.1", "", uint8(1), uint8(0), "k", 1)
	f.Add("[fe80::1%eth0]:443", " , ,", "2001:db8::1", uint8(2), uint8(0), "", 1)
	f.Add("@", "", "", uint8(0), uint8(0), "", 1)
	f.Add("", "1.2.3.4:5", "\t[::1]:80 ", uint8(3), uint8(1), "", 0)
	f.Add("1.2.3.4", "::ffff:1.2.3.4", "", uint8(1), uint8(2), "a,b", 9)
	f.Add("/tmp/s", "unknown", "", uint8(1), uint8(1), " ", -1)
	f.Fuzz(func(t *testing.T, remote, xff1, xff2 string, trusted, mode uint8, hv string, cost int) {
		clk := sketchtest.NewFakeClock()
		var key httplimit.KeyFunc
		switch mode % 3 {
		case 0:
			key = httplimit.RemoteIP(httplimit.WithTrustedProxies(int(trusted % 4)))
		case 1:
			key = httplimit.RemoteIP(httplimit.WithTrustedProxies(int(trusted%4)), httplimit.WithIPv4Prefix(int(trusted%33)), httplimit.WithIPv6Prefix(int(trusted%129)))
		default:
			key = httplimit.Header("X-Api-Key")
		}
		var gotKey string
		m, err := httplimit.New(limit.MustNew(1, 2, limit.WithClock(clk)), httplimit.WithKey(key),
			httplimit.WithCost(func(*http.Request) int { return cost }),
			httplimit.WithHook(func(_ *http.Request, k string, _ limit.Decision) { gotKey = k }))
		if err != nil {
			t.Fatal(err)
		}
		called := false
		h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true }))
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = remote
		r.Header["X-Forwarded-For"] = []string{xff1, xff2}
		if hv != "" {
			r.Header["X-Api-Key"] = []string{hv}
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Header().Get("RateLimit-Policy") == "" {
			// Not decided: an error answer.
			if called || (w.Code != 400 && w.Code != 500) {
				t.Fatalf("undecided: status %d, next called %v", w.Code, called)
			}
			if body := strings.TrimSpace(w.Body.String()); body != http.StatusText(w.Code) {
				t.Fatalf("error body %q", body)
			}
			if w.Code == 500 && cost >= 1 && mode%3 != 2 && trusted%4 != 0 {
				t.Fatalf("500 with trusted proxies: %q %q", xff1, xff2)
			}
			if cost < 1 && w.Code != 500 {
				// The key may fail first (400); a valid key with a bad cost is 500.
				if _, kerr := key(r); kerr == nil {
					t.Fatalf("bad cost %d with a valid key: %d", cost, w.Code)
				}
			}
			return
		}
		if cost < 1 {
			t.Fatalf("cost %d decided", cost)
		}
		if w.Header().Get("RateLimit") == "" {
			t.Fatalf("decided without RateLimit")
		}
		if mode%3 == 2 {
			if gotKey != hv {
				t.Fatalf("Header key %q, want %q", gotKey, hv)
			}
			return
		}
		p, err := netip.ParsePrefix(gotKey)
		if err != nil || p != p.Masked() || p.Addr().Zone() != "" || p.Addr().Is4In6() {
			t.Fatalf("RemoteIP key %q: %v", gotKey, err)
		}
	})
}
