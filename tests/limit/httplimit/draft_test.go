package httplimit_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
	"pgregory.net/rapid"
)

var rateLimitRE = regexp.MustCompile(`^"[^"]*";r=(\d+)(?:;t=(\d+))?$`)

// TestDraft10Fields: over random policies and traffic, every answer's
// RateLimit field is draft -10's: r the remaining quota, t the seconds
// until more quota is available (present unless the bucket is full), so
// that t seconds later r has grown; on a 429, Retry-After is never
// earlier than t and a retry after Retry-After seconds is admitted.
// Before, t was the time to a full bucket: Retry-After 4 with t=12
// (rate 1/4 s, burst 3).
func TestDraft10Fields(t *testing.T) {
	if httplimit.Draft != "draft-ietf-httpapi-ratelimit-headers-10" {
		t.Fatalf("Draft %q", httplimit.Draft)
	}
	rapid.Check(t, func(rt *rapid.T) {
		clk := sketchtest.NewFakeClock()
		every := time.Duration(rapid.IntRange(1, 10_000).Draw(rt, "everyMs")) * time.Millisecond
		burst := rapid.IntRange(1, 10).Draw(rt, "burst")
		l := limit.MustNew(limit.Every(every), burst, limit.WithClock(clk))
		cost := 1
		h := httplimit.Wrap(l, ok, httplimit.WithCost(func(*http.Request) int { return cost }))
		for range rapid.IntRange(1, 60).Draw(rt, "ops") {
			clk.Advance(time.Duration(rapid.IntRange(0, int(2*every/time.Millisecond)).Draw(rt, "gapMs")) * time.Millisecond)
			cost = rapid.IntRange(1, burst).Draw(rt, "cost")
			w := get(h, "192.0.2.1:1")
			m := rateLimitRE.FindStringSubmatch(w.Header().Get("RateLimit"))
			if m == nil {
				rt.Fatalf("RateLimit %q", w.Header().Get("RateLimit"))
			}
			r, _ := strconv.Atoi(m[1])
			if (m[2] == "") != (r == burst) {
				rt.Fatalf("RateLimit %q with burst %d: t must be absent exactly when the bucket is full", m[0], burst)
			}
			if m[2] != "" {
				ts, _ := strconv.Atoi(m[2])
				if ts < 1 {
					rt.Fatalf("t=%d with r=%d < burst", ts, r)
				}
				if w.Code == http.StatusTooManyRequests {
					ra, err := strconv.Atoi(w.Header().Get("Retry-After"))
					if err != nil || ra < ts {
						rt.Fatalf("Retry-After %q earlier than t=%d", w.Header().Get("Retry-After"), ts)
					}
				}
				if w.Code != http.StatusTooManyRequests || rapid.Bool().Draw(rt, "waitT") {
					// The schedule moves on by t: more quota is there.
					clk.Advance(time.Duration(ts) * time.Second)
					if got := state(l, clk); got <= r {
						rt.Fatalf("t=%d s later Remaining is %d, not above r=%d", ts, got, r)
					}
					continue
				}
			}
			if w.Code == http.StatusTooManyRequests {
				ra, _ := strconv.Atoi(w.Header().Get("Retry-After"))
				clk.Advance(time.Duration(ra) * time.Second)
				if w2 := get(h, "192.0.2.1:1"); w2.Code != 200 {
					rt.Fatalf("retry after Retry-After %ds: %d", ra, w2.Code)
				}
			}
		}
	})
}

// state is the key's Remaining now, without a write.
func state(l *limit.Limiter, clk *sketchtest.FakeClock) int {
	d := l.PeekN(clk.Now(), "192.0.2.1/32", 1)
	if d.Allowed {
		return d.Remaining + 1 // Peek answers after the peeked token
	}
	return d.Remaining
}

// The case: rate 1/4 s, burst 3, drained: t=4 (the next token),
// Retry-After 4, X-RateLimit-Reset 12 (a full bucket).
func TestDraft10Denial(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	l := limit.MustNew(limit.Every(4*time.Second), 3, limit.WithClock(clk))
	h := httplimit.Wrap(l, ok, httplimit.WithLegacyHeaders(true))
	for range 3 {
		get(h, "192.0.2.1:1")
	}
	w := get(h, "192.0.2.1:1")
	if w.Code != 429 || w.Header().Get("RateLimit") != `"default";r=0;t=4` || w.Header().Get("Retry-After") != "4" ||
		w.Header().Get("X-RateLimit-Reset") != "12" {
		t.Fatalf("%d %v", w.Code, w.Header())
	}
}

// TestUnixSocket: a server on a Unix socket (RemoteAddr "@" or "") has no
// client IP: RemoteIP's error matches ErrNoClientIP and the default
// answer is 500 with the status text only (before: 400 with the internal
// error text). Behind a proxy, WithTrustedProxies(1) keys by its
// X-Forwarded-For.
func TestUnixSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Skipf("no Unix sockets here: %v", err)
	}
	l := limit.MustNew(1, 1)
	var remotes []string
	var keyErr error
	mux := http.NewServeMux()
	record := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			remotes = append(remotes, r.RemoteAddr)
			h.ServeHTTP(w, r)
		})
	}
	mux.Handle("/plain", record(httplimit.Wrap(l, ok, httplimit.WithErrorHandler(func(w http.ResponseWriter, r *http.Request, err error) {
		keyErr = err
		http.Error(w, http.StatusText(500), 500)
	}))))
	mux.Handle("/default", record(httplimit.Wrap(l, ok)))
	mux.Handle("/proxied", httplimit.Wrap(l, ok, httplimit.WithKey(httplimit.RemoteIP(httplimit.WithTrustedProxies(1)))))
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	defer srv.Close()
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	do := func(path string, hdr ...string) (int, string) {
		req, _ := http.NewRequest("GET", "http://unix"+path, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := do("/plain"); code != 500 || !errors.Is(keyErr, httplimit.ErrNoClientIP) {
		t.Fatalf("plain: %d, error %v", code, keyErr)
	}
	if code, body := do("/default"); code != 500 || body != "Internal Server Error\n" {
		t.Fatalf("default: %d %q", code, body)
	}
	for _, r := range remotes {
		if r != "" && r != "@" {
			t.Fatalf("RemoteAddr %q on a Unix socket", r)
		}
	}
	if code, _ := do("/proxied", "X-Forwarded-For", "198.51.100.4"); code != 200 {
		t.Fatalf("proxied: %d", code)
	}
	if code, _ := do("/proxied", "X-Forwarded-For", "198.51.100.4"); code != 429 {
		t.Fatalf("proxied, again: %d", code)
	}
}

// TestNewErrors: New's errors are *sketch.ConfigError (a nil Option and a
// nil or zero limiter included: before, a nil dereference), and the zero
// Middleware panics clearly.
func TestNewErrors(t *testing.T) {
	l := limit.MustNew(1, 1)
	for name, f := range map[string]func() error{
		"nil limiter":  func() error { _, err := httplimit.New(nil); return err },
		"zero limiter": func() error { _, err := httplimit.New(&limit.Limiter{}); return err },
		"nil option":   func() error { _, err := httplimit.New(l, nil); return err },
		"nil option 2": func() error { _, err := httplimit.New(l, httplimit.WithLegacyHeaders(true), nil); return err },
		"nil key":      func() error { _, err := httplimit.New(l, httplimit.WithKey(nil)); return err },
		"bad name": func() error {
			_, err := httplimit.New(limit.MustNew(1, 1, limit.WithName("a\nb")))
			return err
		},
	} {
		err := f()
		var ce *sketch.ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, sketch.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "httplimit: ") {
			t.Errorf("%s: %v", name, err)
		}
	}
	defer func() {
		if s, _ := recover().(string); s != "httplimit: zero Middleware; use New" {
			t.Errorf("zero Middleware: panic %q", s)
		}
	}()
	var m httplimit.Middleware
	m.Handler(ok)
}
