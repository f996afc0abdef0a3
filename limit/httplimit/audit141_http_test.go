package httplimit_test

// Audit 141: the middleware under real servers and clients
// (httptest.Server over HTTP/1.1 and HTTP/2), 1xx, panics, aborted
// handlers, client disconnects, http.ResponseController, long keys, and
// the bytes a client receives.

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"regexp"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a141NoLeak fails t if the goroutine count does not come back to what
// it is now once t's later cleanups (servers, clients) have run.
func a141NoLeak(t *testing.T) {
	t.Helper()
	base := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > base {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<16)
				t.Errorf("goroutines: %d, were %d\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}

type a141Srv struct {
	name   string
	srv    *httptest.Server
	client *http.Client
	h2     bool
}

// a141Servers starts h on an HTTP/1.1 server and an HTTP/2 (TLS)
// server, closed (clients' idle connections included) at t's end.
func a141Servers(t *testing.T, h http.Handler) []a141Srv {
	t.Helper()
	quiet := log.New(io.Discard, "", 0)
	s1 := httptest.NewUnstartedServer(h)
	s1.Config.ErrorLog = quiet
	s1.Start()
	s2 := httptest.NewUnstartedServer(h)
	s2.Config.ErrorLog = quiet
	s2.EnableHTTP2 = true
	s2.StartTLS()
	out := []a141Srv{
		{"HTTP/1.1", s1, s1.Client(), false},
		{"HTTP/2", s2, s2.Client(), true},
	}
	for _, s := range out {
		t.Cleanup(func() {
			s.client.CloseIdleConnections()
			s.srv.Close()
		})
	}
	return out
}

func a141Get(t *testing.T, s a141Srv, method, path string, hdr http.Header) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, s.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	res, err := s.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", s.name, method, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s: body: %v", s.name, err)
	}
	wantMajor := 1
	if s.h2 {
		wantMajor = 2
	}
	if res.ProtoMajor != wantMajor {
		t.Fatalf("%s: answered over %s", s.name, res.Proto)
	}
	return res, string(b)
}

// Strict RFC 9651 grammar of the fields as this package writes them: a
// List of sf-string Items with Integer parameters (no sign: the fields
// hold none), members joined by ", ".
var (
	a141Str    = `"(?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\["\\])*"`
	a141Param  = `;[a-z*][a-z0-9_\-.*]*=[0-9]{1,15}`
	a141Member = a141Str + `(?:` + a141Param + `)*`
	a141List   = regexp.MustCompile(`^` + a141Member + `(?:, ` + a141Member + `)*$`)
	a141Digits = regexp.MustCompile(`^[0-9]{1,15}$`)
)

// a141CheckFields checks every rate-limit field of res: one line each,
// well formed, no sign.
func a141CheckFields(t *testing.T, who string, h http.Header) {
	t.Helper()
	for _, f := range []string{"RateLimit", "RateLimit-Policy"} {
		vs := h.Values(f)
		if len(vs) > 1 {
			t.Errorf("%s: %s in %d lines %q", who, f, len(vs), vs)
		}
		for _, v := range vs {
			if !a141List.MatchString(v) {
				t.Errorf("%s: %s %q is not a well-formed List", who, f, v)
			}
		}
	}
	for _, f := range []string{"Retry-After", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} {
		vs := h.Values(f)
		if len(vs) > 1 {
			t.Errorf("%s: %s in %d lines %q", who, f, len(vs), vs)
		}
		for _, v := range vs {
			if !a141Digits.MatchString(v) {
				t.Errorf("%s: %s %q is not 1*15DIGIT", who, f, v)
			}
		}
	}
}

var a141OK = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })

// What a client sees, byte for byte, over HTTP/1.1 and HTTP/2, when its
// bucket is empty (a 429), when the request can never be admitted, and
// in problem+json; HEAD denials carry the fields and no body.
func TestAudit141DenialAsClientSeesIt(t *testing.T) {
	a141NoLeak(t)
	clk := sketchtest.NewFakeClock()
	l := limit.MustNew(1, 2, limit.WithName("p"), limit.WithClock(clk))
	cost := func(r *http.Request) int {
		if r.URL.Path == "/big" {
			return 3
		}
		return 1
	}
	m, err := httplimit.New(l, httplimit.WithCost(cost), httplimit.WithKey(httplimit.Header("K")))
	if err != nil {
		t.Fatal(err)
	}
	mp, err := m.With(l, httplimit.WithProblemJSON(true))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/", m.Handler(a141OK))
	mux.Handle("/problem", mp.Handler(a141OK))
	for _, s := range a141Servers(t, mux) {
		key := http.Header{"K": {s.name}}
		for i, want := range []string{`"p";r=1;t=1`, `"p";r=0;t=1`} {
			res, body := a141Get(t, s, "GET", "/", key)
			if res.StatusCode != 200 || body != "ok" || res.Header.Get("RateLimit") != want {
				t.Errorf("%s %d: %d %q %q", s.name, i, res.StatusCode, body, res.Header.Get("RateLimit"))
			}
			a141CheckFields(t, s.name, res.Header)
		}
		res, body := a141Get(t, s, "GET", "/", key)
		wantHdr := map[string]string{
			"Content-Type":           "text/plain; charset=utf-8",
			"X-Content-Type-Options": "nosniff",
			"Retry-After":            "1",
			"Ratelimit":              `"p";r=0;t=1`,
			"Ratelimit-Policy":       `"p";q=2;w=2`,
		}
		if res.StatusCode != 429 || body != "rate limit exceeded; retry after the Retry-After delay\n" {
			t.Errorf("%s denial: %d %q", s.name, res.StatusCode, body)
		}
		for k, v := range wantHdr {
			if got := res.Header[k]; len(got) != 1 || got[0] != v {
				t.Errorf("%s denial: %s %q; want [%q]", s.name, k, got, v)
			}
		}
		if strings.Contains(body, s.name) || strings.Contains(strings.Join(res.Header.Values("Ratelimit"), ""), s.name) {
			t.Errorf("%s: the key reached the answer", s.name)
		}
		a141CheckFields(t, s.name, res.Header)

		// HEAD: the same fields, no body.
		res, body = a141Get(t, s, "HEAD", "/", key)
		if res.StatusCode != 429 || body != "" || res.Header.Get("Retry-After") != "1" || res.Header.Get("RateLimit") != `"p";r=0;t=1` {
			t.Errorf("%s HEAD denial: %d %q %q %q", s.name, res.StatusCode, body, res.Header.Get("Retry-After"), res.Header.Get("RateLimit"))
		}

		// problem+json on the same (empty) bucket.
		res, body = a141Get(t, s, "GET", "/problem", key)
		wantBody := `{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Request cannot be satisfied as assigned quota has been exceeded","status":429,"detail":"rate limit exceeded; retry after the Retry-After delay","violated-policies":["p"],"retryAfter":1}` + "\n"
		if res.StatusCode != 429 || body != wantBody || res.Header.Get("Content-Type") != "application/problem+json" || res.Header.Get("Retry-After") != "1" {
			t.Errorf("%s problem: %d %q %q\n%s", s.name, res.StatusCode, res.Header.Get("Content-Type"), res.Header.Get("Retry-After"), body)
		}

		// Never (cost 3 > burst 2): no Retry-After, the body says not to retry.
		res, body = a141Get(t, s, "GET", "/big", key)
		if res.StatusCode != 429 || res.Header.Values("Retry-After") != nil ||
			body != "the request costs more than the burst of 2; it can never be admitted: do not retry\n" ||
			res.Header.Get("RateLimit") != `"p";r=0;t=1` {
			t.Errorf("%s never: %d %q %q %q", s.name, res.StatusCode, res.Header.Values("Retry-After"), res.Header.Get("RateLimit"), body)
		}
		a141CheckFields(t, s.name, res.Header)
	}
}

// The raw bytes of a denial on the wire (HTTP/1.1, Date removed) are the
// same on every run: fresh limiter, same clock, same request.
func TestAudit141WireBytesDeterministic(t *testing.T) {
	a141NoLeak(t)
	raw := func() string {
		clk := sketchtest.NewFakeClock()
		l := a141Multi(t,
			limit.MustNew(1, 2, limit.WithName("sec"), limit.WithClock(clk)),
			limit.MustNew(100.0/3600, 3, limit.WithName("hour"), limit.WithClock(clk)))
		outerL := limit.MustNew(5, 5, limit.WithName("outer"), limit.WithClock(clk))
		inner, err := httplimit.New(l, httplimit.WithLegacyHeaders(true))
		if err != nil {
			t.Fatal(err)
		}
		outer, err := httplimit.New(outerL, httplimit.WithLegacyHeaders(true))
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(outer.Handler(inner.Handler(a141OK)))
		defer srv.Close()
		var last string
		for range 3 {
			c, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.WriteString(c, "GET /x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
			b, err := io.ReadAll(c)
			c.Close()
			if err != nil {
				t.Fatal(err)
			}
			last = regexp.MustCompile(`(?m)^Date: .*\r\n`).ReplaceAllString(string(b), "")
		}
		return last
	}
	want := raw()
	for _, name := range []string{"Ratelimit", "Ratelimit-Policy", "Retry-After", "X-Ratelimit-Remaining"} {
		if n := strings.Count(want, "\r\n"+name+":"); n != 1 {
			t.Errorf("%s in %d lines:\n%s", name, n, want)
		}
	}
	if !strings.HasPrefix(want, "HTTP/1.1 429 ") {
		t.Fatalf("third request not denied:\n%s", want)
	}
	for i := range 20 {
		if got := raw(); got != want {
			t.Fatalf("run %d differs:\n%s\nvs\n%s", i, got, want)
		}
	}
	// And the fields parse as the client's.
	res, err := http.ReadResponse(bufio.NewReader(strings.NewReader(want)), nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	a141CheckFields(t, "wire", res.Header)
	if got := res.Header.Get("RateLimit"); got != `"outer";r=2;t=1, "sec";r=0;t=1` {
		t.Errorf("RateLimit %q", got)
	}
}

// A handler that writes 103 Early Hints after admission: the 103 goes
// out with the fields the middleware set (they are in w.Header() when
// the handler runs), and the final answer carries them once.
func TestAudit141EarlyHints(t *testing.T) {
	a141NoLeak(t)
	clk := sketchtest.NewFakeClock()
	l := limit.MustNew(1, 3, limit.WithName("p"), limit.WithClock(clk))
	h := httplimit.Wrap(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</a.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		_, _ = io.WriteString(w, "ok")
	}), httplimit.WithKey(httplimit.Header("K")))
	for _, s := range a141Servers(t, h) {
		var hints []textproto.MIMEHeader
		trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, hdr textproto.MIMEHeader) error {
			if code == 103 {
				hints = append(hints, hdr)
			}
			return nil
		}}
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "GET", s.srv.URL, nil)
		req.Header.Set("K", s.name)
		res, err := s.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || string(b) != "ok" || len(res.Header.Values("Ratelimit")) != 1 || res.Header.Get("RateLimit") != `"p";r=2;t=1` {
			t.Errorf("%s final: %d %q %q", s.name, res.StatusCode, b, res.Header.Values("Ratelimit"))
		}
		if len(hints) != 1 || hints[0].Get("Link") == "" || hints[0].Get("RateLimit") != `"p";r=2;t=1` || hints[0].Get("RateLimit-Policy") != `"p";q=3;w=3` {
			t.Errorf("%s 103: %v", s.name, hints)
		}
		if d := l.PeekN(clk.Now(), s.name, 1); d.Remaining != 1 {
			t.Errorf("%s: 1xx charged again? peek remaining %d; want 1", s.name, d.Remaining)
		}
	}
}

// A handler that panics after admission, with a value or with
// http.ErrAbortHandler, over HTTP/1.1 and HTTP/2: the tokens are spent
// once (Handler: "not given back when next fails or panics"); the client
// gets an error, not an answer; the server keeps serving.
func TestAudit141PanicOnRealServer(t *testing.T) {
	a141NoLeak(t)
	for _, val := range []any{"boom", http.ErrAbortHandler} {
		clk := sketchtest.NewFakeClock()
		l := limit.MustNew(1, 5, limit.WithName("p"), limit.WithClock(clk))
		var calls atomic.Int64
		h := httplimit.Wrap(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			if r.URL.Path == "/panic" {
				panic(val)
			}
			_, _ = io.WriteString(w, "ok")
		}), httplimit.WithKey(httplimit.Header("K")))
		for _, s := range a141Servers(t, h) {
			// A fresh connection for the panicking request: a reused one
			// is retried by the Transport (below).
			s.client.CloseIdleConnections()
			calls.Store(0)
			req, _ := http.NewRequest("GET", s.srv.URL+"/panic", nil)
			req.Header.Set("K", s.name)
			res, err := s.client.Do(req)
			if err == nil {
				res.Body.Close()
				t.Fatalf("%s %v: answered %d", s.name, val, res.StatusCode)
			}
			if calls.Load() != 1 {
				t.Errorf("%s %v: handler ran %d times", s.name, val, calls.Load())
			}
			if d := l.PeekN(clk.Now(), s.name, 1); d.Remaining != 3 {
				t.Errorf("%s %v: after the panic peek remaining %d; want 3 (one token spent, not refunded, not doubled)", s.name, val, d.Remaining)
			}
			res2, body := a141Get(t, s, "GET", "/", http.Header{"K": {s.name}})
			if res2.StatusCode != 200 || body != "ok" || res2.Header.Get("RateLimit") != `"p";r=3;t=1` {
				t.Errorf("%s %v: next request %d %q %q", s.name, val, res2.StatusCode, body, res2.Header.Get("RateLimit"))
			}
		}
	}
}

// Not this package's doing, but what a deployment sees: a GET whose
// handler panics on a reused HTTP/1.1 keep-alive connection is retried
// by net/http's Transport (a read error on a reused connection, for a
// replayable request), so the client's one request runs the handler,
// and costs its key, twice (HTTP/2: once). The middleware charges each
// run exactly once.
func TestAudit141PanicOnReusedConnRetriedByTransport(t *testing.T) {
	a141NoLeak(t)
	clk := sketchtest.NewFakeClock()
	l := limit.MustNew(1, 5, limit.WithName("p"), limit.WithClock(clk))
	var calls atomic.Int64
	h := httplimit.Wrap(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/panic" {
			calls.Add(1)
			panic(http.ErrAbortHandler)
		}
		_, _ = io.WriteString(w, "ok")
	}), httplimit.WithKey(httplimit.Header("K")))
	for _, s := range a141Servers(t, h) {
		calls.Store(0)
		hdr := http.Header{"K": {s.name}}
		a141Get(t, s, "GET", "/", hdr) // the connection is now idle, reusable
		req, _ := http.NewRequest("GET", s.srv.URL+"/panic", nil)
		req.Header = hdr
		res, err := s.client.Do(req)
		if err == nil {
			res.Body.Close()
			t.Fatalf("%s: answered", s.name)
		}
		d := l.PeekN(clk.Now(), s.name, 1)
		t.Logf("%s: handler ran %d times; remaining %d", s.name, calls.Load(), d.Remaining)
		// Each handler run cost one token, no more, no less.
		if got := int64(5 - 1 - 1 - d.Remaining); got != calls.Load() {
			t.Errorf("%s: charged %d for %d handler runs", s.name, got, calls.Load())
		}
		// HTTP/1.1: retried (2 runs); HTTP/2: the stream is reset with
		// INTERNAL_ERROR, not retried (1 run). Net/http's doing, as of
		// the Go this module builds with.
		if want := map[bool]int64{false: 2, true: 1}[s.h2]; calls.Load() != want {
			t.Logf("%s: %d handler runs, where Go 1.26 gave %d", s.name, calls.Load(), want)
		}
	}
}

// ctxLimiter honours its context: a cancelled one is an error, no
// decision.
type a141CtxLimiter struct{ *limit.Limiter }

func (c a141CtxLimiter) DecideContext(ctx context.Context, key string, n int) (limit.Decision, error) {
	if err := ctx.Err(); err != nil {
		return limit.Decision{}, err
	}
	return c.Limiter.DecideContext(ctx, key, n)
}

// A client that goes away before the decision (its request's context
// cancelled while the key is extracted): package limit's limiters do not
// use ctx (documented), so the request is decided and charged, and the
// write to the gone client fails quietly; a limiter that honours ctx
// errs with no decision, WithLimiterError sees context.Canceled, and
// the error handler gets ErrLimiter. Nothing hangs, nothing leaks.
func TestAudit141ClientGoneBeforeDecision(t *testing.T) {
	a141NoLeak(t)
	for _, honour := range []bool{false, true} {
		clk := sketchtest.NewFakeClock()
		base := limit.MustNew(1, 5, limit.WithName("p"), limit.WithClock(clk))
		var lim httplimit.Limiter = base
		if honour {
			lim = a141CtxLimiter{base}
		}
		gone := make(chan struct{})
		arrived := make(chan struct{}, 1)
		done := make(chan string, 1)
		var limErr, handlerErr error
		key := httplimit.Func(func(r *http.Request) string {
			arrived <- struct{}{}
			<-r.Context().Done() // the client has gone
			close(gone)
			return "k"
		})
		m, err := httplimit.New(lim, httplimit.WithKey(key),
			httplimit.WithLimiterError(func(r *http.Request, key string, err error) { limErr = err }),
			httplimit.WithErrorHandler(func(w http.ResponseWriter, r *http.Request, err error) {
				handlerErr = err
				w.WriteHeader(503)
			}))
		if err != nil {
			t.Fatal(err)
		}
		var ran atomic.Bool
		h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ran.Store(true)
			_, _ = io.WriteString(w, strings.Repeat("x", 1<<20))
		}))
		wrapped := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h.ServeHTTP(w, r)
			if ran.Load() {
				done <- "handler ran"
			} else {
				done <- "answered"
			}
		})
		for _, s := range a141Servers(t, wrapped) {
			limErr, handlerErr = nil, nil
			ran.Store(false)
			gone = make(chan struct{})
			ctx, cancel := context.WithCancel(context.Background())
			req, _ := http.NewRequestWithContext(ctx, "GET", s.srv.URL, nil)
			errc := make(chan error, 1)
			go func() {
				res, err := s.client.Do(req)
				if err == nil {
					res.Body.Close()
				}
				errc <- err
			}()
			// The request must reach the server before the client goes (a
			// fixed 20 ms sleep was too short under qemu beside other
			// jobs: the client went before it sent anything).
			select {
			case <-arrived:
			case <-time.After(30 * time.Second):
				t.Fatalf("%s: the request never reached the server", s.name)
			}
			cancel()
			if err := <-errc; !errors.Is(err, context.Canceled) {
				t.Errorf("%s: client error %v", s.name, err)
			}
			select {
			case <-gone:
			case <-time.After(5 * time.Second):
				t.Fatalf("%s: the server never saw the client go", s.name)
			}
			select {
			case what := <-done:
				if honour && what != "answered" || !honour && what != "handler ran" {
					t.Errorf("%s honour=%v: %s", s.name, honour, what)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("%s: the handler hangs", s.name)
			}
			rem := base.PeekN(clk.Now(), "k", 1).Remaining
			if honour {
				if !errors.Is(limErr, context.Canceled) || !errors.Is(handlerErr, httplimit.ErrLimiter) || !errors.Is(handlerErr, context.Canceled) {
					t.Errorf("%s: limiter error %v, handler error %v", s.name, limErr, handlerErr)
				}
			} else if limErr != nil || handlerErr != nil {
				t.Errorf("%s: errors %v %v", s.name, limErr, handlerErr)
			}
			t.Logf("%s honour=%v: remaining %d", s.name, honour, rem)
		}
		want := 2 // both servers charged one each: 5 - 2, less the peeked request's 1
		if honour {
			want = 4 // nothing charged
		}
		if rem := base.PeekN(clk.Now(), "k", 1).Remaining; rem != want {
			t.Errorf("honour=%v: remaining %d; want %d", honour, rem, want)
		}
	}
}

// A request whose context is already cancelled when it reaches the
// middleware (Allow called directly): package limit's Limiter decides
// and charges it anyway ("ctx is not used").
func TestAudit141CancelledContextStillCharged(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	l := limit.MustNew(1, 2, limit.WithName("p"), limit.WithClock(clk))
	m, err := httplimit.New(l)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i, want := range []int{200, 200, 429} {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/", nil).WithContext(ctx)
		if m.Allow(w, r) {
			w.WriteHeader(200)
		}
		if w.Code != want {
			t.Errorf("%d: %d; want %d", i, w.Code, want)
		}
	}
}

// http.ResponseController through Handler: the writer is the server's
// own, so Flush, SetWriteDeadline, SetReadDeadline and EnableFullDuplex
// work on both protocols, and Hijack on HTTP/1.1 (HTTP/2: not
// supported, as without the middleware).
func TestAudit141ResponseController(t *testing.T) {
	a141NoLeak(t)
	clk := sketchtest.NewFakeClock()
	l := limit.MustNew(1, 100, limit.WithName("p"), limit.WithClock(clk))
	results := make(chan string, 8)
	h := httplimit.Wrap(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		var got []string
		for name, err := range map[string]error{
			"wd": rc.SetWriteDeadline(time.Now().Add(time.Minute)),
			"rd": rc.SetReadDeadline(time.Now().Add(time.Minute)),
			"fd": rc.EnableFullDuplex(),
		} {
			if err != nil && !(name == "fd" && r.ProtoMajor == 2) {
				got = append(got, name+": "+err.Error())
			}
		}
		if r.URL.Path == "/hijack" {
			c, brw, err := rc.Hijack()
			if r.ProtoMajor == 2 {
				if !errors.Is(err, http.ErrNotSupported) {
					got = append(got, "h2 hijack: "+errString(err))
				}
				results <- strings.Join(got, "; ")
				w.WriteHeader(204)
				return
			}
			if err != nil {
				got = append(got, "hijack: "+err.Error())
				results <- strings.Join(got, "; ")
				return
			}
			_, _ = brw.WriteString("HTTP/1.1 200 OK\r\nX-Own: 1\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi")
			_ = brw.Flush()
			c.Close()
			results <- strings.Join(got, "; ")
			return
		}
		_, _ = io.WriteString(w, "a")
		if err := rc.Flush(); err != nil {
			got = append(got, "flush: "+err.Error())
		}
		_, _ = io.WriteString(w, "b")
		results <- strings.Join(got, "; ")
	}))
	for _, s := range a141Servers(t, h) {
		res, body := a141Get(t, s, "GET", "/", nil)
		if r := <-results; r != "" || body != "ab" || res.Header.Get("RateLimit") == "" {
			t.Errorf("%s: %q body %q", s.name, r, body)
		}
		res, body = a141Get(t, s, "GET", "/hijack", nil)
		if r := <-results; r != "" {
			t.Errorf("%s hijack: %s", s.name, r)
		}
		if !s.h2 {
			// The hijacked answer is the handler's alone: the fields the
			// middleware set are not written.
			if res.StatusCode != 200 || body != "hi" || res.Header.Get("X-Own") != "1" || res.Header.Get("RateLimit") != "" {
				t.Errorf("hijacked: %d %q %v", res.StatusCode, body, res.Header)
			}
		} else if res.StatusCode != 204 || res.Header.Get("RateLimit") == "" {
			t.Errorf("h2: %d %v", res.StatusCode, res.Header)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// A handler's own rate-limit fields, set after admission, replace the
// middleware's (Set) or add a line (Add): the middleware does not touch
// an admitted answer after next runs. A trailer the handler declares
// arrives as a trailer, the fields as header fields.
func TestAudit141HandlerOwnFieldsAndTrailers(t *testing.T) {
	a141NoLeak(t)
	clk := sketchtest.NewFakeClock()
	l := limit.MustNew(1, 100, limit.WithName("p"), limit.WithClock(clk))
	h := httplimit.Wrap(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/set":
			w.Header().Set("RateLimit", `"own";r=7`)
			w.Header().Set("Retry-After", "9")
		case "/trailer":
			w.Header().Set("Trailer", "X-Sum")
			_, _ = io.WriteString(w, "body")
			w.Header().Set("X-Sum", "42")
			return
		}
		_, _ = io.WriteString(w, "ok")
	}), httplimit.WithLegacyHeaders(true))
	for _, s := range a141Servers(t, h) {
		res, _ := a141Get(t, s, "GET", "/set", nil)
		if got := res.Header.Values("RateLimit"); len(got) != 1 || got[0] != `"own";r=7` || res.Header.Get("Retry-After") != "9" || res.Header.Get("RateLimit-Policy") != `"p";q=100;w=100` {
			t.Errorf("%s: %q %q", s.name, got, res.Header.Get("Retry-After"))
		}
		res, body := a141Get(t, s, "GET", "/trailer", nil)
		if body != "body" || res.Trailer.Get("X-Sum") != "42" || res.Header.Get("RateLimit") == "" || res.Header.Get("X-RateLimit-Remaining") == "" {
			t.Errorf("%s trailer: %q %v %v", s.name, body, res.Trailer, res.Header)
		}
		a141CheckFields(t, s.name, res.Header)
	}
}

// Long keys through a real server: a 200 KB path keyed by Func and a
// 200 KB header keyed by Header; keys differing only in their last byte
// are distinct (the limiter sees the whole key), and no key text reaches
// the answer.
func TestAudit141LongKeys(t *testing.T) {
	a141NoLeak(t)
	clk := sketchtest.NewFakeClock()
	l := limit.MustNew(1, 1, limit.WithName("p"), limit.WithClock(clk))
	mByPath, err := httplimit.New(l, httplimit.WithKey(httplimit.Func(func(r *http.Request) string { return r.URL.Path })))
	if err != nil {
		t.Fatal(err)
	}
	mByHdr, err := mByPath.With(l, httplimit.WithKey(httplimit.Header("X-Key")))
	if err != nil {
		t.Fatal(err)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Key") != "" {
			mByHdr.Handler(a141OK).ServeHTTP(w, r)
			return
		}
		mByPath.Handler(a141OK).ServeHTTP(w, r)
	})
	long := strings.Repeat("k", 200_000)
	for _, s := range a141Servers(t, h) {
		for _, last := range []string{"a", "b"} {
			for i, want := range []int{200, 429} {
				res, body := a141Get(t, s, "GET", "/"+s.name[5:]+long+last, nil)
				if res.StatusCode != want || strings.Contains(body, "kkkk") {
					t.Errorf("%s path %s %d: %d", s.name, last, i, res.StatusCode)
				}
				res, body = a141Get(t, s, "GET", "/", http.Header{"X-Key": {s.name + long + last}})
				if res.StatusCode != want || strings.Contains(body, "kkkk") {
					t.Errorf("%s header %s %d: %d", s.name, last, i, res.StatusCode)
				}
				a141CheckFields(t, s.name, res.Header)
			}
		}
	}
}

// An outer layer that set the fields as several lines and under a
// lowercase name directly in the map: the client receives each field as
// one line holding every member, and the Retry-After is one line.
func TestAudit141OuterLinesOnTheWire(t *testing.T) {
	a141NoLeak(t)
	clk := sketchtest.NewFakeClock()
	l := limit.MustNew(1, 1, limit.WithName("in"), limit.WithClock(clk))
	inner := httplimit.Wrap(l, a141OK)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("RateLimit", `"a";r=0;t=4`)
		w.Header().Add("RateLimit", `"b";r=3`)
		w.Header()["ratelimit-policy"] = []string{`"a";q=1;w=4`, `"b";q=9;w=9`}
		w.Header()["retry-after"] = []string{"2"}
		inner.ServeHTTP(w, r)
	})
	for _, s := range a141Servers(t, h) {
		clk.Advance(time.Hour)
		res, _ := a141Get(t, s, "GET", "/", nil)
		if res.StatusCode != 200 {
			t.Fatalf("%s: %d", s.name, res.StatusCode)
		}
		res, _ = a141Get(t, s, "GET", "/", nil)
		a141CheckFields(t, s.name, res.Header)
		if res.StatusCode != 429 || res.Header.Get("RateLimit") != `"a";r=0;t=4, "b";r=3, "in";r=0;t=1` ||
			res.Header.Get("RateLimit-Policy") != `"a";q=1;w=4, "b";q=9;w=9, "in";q=1;w=1` || res.Header.Get("Retry-After") != "4" {
			t.Errorf("%s: %d %q %q %q", s.name, res.StatusCode, res.Header.Values("RateLimit"), res.Header.Values("RateLimit-Policy"), res.Header.Values("Retry-After"))
		}
	}
}

// Over many requests of random cost at random clock steps, on a Multi
// with legacy fields, over both protocols: every field every answer
// carries is well formed (one line, no sign, at most 15 digits), and a
// denial's Retry-After is at least its RateLimit t.
func TestAudit141FieldsWellFormedOverTheWire(t *testing.T) {
	a141NoLeak(t)
	clk := sketchtest.NewFakeClock()
	l := a141Multi(t,
		limit.MustNew(3, 4, limit.WithName("sec"), limit.WithClock(clk)),
		limit.MustNew(0.7, 9, limit.WithName("slow"), limit.WithClock(clk)))
	var step uint64 = 1
	h := httplimit.Wrap(l, a141OK, httplimit.WithLegacyHeaders(true),
		httplimit.WithCost(func(r *http.Request) int { return len(r.URL.Path) }))
	tRe := regexp.MustCompile(`;t=([0-9]+)`)
	n := 60
	if testing.Short() {
		n = 30
	}
	for _, s := range a141Servers(t, h) {
		for range n {
			step = step*6364136223846793005 + 1442695040888963407
			clk.Advance(time.Duration(step>>40%1500) * time.Millisecond)
			cost := 1 + int(step>>20%5) // 5 > burst 4: Never sometimes
			res, _ := a141Get(t, s, "GET", strings.Repeat("/", cost), nil)
			a141CheckFields(t, s.name, res.Header)
			if res.StatusCode == 429 && res.Header.Get("Retry-After") != "" {
				ra := res.Header.Get("Retry-After")
				if m := tRe.FindStringSubmatch(res.Header.Get("RateLimit")); m != nil && len(m[1]) > len(ra) || m != nil && len(m[1]) == len(ra) && m[1] > ra {
					t.Errorf("%s: Retry-After %s earlier than t in %q", s.name, ra, res.Header.Get("RateLimit"))
				}
			}
		}
	}
}

func a141Multi(t *testing.T, ls ...*limit.Limiter) *limit.Multi {
	t.Helper()
	m, err := limit.NewMulti(ls...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
