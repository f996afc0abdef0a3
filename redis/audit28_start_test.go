package redis

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// TestAudit28UnreachableFromStart: a go-redis client (lazy: it dials on
// use) whose server is not running when the limiter is made, then
// starts. LimiterConfig.ServerCheck: CheckRefuse "returns ... the
// network error of an unreachable server" (not a config or Redis
// sentinel); CheckWarn "logs it ... and returns the limiter". While the
// server is down every call is the policy's (ErrDegraded wrapping a
// network error; FailClosed: denied, RetryAfter -1, Remaining 0;
// FailOpen: admitted, Remaining Burst, RetryAfter -1; LocalFallback:
// Burst/N then denials with a wait), Degraded() is true. Once the
// server is up the limiter recovers with nothing from the caller
// (docs/distributed.md: "Recovery needs nothing from the caller"), the
// library is loaded on first use, and the first server decision for a
// fresh key is exact (Remaining Burst-1).
func TestAudit28UnreachableFromStart(t *testing.T) {
	for _, pol := range []Policy{FailClosed, FailOpen, LocalFallback} {
		t.Run(pol.String(), func(t *testing.T) {
			lookTool(t, "redis-server")
			srv := &testServer{t: t, port: freePort(t), dir: t.TempDir()}
			t.Cleanup(srv.stop)
			gc := goredis.NewClient(&goredis.Options{Addr: srv.addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
			t.Cleanup(func() { gc.Close() })
			cfg := LimiterConfig{Name: "a28u", Limit: PerSecond(1e-3, 8), Policy: pol, Instances: 2,
				Timeout: 300 * time.Millisecond, CheckTimeout: 500 * time.Millisecond}
			l, err := NewLimiterGoRedis(gc, cfg)
			var ne net.Error
			if err == nil || l != nil || errors.Is(err, ErrInvalidConfig) || errors.Is(err, ErrNoFunctions) ||
				errors.Is(err, ErrPermission) || errors.Is(err, ErrEvictionPolicy) || !errors.As(err, &ne) {
				t.Fatalf("CheckRefuse, server unreachable: %v, %v; want the network error", l, err)
			}
			cfg.ServerCheck, cfg.Logger = CheckWarn, slog.New(slog.NewTextHandler(io.Discard, nil))
			if l, err = NewLimiterGoRedis(gc, cfg); err != nil {
				t.Fatalf("CheckWarn: %v", err)
			}
			ctx := context.Background()
			var admits int
			for i := range 6 {
				d, err := l.Allow(ctx, "k")
				if !errors.Is(err, ErrDegraded) || !errors.As(err, &ne) || !l.Degraded() {
					t.Fatalf("call %d: %+v, %v (Degraded %v); want ErrDegraded wrapping the network error", i, d, err, l.Degraded())
				}
				if d.Allowed {
					admits++
				}
				switch {
				case pol == FailClosed && (d.Allowed || d.RetryAfter != -1 || d.Remaining != 0):
					t.Fatalf("FailClosed %+v", d)
				case pol == FailOpen && (!d.Allowed || d.RetryAfter != -1 || d.Remaining != 8):
					t.Fatalf("FailOpen %+v", d)
				case pol == LocalFallback && !d.Allowed && (d.RetryAfter <= 0 || d.Limit != (Limit{Rate: 5e-4, Burst: 4})):
					t.Fatalf("LocalFallback denial %+v", d)
				}
			}
			if want := map[Policy]int{FailClosed: 0, FailOpen: 6, LocalFallback: 4}[pol]; admits != want {
				t.Fatalf("%v admitted %d of 6 with the server unreachable; want %d", pol, admits, want)
			}
			srv.start()
			var d Decision
			waitFor(t, 15*time.Second, "recovery", func() bool {
				d, err = l.Allow(ctx, "fresh")
				return err == nil
			})
			if !d.Allowed || d.Remaining != 7 || d.RetryAfter != -1 || l.Degraded() {
				t.Fatalf("first server decision %+v (Degraded %v); want admitted, Remaining 7", d, l.Degraded())
			}
			st := l.Stats()
			if st.PolicyAdmits+st.PolicyDenials != st.ServerErrors || st.DegradedPeriod != 1 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

// a28CmdCalls returns INFO commandstats' calls= for each command name.
func a28CmdCalls(t *testing.T, addr string) map[string]int {
	t.Helper()
	r, err := rawDo(addr, "INFO", "commandstats")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, line := range strings.Split(fmt.Sprint(r), "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		var calls int
		fmt.Sscanf(rest, "calls=%d", &calls)
		out[strings.TrimPrefix(name, "cmdstat_")] = calls
	}
	return out
}

// TestAudit28StatsCountDecisionsAcrossReload: audit 28 found that one
// Allow after FUNCTION FLUSH makes three round trips (FCALL, FUNCTION
// LOAD, FCALL) while Stats counted one call and no error, against
// policy.go's "round trips made" and "round trips that failed". The
// fields count decisions (the doc now says so: a reload or a retry inside
// one decision is not counted again, and an error is a decision the
// server did not answer); this pins that.
func TestAudit28StatsCountDecisionsAcrossReload(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	l := e.limiter(t, LimiterConfig{Name: "a28st", Limit: PerSecond(10, 10)})
	ctx := context.Background()
	if _, err := l.Allow(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if _, err := rawDo(e.srv.addr(), "FUNCTION", "FLUSH"); err != nil {
		t.Fatal(err)
	}
	before, st0 := a28CmdCalls(t, e.srv.addr()), l.Stats()
	if _, err := l.Allow(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	after, st1 := a28CmdCalls(t, e.srv.addr()), l.Stats()
	trips := (after["fcall"] - before["fcall"]) + (after["function|load"] - before["function|load"])
	failed := after["fcall"] - before["fcall"] - 1
	if trips != 3 || failed != 1 {
		t.Fatalf("setup: the server saw %d round trips (%d fcall), want 3: %v -> %v", trips, after["fcall"]-before["fcall"], before, after)
	}
	calls, errs := st1.ServerCalls-st0.ServerCalls, st1.ServerErrors-st0.ServerErrors
	if calls != 1 || errs != 0 {
		t.Errorf("one Allow after FUNCTION FLUSH (the server saw FCALL, FUNCTION LOAD, FCALL): Stats counted ServerCalls +%d, ServerErrors +%d; want +1 and +0 (policy.go: one per decision sent, errors the decisions the server did not answer)", calls, errs)
	}
}
