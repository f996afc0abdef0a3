package main

// Audit 128: the example server of this package, through its router,
// against package examples' doc (examples/doc.go) and httplimit's.
// The same file runs in every router's package (nethttp, chi, echo, gin).

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/examples/internal/check"
	"github.com/lfgrudge/grudge/limit/httplimit"
)

const audit128Multi = `"per-second";q=20;w=2, "per-hour";q=1000;w=3600`

type audit128Answer struct {
	code int
	body string
	hdr  http.Header
}

func audit128Do(h http.Handler, method, target, remote string, hdr ...string) audit128Answer {
	r := httptest.NewRequest(method, target, nil)
	r.RemoteAddr = remote
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	resp := w.Result()
	b, _ := io.ReadAll(resp.Body)
	return audit128Answer{resp.StatusCode, string(b), resp.Header}
}

// TestAudit128LoginPathVariants: doc.go says POST /login "gets its own,
// tighter limiter (5 per minute, bursts of 2)". Whatever spelling of
// the path a router routes to the login handler (percent-encoding, a
// query, a trailing or doubled slash, dot segments, case), the third
// attempt of a client is never welcomed: every welcome carries the
// "login" policy, so no spelling dodges the per-route limiter.
func TestAudit128LoginPathVariants(t *testing.T) {
	h := handler(check.Defaults())
	for i, target := range []string{
		"/login", "/login/", "//login", "/%6Cogin", "/%6c%6F%67%69%6E", "/LOGIN", "/login?x=1",
		"/./login", "/a/../login", "/login%2F", "/login;x", "/login%20", "/login#frag", "/login/.",
	} {
		remote := fmt.Sprintf("192.0.2.%d:1", i+1)
		welcomes := 0
		for n := range 3 {
			a := audit128Do(h, "POST", target, remote)
			if a.body != "welcome\n" {
				continue
			}
			welcomes++
			if !strings.Contains(a.hdr.Get("RateLimit-Policy"), `"login";q=2;w=24`) {
				t.Errorf("POST %s #%d: welcomed without the login policy: %v", target, n, a.hdr)
			}
		}
		if welcomes > 2 {
			t.Errorf("POST %s: %d welcomes of 3 from one client; the login limiter allows bursts of 2", target, welcomes)
		}
	}
}

// TestAudit128Denial429: the 21st GET / of a client within a second is
// 429 with Retry-After 1, the fields of the Multi (RateLimit naming
// per-second, r=0, t=1) and the problem+json body httplimit documents
// (WithProblemJSON: type quota-exceeded, title, status 429, a detail,
// violated-policies naming the policy, retryAfter in seconds).
func TestAudit128Denial429(t *testing.T) {
	for _, c := range []struct{ method, target string }{{"GET", "/"}, {"POST", "/login"}} {
		h := handler(check.Defaults())
		var a audit128Answer
		for range 21 {
			a = audit128Do(h, "GET", "/", "[2001:db8:42::1]:1")
		}
		if c.method == "POST" { // per-second already empty: api denies before login decides
			a = audit128Do(h, c.method, c.target, "[2001:db8:42::2]:1")
		}
		if a.code != 429 || a.hdr.Get("Retry-After") != "1" || a.hdr.Get("Content-Type") != "application/problem+json" ||
			a.hdr.Get("RateLimit-Policy") != audit128Multi || a.hdr.Get("RateLimit") != `"per-second";r=0;t=1` {
			t.Fatalf("%s %s: %d %v", c.method, c.target, a.code, a.hdr)
		}
		var p httplimit.Problem
		if err := json.Unmarshal([]byte(a.body), &p); err != nil || p.Type != httplimit.ProblemType || p.Title != httplimit.ProblemTitle ||
			p.Status != 429 || p.Detail == "" || len(p.ViolatedPolicies) != 1 || p.ViolatedPolicies[0] != "per-second" ||
			p.RetryAfter == nil || *p.RetryAfter != 1 {
			t.Fatalf("%s %s: problem %q: %+v %v", c.method, c.target, a.body, p, err)
		}
		if strings.Contains(a.body, "2001:db8") { // WithDeniedHandler's rule, kept by the default: no key in the body
			t.Fatalf("%s %s: the key in the body %q", c.method, c.target, a.body)
		}
	}
}

// TestAudit128HealthzNeverLimited: "/healthz is never limited
// (WithSkip)", whatever the method: no fields, never 429, from one
// client far past its burst.
func TestAudit128HealthzNeverLimited(t *testing.T) {
	h := handler(check.Defaults())
	for _, m := range []string{"GET", "HEAD", "POST", "OPTIONS", "PUT"} {
		for range 25 {
			a := audit128Do(h, m, "/healthz", "198.51.100.1:1")
			if a.code == 429 || a.hdr.Get("RateLimit-Policy") != "" || a.hdr.Get("RateLimit") != "" {
				t.Fatalf("%s /healthz: %d %v", m, a.code, a.hdr)
			}
		}
	}
}

// TestAudit128UnroutedCharged: requests no route serves (404, 405,
// HEAD and OPTIONS where the router has no handler) are charged to the
// client like any other: "every client ... gets 10 requests per
// second with bursts of 20". The 21st such request is 429.
func TestAudit128UnroutedCharged(t *testing.T) {
	for _, c := range []struct{ method, target string }{
		{"GET", "/nope"}, {"PUT", "/"}, {"OPTIONS", "/login"}, {"HEAD", "/"}, {"DELETE", "/login"}, {"GET", "/login"},
	} {
		h := handler(check.Defaults())
		for n := range 21 {
			a := audit128Do(h, c.method, c.target, "198.51.100.2:1")
			if a.hdr.Get("RateLimit-Policy") != audit128Multi {
				t.Fatalf("%s %s #%d: %d without the policies: %v", c.method, c.target, n, a.code, a.hdr)
			}
			if (n == 20) != (a.code == 429) {
				t.Fatalf("%s %s #%d: %d", c.method, c.target, n, a.code)
			}
		}
	}
}

// TestAudit128Keys: the key is the connection's IP, IPv6 per /64, IPv4
// whole (an IPv4-mapped IPv6 peer is that IPv4 client); X-Forwarded-For,
// Forwarded and X-Real-IP are never trusted (httplimit: "it is never
// trusted by default").
func TestAudit128Keys(t *testing.T) {
	for _, c := range []struct {
		name         string
		first, third string // two requests from first, then one from third
		hdr          []string
		denied       bool
	}{
		{"same /64", "[2001:db8:7::1]:1", "[2001:db8:7::ffff]:9", nil, true},
		{"other /64", "[2001:db8:7::1]:1", "[2001:db8:7:1::1]:1", nil, false},
		{"IPv4 whole", "192.0.2.10:1", "192.0.2.11:1", nil, false},
		{"IPv4 other port", "192.0.2.10:1", "192.0.2.10:2", nil, true},
		{"IPv4-mapped", "192.0.2.10:1", "[::ffff:192.0.2.10]:2", nil, true},
		{"XFF names other", "192.0.2.10:1", "192.0.2.10:2", []string{"X-Forwarded-For", "203.0.113.9"}, true},
		{"XFF names limited", "192.0.2.10:1", "192.0.2.12:2", []string{"X-Forwarded-For", "192.0.2.10"}, false},
		{"Forwarded", "192.0.2.10:1", "192.0.2.12:2", []string{"Forwarded", "for=192.0.2.10"}, false},
		{"X-Real-IP", "192.0.2.10:1", "192.0.2.12:2", []string{"X-Real-IP", "192.0.2.10"}, false},
	} {
		h := handler(check.Defaults())
		for range 2 {
			if a := audit128Do(h, "POST", "/login", c.first); a.code != 200 {
				t.Fatalf("%s: login from %s: %d", c.name, c.first, a.code)
			}
		}
		a := audit128Do(h, "POST", "/login", c.third, c.hdr...)
		if (a.code == 429) != c.denied {
			t.Errorf("%s: third login from %s %v: %d, want denied %v", c.name, c.third, c.hdr, a.code, c.denied)
		}
	}
}

// TestAudit128ServerNoLeak: the handler behind a real httptest.Server,
// admitted and denied requests over real connections, then Close: the
// goroutines come back to their count before (nothing the handler or
// its limiters start outlives the server).
func TestAudit128ServerNoLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	srv := httptest.NewServer(handler(check.Defaults()))
	client := srv.Client()
	codes := map[int]int{}
	for range 4 {
		resp, err := client.Post(srv.URL+"/login", "text/plain", nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		codes[resp.StatusCode]++
	}
	if codes[200] != 2 || codes[429] != 2 {
		t.Fatalf("logins over a real connection: %v", codes)
	}
	client.CloseIdleConnections()
	srv.Close()
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines after Close, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}

// TestAudit128HourlyWindow: with the per-second window out of the way
// (-rate 1e9/s; its denials skipped), a client gets the hourly bucket's 1000 and then a
// denial naming "per-hour" (the Multi's window that denies longest),
// Retry-After 4 (3.6 s to its next token, rounded up; less when the
// loop ran long), the RateLimit
// item of per-hour with r=0 and t the same, violated-policies ["per-hour"].
func TestAudit128HourlyWindow(t *testing.T) {
	f := check.Defaults()
	f.PerSecond = 1e9
	h := handler(f)
	admitted, start := 0, time.Now()
	var a audit128Answer
	// The limiter's clock is coarse: within one of its ticks even 1e9/s
	// refills nothing, so per-second denials are skipped.
	for n := 0; n < 200000; n++ {
		a = audit128Do(h, "GET", "/", "203.0.113.77:1")
		if a.code == 200 {
			admitted++
		} else if !strings.Contains(a.body, `"per-second"`) {
			break
		}
	}
	// The hourly bucket refills a token every 3.6 s while the loop runs
	// (slow under -race): one more admitted per 3.6 s, an earlier retry
	// (4 when the loop took under half a second).
	elapsed := time.Since(start)
	extra := int(elapsed / (3600 * time.Millisecond))
	ra := a.hdr.Get("Retry-After")
	if admitted < 1000 || admitted > 1000+extra || a.code != 429 || !strings.Contains("1234", ra) || len(ra) != 1 ||
		(elapsed < 500*time.Millisecond && ra != "4") ||
		a.hdr.Get("RateLimit") != `"per-hour";r=0;t=`+ra {
		t.Fatalf("admitted %d (extra %d); last %d %v", admitted, extra, a.code, a.hdr)
	}
	var p httplimit.Problem
	if err := json.Unmarshal([]byte(a.body), &p); err != nil || len(p.ViolatedPolicies) != 1 || p.ViolatedPolicies[0] != "per-hour" ||
		p.RetryAfter == nil || fmt.Sprint(*p.RetryAfter) != ra {
		t.Fatalf("problem %q: %+v %v", a.body, p, err)
	}
}
