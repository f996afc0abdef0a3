package redis

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"go.uber.org/goleak"
)

// a69Calls are the Sketch's public calls that reach the server.
func a69Calls(s *Sketch) map[string]func(context.Context) error {
	return map[string]func(context.Context) error{
		"Update":         func(ctx context.Context) error { return s.Update(ctx, "k", 1) },
		"UpdateAndQuery": func(ctx context.Context) error { _, err := s.UpdateAndQuery(ctx, "k", 1); return err },
		"Query":          func(ctx context.Context) error { _, err := s.Query(ctx, "k"); return err },
		"TryUpdate":      func(ctx context.Context) error { _, err := s.TryUpdate(ctx, "k", 1, 10); return err },
		"Check":          s.Check,
	}
}

// a69PausedSketches starts a server, makes a Sketch on each client (Timeout
// 200 ms, warmed: library loaded, connections open) and pauses every
// client of the server for pause (CLIENT PAUSE ALL).
func a69PausedSketches(t *testing.T, pause time.Duration) (sks map[string]*Sketch, done func(), paused func(*testing.T)) {
	srv := startServer(t)
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	gc := goredis.NewClient(&goredis.Options{Addr: srv.addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	cfg := Config{Name: "a69ctx", Hi: 1e9, CellsPerLevel: 1024, Timeout: 200 * time.Millisecond}
	s1, err := New(rc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := NewGoRedis(gc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	sks = map[string]*Sketch{"rueidis": s1, "go-redis": s2}
	for _, s := range sks {
		for name, f := range a69Calls(s) {
			if err := f(context.Background()); err != nil {
				t.Fatalf("warm %s: %v", name, err)
			}
		}
	}
	if _, err := rawDo(srv.addr(), "CLIENT", "PAUSE", strconv.FormatInt(pause.Milliseconds(), 10), "ALL"); err != nil {
		t.Fatal(err)
	}
	paused = func(t *testing.T) {
		for lib, c := range map[string]any{"rueidis": rc, "go-redis": gc} {
			for _, mode := range []ServerCheck{CheckRefuse, CheckWarn} {
				cfg := LimiterConfig{Name: "a69ctxl", Limit: PerSecond(1, 1), ServerCheck: mode, CheckTimeout: 300 * time.Millisecond,
					Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
				st := time.Now()
				var l *Limiter
				var err error
				if lib == "rueidis" {
					l, err = NewLimiter(c.(rueidis.Client), cfg)
				} else {
					l, err = NewLimiterGoRedis(c.(*goredis.Client), cfg)
				}
				el := time.Since(st)
				if el > 2500*time.Millisecond || (mode == CheckRefuse) != (err != nil) || (mode == CheckWarn) != (l != nil) {
					t.Errorf("%s NewLimiter(%v, CheckTimeout 300ms), server paused: limiter %v, err %v after %v; want refused (CheckRefuse) or a limiter (CheckWarn) by the CheckTimeout",
						lib, mode, l != nil, err, el)
				}
			}
		}
	}
	return sks, func() {
		rawDo(srv.addr(), "CLIENT", "UNPAUSE")
		rc.Close()
		gc.Close()
	}, paused
}

// TestAudit69SketchCallsBoundedAndCanceled: with the server paused for 5
// s, every public Sketch call but Check (Update, UpdateAndQuery, Query,
// TryUpdate) on both clients, with a context that has no deadline, ends
// by Config.Timeout (200 ms: an error matching a deadline, well before the
// pause ends), and with a context canceled 100 ms in ends with an error
// long before the pause ends (context.Canceled, or by the Timeout: go-redis
// does not watch a context's cancellation mid-read, and rueidis now and
// then answers the Timeout's deadline first; the docs promise deadlines
// only). NewLimiter's start-up check, the server paused, ends by its
// CheckTimeout (300 ms): an error under CheckRefuse, a limiter under
// CheckWarn. No goroutine
// remains once the clients are closed (goleak).
func TestAudit69SketchCallsBoundedAndCanceled(t *testing.T) {
	opts := []goleak.Option{goleak.IgnoreCurrent(), goleak.IgnoreAnyFunction("github.com/lfgrudge/grudge/redis.(*testServer).tryStart.func1")}
	sks, done, paused := a69PausedSketches(t, 5*time.Second)
	paused(t)
	for lib, s := range sks {
		for name, f := range a69Calls(s) {
			if name == "Check" {
				continue
			}
			st := time.Now()
			err := f(context.Background())
			if el := time.Since(st); !(errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded)) || el > 2500*time.Millisecond {
				t.Errorf("%s %s, server paused 5 s, Config.Timeout 200ms, no deadline in ctx: %v after %v; want a deadline error by the Timeout", lib, name, err, el)
			}
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(100*time.Millisecond, cancel)
			st = time.Now()
			err = f(ctx)
			if el := time.Since(st); err == nil || el > 2500*time.Millisecond {
				t.Errorf("%s %s, server paused 5 s, ctx canceled at 100 ms: %v after %v; want an error by the cancel or the Timeout", lib, name, err, el)
			}
			cancel()
		}
	}
	done()
	goleak.VerifyNone(t, opts...)
}

// TestAudit69FixedCheckIgnoresTimeout (fixed in stop 47): doc.go: "Context deadlines bound
// every call; Config.Timeout supplies one when the context has none."
// Sketch.Check (a call: it sends the function's check operation, then
// CONFIG GET to every node) uses the context as given: with the server
// paused for 5 s and Config.Timeout 200 ms, Check(context.Background())
// waits for the pause to end instead of failing by the Timeout (check.go,
// Check: no Timeout applied, unlike Sketch.call).
func TestAudit69FixedCheckIgnoresTimeout(t *testing.T) {
	sks, done, _ := a69PausedSketches(t, 5*time.Second)
	defer done()
	for _, lib := range []string{"rueidis"} { // the first client shows it; the pause is spent after one
		st := time.Now()
		err := sks[lib].Check(context.Background())
		el := time.Since(st)
		if el > 2500*time.Millisecond {
			t.Errorf("%s: Check(context.Background()) with Config.Timeout 200ms, server paused 5 s: returned %v after %v; "+
				"want a deadline error after about 200 ms (doc.go: \"Config.Timeout supplies one when the context has none\")", lib, err, el.Round(time.Millisecond))
		}
	}
}
