package httplimit_test

// Audit 5: httplimit against its package doc: the order of the steps of
// a request, exactness and "a denied request never reaches next" under
// concurrency, Retry-After / t / X-RateLimit-Reset rounding on exact
// boundaries, key extraction (RemoteAddr forms, X-Forwarded-For with
// trusted proxies, headers that must be ignored), keys per prefix, the
// default error handler's statuses, With's isolation, and RateLimit-
// Policy under a concurrent SetBurst.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// audit5Req builds a GET with RemoteAddr remote and the header pairs
// hdr (added in order, so a name may repeat).
func audit5Req(remote string, hdr ...string) *http.Request {
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = remote
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Add(hdr[i], hdr[i+1])
	}
	return r
}

// audit5OK answers "ok".
var audit5OK = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })

// audit5Serve serves r through h.
func audit5Serve(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// audit5Limiter is an httplimit.Limiter whose next answer the test sets,
// recording what it was asked.
type audit5Limiter struct {
	mu    sync.Mutex
	d     limit.Decision
	err   error
	calls int
	keys  []string
	ns    []int
	trace *[]string
	pols  []limit.Policy
}

func (f *audit5Limiter) DecideContext(_ context.Context, key string, n int) (limit.Decision, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.keys = append(f.keys, key)
	f.ns = append(f.ns, n)
	if f.trace != nil {
		*f.trace = append(*f.trace, "limiter")
	}
	return f.d, f.err
}

func (f *audit5Limiter) Policies() []limit.Policy {
	if f.pols != nil {
		return f.pols
	}
	return []limit.Policy{{Name: "p", Limit: 1, Burst: 10}}
}

// TestAudit5HTTPStepOrder: "For each request, in order: WithSkip's
// function may let it through untouched; the key is extracted (an error
// goes to the error handler); WithExcludedKey's function may let it
// through untouched; the cost is computed (below 1: the error handler);
// the limiter decides. ... Then WithHook's function sees the decision,
// the header fields are set, and the request goes to the next handler if
// admitted, to the denied handler if not." Each step that stops a
// request stops every later one: nothing after it runs.
func TestAudit5HTTPStepOrder(t *testing.T) {
	type setup struct {
		skip, keyErr, excluded bool
		cost                   int
		allowed                bool
	}
	cases := []struct {
		name string
		s    setup
		want string
		code int
	}{
		{"admitted", setup{cost: 2, allowed: true}, "skip key excluded cost limiter hook(fields=false) next(fields=true)", 200},
		{"denied", setup{cost: 2}, "skip key excluded cost limiter hook(fields=false) denied(fields=true)", 429},
		{"skipped", setup{skip: true, cost: 2, allowed: true}, "skip next(fields=false)", 200},
		{"key error", setup{keyErr: true, cost: 2, allowed: true}, "skip key error", 400},
		{"excluded", setup{excluded: true, cost: 2}, "skip key excluded next(fields=false)", 200},
		{"bad cost", setup{cost: 0, allowed: true}, "skip key excluded cost error", 500},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var trace []string
			fields := func(w http.ResponseWriter) bool { return w.Header().Get("RateLimit-Policy") != "" }
			lim := &audit5Limiter{trace: &trace, d: limit.Decision{Allowed: c.s.allowed, Limit: 1, Burst: 10, Policy: "p", Remaining: 3, RetryAfter: 2 * time.Second, NextAfter: time.Second}}
			if c.s.allowed {
				lim.d.RetryAfter = 0
			}
			var hookW http.ResponseWriter
			m, err := httplimit.New(lim,
				httplimit.WithSkip(func(*http.Request) bool { trace = append(trace, "skip"); return c.s.skip }),
				httplimit.WithKey(func(*http.Request) (string, error) {
					trace = append(trace, "key")
					if c.s.keyErr {
						return "", errors.New("no key")
					}
					return "k", nil
				}),
				httplimit.WithExcludedKey(func(string) bool { trace = append(trace, "excluded"); return c.s.excluded }),
				httplimit.WithCost(func(*http.Request) int { trace = append(trace, "cost"); return c.s.cost }),
				httplimit.WithHook(func(*http.Request, string, limit.Decision) {
					trace = append(trace, fmt.Sprintf("hook(fields=%v)", fields(hookW)))
				}),
				httplimit.WithDeniedHandler(func(w http.ResponseWriter, _ *http.Request, _ limit.Decision) {
					trace = append(trace, fmt.Sprintf("denied(fields=%v)", fields(w)))
					w.WriteHeader(429)
				}),
				httplimit.WithErrorHandler(func(w http.ResponseWriter, _ *http.Request, err error) {
					trace = append(trace, "error")
					code := 400
					if errors.Is(err, httplimit.ErrBadCost) {
						code = 500
					}
					w.WriteHeader(code)
				}),
			)
			if err != nil {
				t.Fatal(err)
			}
			h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				trace = append(trace, fmt.Sprintf("next(fields=%v)", fields(w)))
			}))
			w := httptest.NewRecorder()
			hookW = w
			h.ServeHTTP(w, audit5Req("192.0.2.1:1"))
			if got := strings.Join(trace, " "); got != c.want || w.Code != c.code {
				t.Fatalf("steps %q, status %d; want %q, %d", got, w.Code, c.want, c.code)
			}
			if c.s.allowed && !c.s.skip && !c.s.keyErr && !c.s.excluded && c.s.cost >= 1 && (len(lim.ns) != 1 || lim.ns[0] != c.s.cost || lim.keys[0] != "k") {
				t.Fatalf("limiter asked %v for keys %v; want cost %d for key k", lim.ns, lim.keys, c.s.cost)
			}
		})
	}
}

// TestAudit5HTTPConcurrentExact: the middleware "is safe for concurrent
// use" and the limiter (strict by default) is "exact under contention":
// 16 goroutines x 25 requests of one client through Handler on a frozen
// clock, burst 40, get exactly 40 admissions; the next handler runs
// exactly for those (a denied request never reaches it), every other
// answer is 429 with Retry-After >= 1 and RateLimit r=0, WithHook sees
// every decision, and another client is untouched. At GOMAXPROCS 2 and 8.
func TestAudit5HTTPConcurrentExact(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, eng := range []limit.Engine{limit.Auto, limit.Buckets, limit.CountMin} {
		for _, procs := range []int{2, 8} {
			t.Run(fmt.Sprintf("%v_procs%d", eng, procs), func(t *testing.T) {
				runtime.GOMAXPROCS(procs)
				clk := sketchtest.NewFakeClock()
				clk.Set(1 << 30)
				const burst = 40
				l := limit.MustNew(limit.Every(500*time.Millisecond), burst, limit.WithClock(clk), limit.WithEngine(eng), limit.WithSeed(7))
				var nexts, hooks, hookAllowed atomic.Int64
				h := httplimit.Wrap(l, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
					nexts.Add(1)
					io.WriteString(w, "ok")
				}), httplimit.WithHook(func(_ *http.Request, _ string, d limit.Decision) {
					hooks.Add(1)
					if d.Allowed {
						hookAllowed.Add(1)
					}
				}))
				var ok200, denied atomic.Int64
				var bad atomic.Value
				var wg sync.WaitGroup
				for g := range 16 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for range 25 {
							w := audit5Serve(h, audit5Req(fmt.Sprintf("203.0.113.9:%d", 1000+g)))
							switch w.Code {
							case 200:
								ok200.Add(1)
								if w.Body.String() != "ok" {
									bad.Store(fmt.Sprintf("200 without next's body: %q", w.Body.String()))
								}
							case 429:
								denied.Add(1)
								ra, err := strconv.Atoi(w.Header().Get("Retry-After"))
								tv, found := strings.CutPrefix(w.Header().Get("RateLimit"), `"default";r=0;t=`)
								tt, err2 := strconv.Atoi(tv)
								if err != nil || err2 != nil || !found || ra < 1 || tt > ra {
									bad.Store(fmt.Sprintf("429 with Retry-After %q, RateLimit %q", w.Header().Get("Retry-After"), w.Header().Get("RateLimit")))
								}
								if strings.Contains(w.Body.String(), "ok") {
									bad.Store("a denied answer carries next's body")
								}
							default:
								bad.Store(fmt.Sprintf("status %d", w.Code))
							}
						}
					}()
				}
				wg.Wait()
				if v := bad.Load(); v != nil {
					t.Fatal(v)
				}
				if ok200.Load() != burst || nexts.Load() != burst || denied.Load() != 16*25-burst {
					t.Fatalf("admitted %d, next ran %d times, denied %d; want %d, %d, %d", ok200.Load(), nexts.Load(), denied.Load(), burst, burst, 16*25-burst)
				}
				if hooks.Load() != 16*25 || hookAllowed.Load() != burst {
					t.Fatalf("hook saw %d decisions (%d admitted); want %d (%d)", hooks.Load(), hookAllowed.Load(), 16*25, burst)
				}
				if w := audit5Serve(h, audit5Req("203.0.113.10:1")); w.Code != 200 || w.Header().Get("RateLimit") != `"default";r=39;t=1` {
					t.Fatalf("another client: %d, RateLimit %q", w.Code, w.Header().Get("RateLimit"))
				}
			})
		}
	}
}

// TestAudit5HTTPRounding: the fields' durations on exact boundaries.
// Retry-After is "RetryAfter in whole seconds rounded up, at least 1, so
// never earlier than the RateLimit field's t"; t is "its NextAfter (the
// next whole token) rounded up, left out when the bucket is full";
// X-RateLimit-Reset "seconds until the bucket is full, rounded up". A
// denial is 429, text/plain; one that can never be admitted has no
// Retry-After and its body says not to retry.
func TestAudit5HTTPRounding(t *testing.T) {
	cases := []struct {
		retry, next, reset     time.Duration
		wantRA, wantT, wantRst string
	}{
		{time.Millisecond, time.Millisecond, time.Millisecond, "1", "1", "1"},
		{time.Nanosecond, time.Nanosecond, time.Nanosecond, "1", "1", "1"},
		{999 * time.Millisecond, 999 * time.Millisecond, 999 * time.Millisecond, "1", "1", "1"},
		{time.Second, time.Second, time.Second, "1", "1", "1"},
		{time.Second + time.Millisecond, time.Second, 5 * time.Second, "2", "1", "5"},
		{time.Second + time.Nanosecond, time.Second + time.Nanosecond, 5*time.Second + 1, "2", "2", "6"},
		{59*time.Second + 1, 30 * time.Second, time.Hour, "60", "30", "3600"},
		{limit.InfDuration - 1, limit.InfDuration - 1, limit.InfDuration - 1, "", "", ""}, // large: only >= t checked
	}
	for _, c := range cases {
		lim := &audit5Limiter{d: limit.Decision{Limit: 1, Burst: 10, Policy: "p", RetryAfter: c.retry, NextAfter: c.next, ResetAfter: c.reset}}
		h := httplimit.Wrap(lim, audit5OK, httplimit.WithLegacyHeaders(true))
		w := audit5Serve(h, audit5Req("192.0.2.1:1"))
		ra, rl, rst := w.Header().Get("Retry-After"), w.Header().Get("RateLimit"), w.Header().Get("X-RateLimit-Reset")
		if w.Code != 429 || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") {
			t.Fatalf("%+v: %d %q", c, w.Code, w.Header().Get("Content-Type"))
		}
		if c.wantRA == "" {
			rav, err1 := strconv.ParseInt(ra, 10, 64)
			_, tv, _ := strings.Cut(rl, ";t=")
			tt, err2 := strconv.ParseInt(tv, 10, 64)
			if err1 != nil || err2 != nil || rav < tt || rav < 1 || rav > 999_999_999_999_999 || len(rst) == 0 || len(rst) > 15 {
				t.Fatalf("huge durations: Retry-After %q, RateLimit %q, Reset %q", ra, rl, rst)
			}
			continue
		}
		if ra != c.wantRA || rl != `"p";r=0;t=`+c.wantT || rst != c.wantRst {
			t.Fatalf("RetryAfter %v NextAfter %v ResetAfter %v: Retry-After %q RateLimit %q Reset %q; want %s, t=%s, %s",
				c.retry, c.next, c.reset, ra, rl, rst, c.wantRA, c.wantT, c.wantRst)
		}
	}
	// Admitted with a full bucket: no t, no Retry-After, Reset 0.
	lim := &audit5Limiter{d: limit.Decision{Allowed: true, Limit: 1, Burst: 10, Policy: "p", Remaining: 10}}
	w := audit5Serve(httplimit.Wrap(lim, audit5OK, httplimit.WithLegacyHeaders(true)), audit5Req("192.0.2.1:1"))
	if w.Code != 200 || w.Header().Get("RateLimit") != `"p";r=10` || w.Header().Get("Retry-After") != "" || w.Header().Get("X-RateLimit-Reset") != "0" {
		t.Fatalf("full bucket: %d %v", w.Code, w.Header())
	}
	// Never: 429, no Retry-After, a body saying not to retry.
	lim = &audit5Limiter{d: limit.Decision{Never: true, Limit: 1, Burst: 10, Policy: "p", RetryAfter: limit.InfDuration}}
	w = audit5Serve(httplimit.Wrap(lim, audit5OK), audit5Req("192.0.2.1:1"))
	body := strings.ToLower(w.Body.String())
	if w.Code != 429 || w.Header().Get("Retry-After") != "" || !strings.Contains(body, "not") || !strings.Contains(body, "retry") {
		t.Fatalf("Never: %d, Retry-After %q, body %q", w.Code, w.Header().Get("Retry-After"), w.Body.String())
	}
}

// audit5Key keys a request by RemoteIP(opts...).
func audit5Key(remote string, xff []string, opts ...httplimit.IPOption) (string, error) {
	r := audit5Req(remote)
	for _, v := range xff {
		r.Header.Add("X-Forwarded-For", v)
	}
	r.Header.Set("Forwarded", "for=198.51.100.66;proto=https, for=\"[2001:db8:66::1]\"")
	r.Header.Set("X-Real-IP", "198.51.100.77")
	r.Header.Set("True-Client-IP", "198.51.100.88")
	return httplimit.RemoteIP(opts...)(r)
}

// TestAudit5HTTPRemoteAddrForms: RemoteIP "keys requests by the client's
// IP address (http.Request.RemoteAddr ...)", "IPv6 to /64 and IPv4 to
// /32 by default. IPv4-mapped IPv6 addresses count as IPv4. The key is
// the prefix in CIDR form"; X-Forwarded-For "is never trusted by
// default" (nor Forwarded, X-Real-IP or True-Client-IP, which the doc
// never names); a RemoteAddr without an IP address is ErrNoClientIP.
func TestAudit5HTTPRemoteAddrForms(t *testing.T) {
	xff := []string{"198.51.100.1, 198.51.100.2"}
	cases := []struct{ remote, want string }{
		{"203.0.113.7:443", "203.0.113.7/32"},
		{"203.0.113.7", "203.0.113.7/32"},
		{"[2001:db8:1:2:3:4:5:6]:443", "2001:db8:1:2::/64"},
		{"2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"},
		{"[fe80::1:2%eth0]:80", "fe80::/64"},
		{"[::ffff:203.0.113.7]:80", "203.0.113.7/32"},
		{"::ffff:203.0.113.7", "203.0.113.7/32"},
		{"[::1]:8080", "::/64"},
		{"0.0.0.0:1", "0.0.0.0/32"},
	}
	for _, c := range cases {
		got, err := audit5Key(c.remote, xff)
		if err != nil || got != c.want {
			t.Errorf("RemoteAddr %q: key %q, %v; want %q", c.remote, got, err, c.want)
		}
	}
	for _, remote := range []string{"", "@", "/run/app.sock", "localhost:80", "example.com:443", "not an address"} {
		if got, err := audit5Key(remote, xff); !errors.Is(err, httplimit.ErrNoClientIP) {
			t.Errorf("RemoteAddr %q: key %q, %v; want ErrNoClientIP (never the X-Forwarded-For)", remote, got, err)
		}
	}
	// Prefix options.
	for _, c := range []struct {
		remote string
		opts   []httplimit.IPOption
		want   string
	}{
		{"203.0.113.7:1", []httplimit.IPOption{httplimit.WithIPv4Prefix(24)}, "203.0.113.0/24"},
		{"[::ffff:203.0.113.7]:1", []httplimit.IPOption{httplimit.WithIPv4Prefix(16)}, "203.0.0.0/16"},
		{"[::ffff:203.0.113.7]:1", []httplimit.IPOption{httplimit.WithIPv6Prefix(128)}, "203.0.113.7/32"},
		{"[2001:db8:1:2:3:4:5:6]:1", []httplimit.IPOption{httplimit.WithIPv6Prefix(128)}, "2001:db8:1:2:3:4:5:6/128"},
		{"[2001:db8:1:2:3:4:5:6]:1", []httplimit.IPOption{httplimit.WithIPv6Prefix(48)}, "2001:db8:1::/48"},
		{"[2001:db8:1:2:3:4:5:6]:1", []httplimit.IPOption{httplimit.WithIPv6Prefix(0), httplimit.WithIPv4Prefix(0)}, "::/0"},
		{"203.0.113.7:1", []httplimit.IPOption{httplimit.WithIPv6Prefix(0), httplimit.WithIPv4Prefix(0)}, "0.0.0.0/0"},
	} {
		if got, err := audit5Key(c.remote, nil, c.opts...); err != nil || got != c.want {
			t.Errorf("RemoteAddr %q with prefix options: %q, %v; want %q", c.remote, got, err, c.want)
		}
	}
	for _, bad := range []httplimit.IPOption{httplimit.WithIPv4Prefix(33), httplimit.WithIPv4Prefix(-1), httplimit.WithIPv6Prefix(129), httplimit.WithTrustedProxies(-1)} {
		func() {
			defer func() {
				if s := fmt.Sprint(recover()); !strings.HasPrefix(s, "httplimit:") {
					t.Errorf("bad IPOption: panic %q, want one starting \"httplimit:\"", s)
				}
			}()
			httplimit.RemoteIP(bad)
		}()
	}
}

// TestAudit5HTTPForwardedFor: with WithTrustedProxies(n), "the client is
// the n-th entry from the right ... anything further left was written by
// the client and is ignored", over every X-Forwarded-For line in order;
// fewer than n entries, or a trusted entry that is not an address, is
// ErrForwardedFor (400 from the default handler); RemoteAddr (a proxy's,
// even a Unix socket's "@") and the other forwarding headers play no
// part.
func TestAudit5HTTPForwardedFor(t *testing.T) {
	cases := []struct {
		n    int
		xff  []string
		want string // "" means ErrForwardedFor
	}{
		{1, []string{"203.0.113.7"}, "203.0.113.7/32"},
		{1, []string{"6.6.6.6, 203.0.113.7"}, "203.0.113.7/32"},
		{1, []string{"6.6.6.6,203.0.113.7"}, "203.0.113.7/32"},
		{1, []string{"6.6.6.6", "203.0.113.7"}, "203.0.113.7/32"},
		{2, []string{"6.6.6.6", "203.0.113.7, 10.0.0.2"}, "203.0.113.7/32"},
		{2, []string{"6.6.6.6, 203.0.113.7", "10.0.0.2"}, "203.0.113.7/32"},
		{3, []string{"garbage", "203.0.113.7", "10.0.0.3, 10.0.0.2"}, "203.0.113.7/32"},
		{1, []string{"  203.0.113.7  "}, "203.0.113.7/32"},
		{1, []string{"203.0.113.7:5678"}, "203.0.113.7/32"},
		{1, []string{"2001:db8:1:2::99"}, "2001:db8:1:2::/64"},
		{1, []string{"[2001:db8:1:2::99]:443"}, "2001:db8:1:2::/64"},
		{1, []string{"fe80::1%eth0"}, "fe80::/64"},
		{1, []string{"::ffff:203.0.113.7"}, "203.0.113.7/32"},
		{1, []string{"unknown"}, ""},
		{1, []string{"6.6.6.6, "}, ""},
		{1, []string{"203.0.113.7, not-an-ip"}, ""},
		{2, []string{"203.0.113.7"}, ""},
		{1, nil, ""},
		{1, []string{""}, ""},
		{4, []string{"1.1.1.1, 2.2.2.2", "3.3.3.3"}, ""},
	}
	for _, c := range cases {
		for _, remote := range []string{"10.0.0.1:1234", "@", ""} {
			got, err := audit5Key(remote, c.xff, httplimit.WithTrustedProxies(c.n))
			if c.want == "" {
				if !errors.Is(err, httplimit.ErrForwardedFor) {
					t.Errorf("n=%d XFF %q (RemoteAddr %q): key %q, %v; want ErrForwardedFor", c.n, c.xff, remote, got, err)
				}
				continue
			}
			if err != nil || got != c.want {
				t.Errorf("n=%d XFF %q (RemoteAddr %q): key %q, %v; want %q", c.n, c.xff, remote, got, err, c.want)
			}
		}
	}
	// Through the middleware: 400, status text only, nothing debited.
	lim := &audit5Limiter{}
	h := httplimit.Wrap(lim, audit5OK, httplimit.WithKey(httplimit.RemoteIP(httplimit.WithTrustedProxies(2))))
	w := audit5Serve(h, audit5Req("10.0.0.1:1", "X-Forwarded-For", "secret-9f3"))
	if w.Code != 400 || strings.TrimSpace(w.Body.String()) != http.StatusText(400) || strings.Contains(fmt.Sprint(w.Header()), "secret-9f3") || lim.calls != 0 {
		t.Fatalf("too few entries: %d %q %v, limiter called %d times", w.Code, w.Body.String(), w.Header(), lim.calls)
	}
}

// audit5KeySeeds is FuzzAudit5HTTPKeyOracle's seed corpus, also run by
// TestAudit5HTTPKeyOracleSeeds.
var audit5KeySeeds = []struct {
	host   string
	port   uint16
	client string
}{
	{"203.0.113.7", 80, "6.6.6.6"},
	{"2001:db8:1:2:3:4:5:6", 443, ""},
	{"fe80::1%eth0", 0, "x,y,,"},
	{"::ffff:192.0.2.1", 65535, "[::1]:1"},
	{"::ffff:0:0", 1, ""},
	{"::", 8080, "2001:db8::1"},
	{"64:ff9b::192.0.2.33", 53, "unknown"},
	{"fe80::1%25", 9, " "},
	{"1.2.3.4%eth0", 1, ""},
	{"[::1]", 1, ""},
	{"0.0.0.0", 0, "255.255.255.255"},
	{"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 1, ""},
}

// FuzzAudit5HTTPKeyOracle: for any address netip parses, the key
// RemoteIP gives it is "the prefix in CIDR form" of that address
// (IPv4-mapped counting as IPv4, /32 and /64 by default), the same
// whether it arrives as RemoteAddr host:port, as a bare RemoteAddr, or
// as the trusted X-Forwarded-For entry (alone or with a port), whatever
// the client wrote to its left; and RemoteIP never panics on any input.
func FuzzAudit5HTTPKeyOracle(f *testing.F) {
	for _, s := range audit5KeySeeds {
		f.Add(s.host, s.port, s.client)
	}
	f.Fuzz(audit5KeyOracle)
}

// TestAudit5HTTPKeyOracleSeeds runs FuzzAudit5HTTPKeyOracle's property
// over its seed corpus (so that -run TestAudit5HTTP covers it).
func TestAudit5HTTPKeyOracleSeeds(t *testing.T) {
	for _, s := range audit5KeySeeds {
		audit5KeyOracle(t, s.host, s.port, s.client)
	}
}

func audit5KeyOracle(t *testing.T, host string, port uint16, client string) {
	t.Helper()
	if strings.ContainsAny(host+client, "\r\n\x00") {
		return
	}
	a, perr := netip.ParseAddr(host)
	remote := net.JoinHostPort(host, strconv.Itoa(int(port)))
	k1, err1 := audit5Key(remote, nil)
	k2, err2 := audit5Key(host, nil)
	k3, err3 := audit5Key("@", []string{client, host}, httplimit.WithTrustedProxies(1))
	if perr != nil {
		return // not an address: only "no panic" (and the errors are the package's)
	}
	u := a.Unmap().WithZone("")
	bits := 64
	if u.Is4() {
		bits = 32
	}
	want := netip.PrefixFrom(u, bits).Masked().String()
	if err1 != nil || k1 != want {
		t.Fatalf("RemoteAddr %q: %q, %v; want %q", remote, k1, err1, want)
	}
	if err2 != nil || k2 != want {
		t.Fatalf("bare RemoteAddr %q: %q, %v; want %q", host, k2, err2, want)
	}
	if strings.ContainsAny(a.Zone(), ", \t") {
		return // a zone a header entry cannot carry as one trimmed entry
	}
	if err3 != nil || k3 != want {
		t.Fatalf("X-Forwarded-For [%q %q]: %q, %v; want %q", client, host, k3, err3, want)
	}
	if a.Zone() == "" { // a port on the entry, as some proxies write it
		k4, err4 := audit5Key("@", []string{client + ", " + netip.AddrPortFrom(a, port).String()}, httplimit.WithTrustedProxies(1))
		if err4 != nil || k4 != want {
			t.Fatalf("X-Forwarded-For entry %q: %q, %v; want %q", netip.AddrPortFrom(a, port), k4, err4, want)
		}
	}
}

// TestAudit5HTTPKeysPerPrefix: the middleware limits "each key (by
// default the client IP, IPv6 folded to /64)": with burst 1, two
// addresses of one /64 share a bucket, the next /64 has its own, an
// IPv4 client and its IPv4-mapped form share one, and two IPv4
// addresses do not.
func TestAudit5HTTPKeysPerPrefix(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1 << 30)
	h := httplimit.Wrap(limit.MustNew(limit.Every(time.Hour), 1, limit.WithClock(clk), limit.WithSeed(1)), audit5OK)
	steps := []struct {
		remote string
		code   int
	}{
		{"[2001:db8:1:2::1]:1", 200},
		{"[2001:db8:1:2:ffff:ffff:ffff:ffff]:2", 429},
		{"[2001:db8:1:3::1]:1", 200},
		{"203.0.113.7:1", 200},
		{"[::ffff:203.0.113.7]:2", 429},
		{"203.0.113.8:1", 200},
	}
	for _, s := range steps {
		if w := audit5Serve(h, audit5Req(s.remote)); w.Code != s.code {
			t.Fatalf("%s: %d, want %d", s.remote, w.Code, s.code)
		}
	}
}

// TestAudit5HTTPErrorStatuses: the default error handler "answers 500
// Internal Server Error for ErrNoClientIP, ErrNilRequest and ErrBadCost
// (the server's faults), 503 Service Unavailable for ErrLimiter, and 400
// Bad Request otherwise, with the status text only: no error text
// reaches the client", errors matched with errors.Is (so a KeyFunc's
// wrapped sentinel counts); a key error "consumes no tokens" (the
// limiter is not asked). The error a custom handler gets for a limiter
// failure matches ErrLimiter and wraps the limiter's.
func TestAudit5HTTPErrorStatuses(t *testing.T) {
	const secret = "s3cr3t-detail"
	cases := []struct {
		err  error
		code int
	}{
		{errors.New(secret), 400},
		{fmt.Errorf("%s: %w", secret, httplimit.ErrNoHeader), 400},
		{fmt.Errorf("%s: %w", secret, httplimit.ErrForwardedFor), 400},
		{fmt.Errorf("%s: %w", secret, httplimit.ErrNoClientIP), 500},
		{fmt.Errorf("%s: %w", secret, httplimit.ErrNilRequest), 500},
		{fmt.Errorf("%s: %w", secret, httplimit.ErrBadCost), 500},
	}
	for _, c := range cases {
		lim := &audit5Limiter{d: limit.Decision{Allowed: true}}
		h := httplimit.Wrap(lim, audit5OK, httplimit.WithKey(func(*http.Request) (string, error) { return "", c.err }))
		w := audit5Serve(h, audit5Req("192.0.2.1:1"))
		if w.Code != c.code || strings.TrimSpace(w.Body.String()) != http.StatusText(c.code) || strings.Contains(fmt.Sprint(w.Header()), secret) {
			t.Errorf("key error %v: %d %q %v; want %d with the status text only", c.err, w.Code, w.Body.String(), w.Header(), c.code)
		}
		if lim.calls != 0 {
			t.Errorf("key error %v: the limiter was asked", c.err)
		}
	}
	// Bad costs: 500, limiter not asked.
	for _, cost := range []int{0, -1, -1 << 62} {
		lim := &audit5Limiter{d: limit.Decision{Allowed: true}}
		h := httplimit.Wrap(lim, audit5OK, httplimit.WithKey(httplimit.Func(func(*http.Request) string { return "k" })),
			httplimit.WithCost(func(*http.Request) int { return cost }))
		w := audit5Serve(h, audit5Req("192.0.2.1:1"))
		if w.Code != 500 || strings.TrimSpace(w.Body.String()) != http.StatusText(500) || lim.calls != 0 {
			t.Errorf("cost %d: %d %q, limiter asked %d times", cost, w.Code, w.Body.String(), lim.calls)
		}
	}
	// Limiter failure without a decision: 503, status text; a custom
	// handler's error matches ErrLimiter and the limiter's error.
	limErr := errors.New("store down " + secret)
	lim := &audit5Limiter{err: limErr}
	w := audit5Serve(httplimit.Wrap(lim, audit5OK), audit5Req("192.0.2.1:1"))
	if w.Code != http.StatusServiceUnavailable || strings.TrimSpace(w.Body.String()) != http.StatusText(http.StatusServiceUnavailable) || strings.Contains(fmt.Sprint(w.Header()), secret) {
		t.Errorf("limiter error: %d %q %v", w.Code, w.Body.String(), w.Header())
	}
	var got error
	h := httplimit.Wrap(lim, audit5OK, httplimit.WithErrorHandler(func(w http.ResponseWriter, _ *http.Request, err error) {
		got = err
		w.WriteHeader(599)
	}))
	audit5Serve(h, audit5Req("192.0.2.1:1"))
	if !errors.Is(got, httplimit.ErrLimiter) || !errors.Is(got, limErr) {
		t.Errorf("error handler got %v: want one matching ErrLimiter and the limiter's error", got)
	}
}

// TestAudit5HTTPWithIsolation: With "returns middleware with m's options
// and limiter l, then opts": the new options apply to the new middleware
// only; m keeps its own (text/plain denials, its own policy), both share
// m's hook and key, and each announces its own limiter's policy.
func TestAudit5HTTPWithIsolation(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1 << 30)
	var hooked []string
	m, err := httplimit.New(limit.MustNew(limit.Every(time.Hour), 1, limit.WithClock(clk), limit.WithName("base")),
		httplimit.WithKey(httplimit.Header("X-User")),
		httplimit.WithHook(func(_ *http.Request, key string, d limit.Decision) { hooked = append(hooked, d.Policy+":"+key) }))
	if err != nil {
		t.Fatal(err)
	}
	m2, err := m.With(limit.MustNew(limit.Every(time.Hour), 2, limit.WithClock(clk), limit.WithName("route")), httplimit.WithProblemJSON(true))
	if err != nil {
		t.Fatal(err)
	}
	h1, h2 := m.Handler(audit5OK), m2.Handler(audit5OK)
	for range 3 {
		audit5Serve(h1, audit5Req("192.0.2.1:1", "X-User", "u"))
		audit5Serve(h2, audit5Req("192.0.2.1:1", "X-User", "u"))
	}
	w1 := audit5Serve(h1, audit5Req("192.0.2.1:1", "X-User", "u"))
	w2 := audit5Serve(h2, audit5Req("192.0.2.1:1", "X-User", "u"))
	if w1.Code != 429 || !strings.HasPrefix(w1.Header().Get("Content-Type"), "text/plain") || w1.Header().Get("RateLimit-Policy") != `"base";q=1;w=3600` {
		t.Fatalf("m after With: %d %q %q", w1.Code, w1.Header().Get("Content-Type"), w1.Header().Get("RateLimit-Policy"))
	}
	if w2.Code != 429 || w2.Header().Get("Content-Type") != "application/problem+json" || w2.Header().Get("RateLimit-Policy") != `"route";q=2;w=7200` {
		t.Fatalf("m.With: %d %q %q", w2.Code, w2.Header().Get("Content-Type"), w2.Header().Get("RateLimit-Policy"))
	}
	want := "base:u route:u base:u route:u base:u route:u base:u route:u"
	if got := strings.Join(hooked, " "); got != want {
		t.Fatalf("hook saw %q; want %q", got, want)
	}
	if w := audit5Serve(h2, audit5Req("192.0.2.1:1")); w.Code != 400 {
		t.Fatalf("m.With without the key header: %d, want 400 (m's Header key shared)", w.Code)
	}
}

// TestAudit5HTTPSetBurstConcurrent: RateLimit-Policy lists the policies
// "as the limiter has them now: SetLimit and SetBurst show in the next
// answer". While goroutines serve requests and another flips the burst
// between 5 and 9, every answer's RateLimit-Policy is one of the two
// values; once SetBurst has returned, the next answer shows it.
func TestAudit5HTTPSetBurstConcurrent(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1 << 30)
	l := limit.MustNew(limit.Every(time.Second), 5, limit.WithClock(clk), limit.WithName("api"))
	h := httplimit.Wrap(l, audit5OK)
	valid := map[string]bool{`"api";q=5;w=5`: true, `"api";q=9;w=9`: true}
	var bad atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				w := audit5Serve(h, audit5Req(fmt.Sprintf("198.51.100.%d:1", 1+(g*50+i)%200)))
				if v := w.Header().Get("RateLimit-Policy"); !valid[v] {
					bad.Store(fmt.Sprintf("RateLimit-Policy %q", v))
				}
			}
		}()
	}
	for i := range 200 {
		b := 5
		if i%2 == 0 {
			b = 9
		}
		if err := l.SetBurst(b); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf(`"api";q=%d;w=%d`, b, b)
		if v := audit5Serve(h, audit5Req("192.0.2.200:1")).Header().Get("RateLimit-Policy"); v != want {
			// another SetBurst cannot have happened: this goroutine is the only one calling it
			close(stop)
			wg.Wait()
			t.Fatalf("after SetBurst(%d) returned: RateLimit-Policy %q, want %q", b, v, want)
		}
	}
	close(stop)
	wg.Wait()
	if v := bad.Load(); v != nil {
		t.Fatal(v)
	}
}

// TestAudit5HTTPMultiRetryAfter: behind a Multi ("10/s and 1000/h at
// once, all or nothing"), "RateLimit-Policy lists them all, RateLimit
// names the one that binds", and a denial's Retry-After is "RetryAfter
// rounded up (never early for the key's own debt)" and "never earlier
// than t": over a random schedule of costs on a fake clock, with three
// windows whose denials overlap, a client that comes back Retry-After
// seconds after any denial is admitted, RateLimit names the Decision's
// policy with its r, and an admission's r is the least remaining of the
// windows.
func TestAudit5HTTPMultiRetryAfter(t *testing.T) {
	for _, eng := range []limit.Engine{limit.Auto, limit.CountMin} {
		t.Run(eng.String(), func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			clk.Set(5_000_000)
			mk := func(l limit.Limit, b int, name string) *limit.Limiter {
				return limit.MustNew(l, b, limit.WithClock(clk), limit.WithEngine(eng), limit.WithName(name), limit.WithSeed(11))
			}
			ml, err := limit.NewMulti(mk(2, 4, "sec"), mk(limit.Every(3*time.Second), 6, "slow"), mk(limit.Every(7*time.Second), 8, "min"))
			if err != nil {
				t.Fatal(err)
			}
			var last limit.Decision
			cost := 1
			h := httplimit.Wrap(ml, audit5OK, httplimit.WithCost(func(*http.Request) int { return cost }),
				httplimit.WithHook(func(_ *http.Request, _ string, d limit.Decision) { last = d }))
			const wantPolicy = `"sec";q=4;w=2, "slow";q=6;w=18, "min";q=8;w=56`
			rng := uint64(12345)
			next := func(n int) int { rng = rng*6364136223846793005 + 1442695040888963407; return int(rng>>33) % n }
			for i := range 400 {
				clk.Advance(time.Duration(next(2500)) * time.Millisecond)
				cost = 1 + next(4)
				w := audit5Serve(h, audit5Req("198.51.100.5:1"))
				d := last
				if got := w.Header().Get("RateLimit-Policy"); got != wantPolicy {
					t.Fatalf("op %d: RateLimit-Policy %q", i, got)
				}
				if rl := w.Header().Get("RateLimit"); !strings.HasPrefix(rl, fmt.Sprintf(`"%s";r=%d`, d.Policy, d.Remaining)) {
					t.Fatalf("op %d: RateLimit %q for %+v", i, rl, d)
				}
				if d.Allowed {
					if w.Code != 200 {
						t.Fatalf("op %d: admitted but %d", i, w.Code)
					}
					continue
				}
				ra, err := strconv.ParseInt(w.Header().Get("Retry-After"), 10, 64)
				_, tv, hasT := strings.Cut(w.Header().Get("RateLimit"), ";t=")
				tt, _ := strconv.ParseInt(tv, 10, 64)
				if w.Code != 429 || err != nil || ra < 1 || (hasT && tt > ra) {
					t.Fatalf("op %d: %d, Retry-After %q, RateLimit %q (%+v)", i, w.Code, w.Header().Get("Retry-After"), w.Header().Get("RateLimit"), d)
				}
				clk.Advance(time.Duration(ra) * time.Second)
				if w := audit5Serve(h, audit5Req("198.51.100.5:1")); w.Code != 200 {
					t.Fatalf("op %d: cost %d denied again %d s later (Retry-After %d, first %+v, then %+v)", i, cost, ra, ra, d, last)
				}
			}
		})
	}
}

// TestAudit5HTTPCost: WithCost "sets the tokens a request costs": on a
// frozen clock with burst 10, requests of cost 3 leave r = 7, 4, 1 and
// the fourth is denied (Retry-After set); a request costing more than the
// burst "can never be admitted: 429 without Retry-After", and (RejectCost
// 0 by default) takes nothing: a cost-1 request is still admitted with
// r = 0. A cost of exactly the burst is not Never.
func TestAudit5HTTPCost(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1 << 30)
	cost := 3
	h := httplimit.Wrap(limit.MustNew(limit.Every(time.Second), 10, limit.WithClock(clk)), audit5OK,
		httplimit.WithCost(func(*http.Request) int { return cost }))
	for i, want := range []string{`"default";r=7;t=1`, `"default";r=4;t=1`, `"default";r=1;t=1`} {
		if w := audit5Serve(h, audit5Req("192.0.2.9:1")); w.Code != 200 || w.Header().Get("RateLimit") != want {
			t.Fatalf("cost-3 request %d: %d %q; want 200 %q", i, w.Code, w.Header().Get("RateLimit"), want)
		}
	}
	if w := audit5Serve(h, audit5Req("192.0.2.9:1")); w.Code != 429 || w.Header().Get("Retry-After") != "2" {
		t.Fatalf("cost 3 with 1 left: %d, Retry-After %q; want 429, 2", w.Code, w.Header().Get("Retry-After"))
	}
	cost = 11
	if w := audit5Serve(h, audit5Req("192.0.2.9:1")); w.Code != 429 || w.Header().Get("Retry-After") != "" {
		t.Fatalf("cost 11 > burst: %d, Retry-After %q; want 429 without", w.Code, w.Header().Get("Retry-After"))
	}
	if w := audit5Serve(h, audit5Req("192.0.2.10:1")); w.Code != 429 || w.Header().Get("Retry-After") != "" {
		t.Fatalf("cost 11 > burst, fresh client: %d, Retry-After %q; want 429 without", w.Code, w.Header().Get("Retry-After"))
	}
	cost = 1
	if w := audit5Serve(h, audit5Req("192.0.2.9:1")); w.Code != 200 || w.Header().Get("RateLimit") != `"default";r=0;t=1` {
		t.Fatalf("cost 1 after the Never: %d %q", w.Code, w.Header().Get("RateLimit"))
	}
	cost = 10
	if w := audit5Serve(h, audit5Req("192.0.2.10:1")); w.Code != 200 || w.Header().Get("RateLimit") != `"default";r=0;t=1` {
		t.Fatalf("cost = burst on a fresh client (after its Never): %d %q", w.Code, w.Header().Get("RateLimit"))
	}
}

// TestAudit5HTTPNilOptions: through With, "nil removes it" for WithSkip,
// WithExcludedKey, WithHook and WithLimiterError, "nil restores the
// default" for WithDeniedHandler, and a nil WithKey or WithErrorHandler
// function is New's (and With's) *sketch.ConfigError.
func TestAudit5HTTPNilOptions(t *testing.T) {
	var hooks, limErrs, denials int
	lim := &audit5Limiter{d: limit.Decision{Limit: 1, Burst: 10, Policy: "p", RetryAfter: time.Second}, err: errors.New("degraded")}
	m, err := httplimit.New(lim,
		httplimit.WithSkip(func(*http.Request) bool { return true }),
		httplimit.WithExcludedKey(func(string) bool { return true }),
		httplimit.WithHook(func(*http.Request, string, limit.Decision) { hooks++ }),
		httplimit.WithLimiterError(func(*http.Request, string, error) { limErrs++ }),
		httplimit.WithDeniedHandler(func(w http.ResponseWriter, _ *http.Request, _ limit.Decision) { denials++; w.WriteHeader(418) }))
	if err != nil {
		t.Fatal(err)
	}
	if w := audit5Serve(m.Handler(audit5OK), audit5Req("192.0.2.1:1")); w.Code != 200 || lim.calls != 0 {
		t.Fatalf("skipped: %d, limiter asked %d times", w.Code, lim.calls)
	}
	m2, err := m.With(lim, httplimit.WithSkip(nil))
	if err != nil {
		t.Fatal(err)
	}
	if w := audit5Serve(m2.Handler(audit5OK), audit5Req("192.0.2.1:1")); w.Code != 200 || lim.calls != 0 {
		t.Fatalf("excluded: %d, limiter asked %d times", w.Code, lim.calls)
	}
	m3, err := m2.With(lim, httplimit.WithExcludedKey(nil))
	if err != nil {
		t.Fatal(err)
	}
	if w := audit5Serve(m3.Handler(audit5OK), audit5Req("192.0.2.1:1")); w.Code != 418 || lim.calls != 1 || hooks != 1 || limErrs != 1 || denials != 1 {
		t.Fatalf("with hooks: %d, calls %d hooks %d limErrs %d denials %d", w.Code, lim.calls, hooks, limErrs, denials)
	}
	m4, err := m3.With(lim, httplimit.WithHook(nil), httplimit.WithLimiterError(nil), httplimit.WithDeniedHandler(nil))
	if err != nil {
		t.Fatal(err)
	}
	w := audit5Serve(m4.Handler(audit5OK), audit5Req("192.0.2.1:1"))
	if w.Code != 429 || w.Header().Get("Retry-After") != "1" || hooks != 1 || limErrs != 1 || denials != 1 {
		t.Fatalf("hooks removed: %d Retry-After %q, hooks %d limErrs %d denials %d", w.Code, w.Header().Get("Retry-After"), hooks, limErrs, denials)
	}
	for name, o := range map[string]httplimit.Option{"WithKey(nil)": httplimit.WithKey(nil), "WithErrorHandler(nil)": httplimit.WithErrorHandler(nil)} {
		if _, err := httplimit.New(lim, o); !errors.Is(err, sketch.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "httplimit: ") {
			t.Errorf("New(%s): %v", name, err)
		}
		if _, err := m.With(lim, o); !errors.Is(err, sketch.ErrInvalidConfig) {
			t.Errorf("With(%s): %v", name, err)
		}
	}
}
