package redis

import (
	"context"
	"errors"
	"os"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"go.uber.org/goleak"
)

// a69CheckCall checks one AllowN call's effect on Stats and Degraded
// against policy.go's definitions of each counter: every call is one
// Decision; it is either a cache denial (a local denial, no error, no round
// trip) or one ServerCall; a call that returns an error (ErrDegraded) is
// one ServerError and exactly one PolicyAdmit (Allowed) or PolicyDenial;
// Timeouts counts exactly the errors by deadline; DegradedPeriod counts
// healthy-to-degraded transitions; Degraded() is true after a failed
// round trip and false after a successful one.
func a69CheckCall(t *testing.T, l *Limiter, pol Policy, label string, d Decision, err error, before, after Stats, wasDeg bool) {
	t.Helper()
	delta := Stats{
		Decisions: after.Decisions - before.Decisions, ServerCalls: after.ServerCalls - before.ServerCalls,
		ServerErrors: after.ServerErrors - before.ServerErrors, Timeouts: after.Timeouts - before.Timeouts,
		CacheDenials: after.CacheDenials - before.CacheDenials, PolicyAdmits: after.PolicyAdmits - before.PolicyAdmits,
		PolicyDenials: after.PolicyDenials - before.PolicyDenials, DegradedPeriod: after.DegradedPeriod - before.DegradedPeriod,
	}
	fail := func(why string) {
		t.Errorf("%s: %s: decision %+v err %v; Stats delta %+v (Degraded before %v, after %v)", label, why, d, err, delta, wasDeg, l.Degraded())
	}
	if delta.Decisions != 1 {
		fail("Decisions did not grow by 1")
	}
	if delta.ServerCalls+delta.CacheDenials != 1 {
		fail("not exactly one of ServerCalls, CacheDenials")
	}
	if delta.CacheDenials == 1 && (err != nil || d.Allowed || l.Degraded() != wasDeg) {
		fail("a cache denial with an error, an admission, or a change of Degraded")
	}
	if err != nil {
		if !errors.Is(err, ErrDegraded) {
			fail("error not ErrDegraded")
		}
		if delta.ServerCalls != 1 || delta.ServerErrors != 1 || !l.Degraded() {
			fail("a failed call not counted as one server error, or not Degraded")
		}
		if d.Allowed && (delta.PolicyAdmits != 1 || delta.PolicyDenials != 0) || !d.Allowed && (delta.PolicyDenials != 1 || delta.PolicyAdmits != 0) {
			fail("policy counters do not match the policy's decision")
		}
		if pol == FailOpen && !d.Allowed || pol == FailClosed && d.Allowed {
			fail("decision is not the policy's")
		}
		timeout := errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded)
		if (delta.Timeouts == 1) != timeout {
			fail("Timeouts does not count exactly the errors by deadline")
		}
		if (delta.DegradedPeriod == 1) != !wasDeg {
			fail("DegradedPeriod does not count exactly the healthy-to-degraded transition")
		}
	} else {
		if delta.ServerErrors != 0 || delta.Timeouts != 0 || delta.PolicyAdmits != 0 || delta.PolicyDenials != 0 || delta.DegradedPeriod != 0 {
			fail("a call answered without error moved a fault counter")
		}
		if delta.ServerCalls == 1 && l.Degraded() {
			fail("Degraded() still true after a successful round trip")
		}
	}
}

// TestAudit69StatsPerCall: under each policy, with the deny cache and
// PreCheck, on both clients, one caller at a time through a server that
// is up, then SIGKILLed, then restarted on the same port: every call's
// effect on Stats and Degraded() is what policy.go's field comments and
// docs/distributed.md ("Failure policies") say (a69CheckCall), and the
// limiter leaves no goroutine behind once its client is closed.
func TestAudit69StatsPerCall(t *testing.T) {
	srv := startServer(t)
	for _, lib := range []string{"rueidis", "go-redis"} {
		for _, pol := range []Policy{FailClosed, FailOpen, LocalFallback} {
			t.Run(lib+"/"+pol.String(), func(t *testing.T) {
				if srv.cmd == nil {
					srv.start()
				}
				opts := []goleak.Option{goleak.IgnoreCurrent(), goleak.IgnoreAnyFunction("github.com/lfgrudge/grudge/redis.(*testServer).tryStart.func1")}
				cfg := LimiterConfig{Name: "a69st:" + lib + ":" + pol.String(), Limit: PerSecond(1, 5), Policy: pol,
					Instances: 2, DenyCacheCells: 256, PreCheck: true, Timeout: 300 * time.Millisecond, CellsPerLevel: 1024}
				var l *Limiter
				var closeClient func()
				var err error
				if lib == "rueidis" {
					rc, cerr := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.addr()}, DisableCache: true})
					if cerr != nil {
						t.Fatal(cerr)
					}
					closeClient = rc.Close
					l, err = NewLimiter(rc, cfg)
				} else {
					gc := goredis.NewClient(&goredis.Options{Addr: srv.addr(), ContextTimeoutEnabled: true, MaxRetries: -1,
						DialerRetries: 1, DialerRetryTimeout: time.Microsecond})
					closeClient = func() { gc.Close() }
					l, err = NewLimiterGoRedis(gc, cfg)
				}
				if err != nil {
					closeClient()
					t.Fatal(err)
				}
				ctx := context.Background()
				calls := 0
				one := func(phase string, key string, n float64) (Decision, error) {
					before, wasDeg := l.Stats(), l.Degraded()
					d, err := l.AllowN(ctx, key, n)
					calls++
					a69CheckCall(t, l, pol, phase+" "+key+" n="+strconv.FormatFloat(n, 'g', -1, 64), d, err, before, l.Stats(), wasDeg)
					return d, err
				}
				for i := range 30 {
					if _, err := one("up", "k"+strconv.Itoa(i%3), float64(i%3)); err != nil {
						t.Fatalf("server up: %v", err)
					}
				}
				srv.kill()
				downErrs := 0
				for i := range 20 {
					if _, err := one("down", "k"+strconv.Itoa(i%4), float64(1+i%2)); err != nil {
						downErrs++
					}
				}
				if downErrs == 0 {
					t.Errorf("server down: no call failed; stats %+v", l.Stats())
				}
				srv.start()
				deadline := time.Now().Add(8 * time.Second)
				for {
					d, err := one("restart", "probe", 1)
					if err == nil && d.Allowed {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("no successful round trip 8 s after the restart: %v, stats %+v", err, l.Stats())
					}
					time.Sleep(20 * time.Millisecond)
				}
				for i := range 10 {
					if _, err := one("back", "k"+strconv.Itoa(i%3), 1); err != nil {
						t.Fatalf("server back: %v", err)
					}
				}
				if s := l.Stats(); s.Decisions != int64(calls) || s.DegradedPeriod < 1 {
					t.Errorf("final stats %+v after %d calls; want Decisions %d, at least one degraded period", s, calls, calls)
				}
				closeClient()
				goleak.VerifyNone(t, opts...)
			})
		}
	}
}
