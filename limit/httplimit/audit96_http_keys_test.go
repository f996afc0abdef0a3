package httplimit_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// RemoteIP on the address forms the brief names (IPv6 zones, brackets,
// ports, IPv4-mapped), from RemoteAddr and from the trusted
// X-Forwarded-For entry: the key is the folded prefix without zone
// (key.go: "The key is the prefix in CIDR form"; "IPv4-mapped IPv6
// addresses count as IPv4"; an entry is "an address, or an address with
// a port"); what is not an address is ErrNoClientIP from RemoteAddr and
// ErrForwardedFor from the header.
func TestAudit96HTTPKeyForms(t *testing.T) {
	for _, c := range []struct {
		remote string
		key    string
		err    error
	}{
		{"[fe80::1%eth0]:80", "fe80::/64", nil},
		{"[fe80::1%25eth0]:80", "fe80::/64", nil},
		{"fe80::1%eth0", "fe80::/64", nil},
		{"[::ffff:198.51.100.4]:5", "198.51.100.4/32", nil},
		{"::ffff:198.51.100.4%z", "198.51.100.4/32", nil},
		{"[198.51.100.4]:80", "198.51.100.4/32", nil},
		{"198.51.100.4:0", "198.51.100.4/32", nil},
		{"[2001:db8:1:2::9]", "2001:db8:1:2::/64", nil},
		{"[::]:80", "::/64", nil},
		{":80", "", httplimit.ErrNoClientIP},
		{" 198.51.100.4:80", "", httplimit.ErrNoClientIP},
		{"01.2.3.4:80", "", httplimit.ErrNoClientIP},
		{"/run/app.sock", "", httplimit.ErrNoClientIP},
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = c.remote
		k, err := httplimit.RemoteIP()(r)
		if k != c.key || !errors.Is(err, c.err) || (c.err == nil) != (err == nil) {
			t.Errorf("RemoteAddr %q: %q, %v; want %q, %v", c.remote, k, err, c.key, c.err)
		}
	}
	for _, c := range []struct {
		xff []string
		key string
	}{
		{[]string{"[2001:db8::1]:443"}, "2001:db8::/64"},
		{[]string{"fe80::1%eth0"}, "fe80::/64"},
		{[]string{"[fe80::1%eth0]:1"}, "fe80::/64"},
		{[]string{"198.51.100.4:80"}, "198.51.100.4/32"},
		{[]string{"::ffff:198.51.100.4"}, "198.51.100.4/32"},
		{[]string{"\t198.51.100.4\t"}, "198.51.100.4/32"},
		{[]string{"6.6.6.6,, 198.51.100.4"}, "198.51.100.4/32"}, // an empty element left of the trusted one
		{[]string{"", "198.51.100.4"}, "198.51.100.4/32"},
		{[]string{"[2001:db8::1]"}, ""},
		{[]string{"198.51.100.4:"}, ""},
		{[]string{"198.51.100.4:65536"}, ""},
		{[]string{"unknown"}, ""},
		{[]string{`"198.51.100.4"`}, ""},
		{[]string{"198.51.100.4,"}, ""},
		{[]string{"198.51.100.4", ""}, ""},
		{[]string{"01.2.3.4"}, ""},
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = "10.0.0.1:1"
		r.Header["X-Forwarded-For"] = c.xff
		k, err := httplimit.RemoteIP(httplimit.WithTrustedProxies(1))(r)
		if c.key != "" && (k != c.key || err != nil) || c.key == "" && (k != "" || !errors.Is(err, httplimit.ErrForwardedFor)) {
			t.Errorf("X-Forwarded-For %q: %q, %v; want %q", c.xff, k, err, c.key)
		}
	}
}

// What the middleware counts (limit.Stats: every committed decision
// once, a Tier's in its limiter's, a Multi's in the Multi's and not its
// windows'): through the middleware exactly the decided requests, 200 as
// Admitted and 429 (Never included) as Denied; a skipped or excluded
// request, a key error and a bad cost reach no decision, debit nothing
// (KeyFunc: "consumes no tokens"), never call the handler, and only the
// errors are answered (400 for a client's forwarded header, 500 for a
// missing client IP and a bad cost) with the status text alone.
func TestAudit96HTTPCountsOnlyDecisions(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(2_000_000)
	base := limit.MustNew(2, 3, limit.WithName("base"), limit.WithClock(clk), limit.WithMaxDebt(30))
	tier, err := base.Tier("tier", 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	w1 := limit.MustNew(2, 3, limit.WithName("w1"), limit.WithClock(clk))
	w2 := limit.MustNew(1, 4, limit.WithName("w2"), limit.WithClock(clk))
	multi, err := limit.NewMulti(w1, w2)
	if err != nil {
		t.Fatal(err)
	}
	stats := map[string]func() limit.Stats{"base": base.Stats, "tier": base.Stats, "multi": multi.Stats}
	for _, name := range []string{"base", "tier", "multi"} {
		l := map[string]httplimit.Limiter{"base": base, "tier": tier, "multi": multi}[name]
		clk.Advance(time.Minute) // the key's debt of the walk before drained
		before := stats[name]()
		calls := 0
		h, err := httplimit.New(l,
			httplimit.WithKey(httplimit.RemoteIP(httplimit.WithTrustedProxies(1))),
			httplimit.WithSkip(func(r *http.Request) bool { return r.URL.Path == "/health" }),
			httplimit.WithExcludedKey(func(k string) bool { return k == "203.0.113.1/32" }),
			httplimit.WithCost(func(r *http.Request) int {
				if r.URL.Path == "/zero" {
					return 0
				}
				if r.URL.Path == "/huge" {
					return 1 << 40
				}
				return 1
			}))
		if err != nil {
			t.Fatal(err)
		}
		hh := h.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { calls++ }))
		var admitted, denied, passed uint64
		for i := range 40 {
			path, xff := "/", "198.51.100.9"
			want := 0
			switch i % 8 {
			case 1:
				path, want = "/health", http.StatusOK
			case 2:
				xff, want = "203.0.113.1", http.StatusOK
			case 3:
				xff, want = "not-an-ip", http.StatusBadRequest
			case 4:
				path, want = "/zero", http.StatusInternalServerError
			case 5:
				path, want = "/huge", http.StatusTooManyRequests
			}
			clk.Advance(150 * time.Millisecond)
			r := httptest.NewRequest(http.MethodGet, path, nil)
			r.Header.Set("X-Forwarded-For", xff)
			w := httptest.NewRecorder()
			hh.ServeHTTP(w, r)
			if want != 0 && w.Code != want {
				t.Fatalf("%s request %d (%s, %s): %d; want %d", name, i, path, xff, w.Code, want)
			}
			switch {
			case i%8 == 1 || i%8 == 2:
				passed++
				if w.Header().Get("RateLimit") != "" || w.Header().Get("RateLimit-Policy") != "" {
					t.Errorf("%s request %d: skipped or excluded, but fields %q", name, i, w.Header())
				}
			case i%8 == 3 || i%8 == 4:
				if body := strings.TrimSpace(w.Body.String()); body != http.StatusText(w.Code) || w.Header().Get("RateLimit") != "" {
					t.Errorf("%s request %d: error answer body %q, RateLimit %q", name, i, body, w.Header().Get("RateLimit"))
				}
			case w.Code == http.StatusOK:
				admitted++
			case w.Code == http.StatusTooManyRequests:
				denied++
			default:
				t.Fatalf("%s request %d: %d", name, i, w.Code)
			}
		}
		after := stats[name]()
		if got := after.Admitted - before.Admitted; got != admitted {
			t.Errorf("%s: Stats.Admitted grew by %d for %d admitted answers", name, got, admitted)
		}
		if got := after.Denied - before.Denied; got != denied {
			t.Errorf("%s: Stats.Denied grew by %d for %d 429 answers", name, got, denied)
		}
		if uint64(calls) != admitted+passed {
			t.Errorf("%s: handler called %d times for %d admitted and %d let through", name, calls, admitted, passed)
		}
		if admitted == 0 || denied <= 5 {
			t.Errorf("%s: %d admitted, %d denied: the walk does not test both", name, admitted, denied)
		}
		if name == "multi" {
			if s1, s2 := w1.Stats(), w2.Stats(); s1.Admitted+s1.Denied+s2.Admitted+s2.Denied != 0 {
				t.Errorf("multi: its windows count %+v, %+v; limit.Stats: a Multi's decisions count in the Multi's Stats, not in its windows'", s1, s2)
			}
		}
	}
}
