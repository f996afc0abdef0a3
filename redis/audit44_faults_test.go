package redis

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit44FallbackExactWhileDown: policy.go: LocalFallback "decides
// with a local lock-free limiter at Rate/N and Burst/N ... N instances
// that all fall back admit at most the global rate between them", and
// Stats' fields ("ServerErrors ... the ones the server did not answer:
// the fault policy decided", PolicyAdmits, PolicyDenials,
// DegradedPeriod "transitions from healthy to degraded"). 4 instances
// (both clients, two with the deny cache) with Burst 16, Rate 4/s, on
// one fake clock; the server is killed (a closed port) or SIGSTOPped:
// each instance admits exactly 4 (Burst/N) of 8 calls on "hot", then
// exactly 1 of 3 more (Rate/N x 1 s) after the clock moves 1 s; every
// error matches ErrDegraded, every denial has a RetryAfter > 0, each call
// returns within 1.5 s (Timeout 100 ms); the counters are exact
// (Timeouts = ServerErrors = 11 under SIGSTOP, 0 for rueidis on a closed
// port); after a restart (SIGCONT) the first call of rueidis (and of
// go-redis after SIGSTOP) is decided by the server with no error and
// Degraded false; go-redis after refused dials recovers within 4 s (its
// pool's dial circuit breaker, logged); a fresh key then admits exactly
// Burst across the instances, and DegradedPeriod stays 1.
func TestAudit44FallbackExactWhileDown(t *testing.T) {
	for _, sig := range []string{"kill", "stop"} {
		t.Run(sig, func(t *testing.T) {
			e := newEnv(t, "rueidis", "standalone")
			clk := sketchtest.NewFakeClock()
			clk.Set(1_700_000_000_000)
			const burst, n = 16, 4
			var ls []*Limiter
			for i := range n {
				e2 := *e
				e2.lib = []string{"rueidis", "go-redis"}[i%2]
				ls = append(ls, e2.limiter(t, LimiterConfig{Name: "a44fb", Limit: PerSecond(4, burst), Policy: LocalFallback,
					Instances: n, Clock: clk, Timeout: 100 * time.Millisecond, DenyCacheCells: uint32(1024 * (i % 2))}))
			}
			ctx := context.Background()
			for i, l := range ls {
				if d, err := l.Allow(ctx, "warm"); err != nil || !d.Allowed {
					t.Fatalf("instance %d warm: %+v %v", i, d, err)
				}
			}
			var resume func()
			switch sig {
			case "kill":
				e.srv.kill()
				resume = e.srv.start
			case "stop":
				p := e.srv.cmd.Process
				if err := p.Signal(syscall.SIGSTOP); err != nil {
					t.Fatal(err)
				}
				resumed := false
				resume = func() { p.Signal(syscall.SIGCONT); resumed = true }
				t.Cleanup(func() {
					if !resumed {
						p.Signal(syscall.SIGCONT)
					}
				})
			}
			var maxLat time.Duration
			phase := func(calls int, want int64) {
				for i, l := range ls {
					var a int64
					for range calls {
						t0 := time.Now()
						d, err := l.Allow(ctx, "hot")
						if el := time.Since(t0); el > maxLat {
							maxLat = el
						}
						if !errors.Is(err, ErrDegraded) {
							t.Fatalf("instance %d: Allow = %+v, %v; want an error matching ErrDegraded", i, d, err)
						}
						if d.Allowed {
							a++
						} else if d.RetryAfter <= 0 {
							t.Fatalf("instance %d: fallback denial with RetryAfter %v", i, d.RetryAfter)
						}
					}
					if a != want {
						t.Fatalf("instance %d: the fallback admitted %d of %d; want exactly %d", i, a, calls, want)
					}
				}
			}
			phase(8, burst/n)
			clk.Advance(time.Second)
			phase(3, 1)
			if maxLat > 1500*time.Millisecond {
				t.Errorf("a degraded call took %v; Timeout is 100ms", maxLat)
			}
			for i, l := range ls {
				st := l.Stats()
				want := Stats{Decisions: 12, ServerCalls: 12, ServerErrors: 11, PolicyAdmits: 5, PolicyDenials: 6, DegradedPeriod: 1}
				switch {
				case sig == "stop":
					want.Timeouts = 11 // every call hit its deadline
				case i%2 == 1:
					// go-redis retries a refused dial (MaxRetries, with
					// backoff) until the deadline: some of the failures
					// are deadlines.
					want.Timeouts = st.Timeouts
					if st.Timeouts > 11 {
						want.Timeouts = 11
					}
				}
				if st != want {
					t.Errorf("instance %d (%s): stats %+v; want %+v", i, sig, st, want)
				}
				if !l.Degraded() {
					t.Errorf("instance %d: Degraded() false while the server is down", i)
				}
			}
			resume()
			resumed := time.Now()
			for i, l := range ls {
				if i%2 == 0 || sig == "stop" {
					// rueidis (and go-redis after a pause: its
					// connections were only closed, its dials never
					// failed): the first call is the server's.
					lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
					d, err := l.Allow(lctx, fmt.Sprint("after", i))
					cancel()
					if err != nil || !d.Allowed || l.Degraded() {
						t.Errorf("instance %d: first call after recovery = %+v, %v, Degraded %v; want a server admission", i, d, err, l.Degraded())
					}
					continue
				}
				// go-redis after refused dials: its pool answers the last
				// dial error until its background probe (once a second)
				// dials again; recovery within a few seconds.
				var fails int
				for {
					lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
					d, err := l.Allow(lctx, fmt.Sprint("after", i))
					cancel()
					if err == nil && d.Allowed && !l.Degraded() {
						break
					}
					fails++
					if time.Since(resumed) > 4*time.Second {
						t.Fatalf("instance %d (go-redis): no recovery %v after the restart (%d failed calls): %v", i, time.Since(resumed), fails, err)
					}
					time.Sleep(20 * time.Millisecond)
				}
				t.Logf("instance %d (go-redis): %d calls failed after the restart, recovered after %v", i, fails, time.Since(resumed))
			}
			var got int64
			for j := 0; j < 2*burst; j++ {
				lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				d, err := ls[j%n].Allow(lctx, "fresh")
				cancel()
				if err != nil {
					t.Fatalf("after recovery: %v", err)
				}
				if d.Allowed {
					got++
				}
			}
			if got != burst {
				t.Errorf("after recovery a fresh key admitted %d; want exactly %d", got, burst)
			}
			for i, l := range ls {
				if st := l.Stats(); st.DegradedPeriod != 1 || (st.ServerErrors != 11 && (i%2 == 0 || sig == "stop")) || st.PolicyAdmits+st.PolicyDenials != st.ServerErrors {
					t.Errorf("instance %d: stats after recovery %+v; want DegradedPeriod 1, ServerErrors 11 (rueidis), one policy decision per error", i, st)
				}
			}
		})
	}
}

// TestAudit44PausedServerPolicies: a SIGSTOPped server under FailClosed
// and FailOpen, 4 instances (both clients; two with the deny cache and
// PreCheck) x 3 goroutines each making 2 calls with a 150 ms context
// deadline (no Timeout): policy.go "FailClosed denies", "FailOpen
// admits"; limiter.go: RetryAfter is -1 on "FailClosed's" denial and the
// error matches ErrDegraded and wraps the cause (DeadlineExceeded); every
// call returns well before the pause ends (within 1.5 s); Stats: 6
// ServerErrors = 6 Timeouts = 6 policy decisions, DegradedPeriod 1. On
// SIGCONT the calls the server had read run late (docs/distributed.md,
// "Timed out, yet executed"): over-counts only, so with the fake clock
// frozen the admissions before the pause plus those after it never pass
// Burst ("the server never counts less than what it admitted"), and the
// first call of every instance after SIGCONT is the server's.
func TestAudit44PausedServerPolicies(t *testing.T) {
	for _, pol := range []Policy{FailClosed, FailOpen} {
		t.Run(pol.String(), func(t *testing.T) {
			e := newEnv(t, "rueidis", "standalone")
			clk := sketchtest.NewFakeClock()
			clk.Set(1_700_000_000_000)
			const burst = 20
			ls := a44Instances(t, e, 4, LimiterConfig{Name: "a44pause", Limit: PerSecond(2, burst), Policy: pol, Clock: clk})
			ctx := context.Background()
			var before int64
			for j := range 12 {
				d, err := ls[j%4].Allow(ctx, "hot")
				if err != nil || !d.Allowed {
					t.Fatalf("before the pause: %+v %v", d, err)
				}
				before++
			}
			p := e.srv.cmd.Process
			if err := p.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			cont := false
			t.Cleanup(func() {
				if !cont {
					p.Signal(syscall.SIGCONT)
				}
			})
			type res struct {
				d   Decision
				err error
				el  time.Duration
			}
			out := make(chan res, 24)
			done := make(chan struct{})
			go func() {
				defer close(done)
				var wg sync.WaitGroup
				for _, l := range ls {
					for range 3 {
						wg.Add(1)
						go func() {
							defer wg.Done()
							for range 2 {
								c, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
								t0 := time.Now()
								d, err := l.Allow(c, "hot")
								cancel()
								out <- res{d, err, time.Since(t0)}
							}
						}()
					}
				}
				wg.Wait()
			}()
			<-done
			close(out)
			for r := range out {
				if !errors.Is(r.err, ErrDegraded) || !errors.Is(r.err, context.DeadlineExceeded) {
					t.Errorf("a call on the paused server: %+v, %v; want ErrDegraded wrapping DeadlineExceeded", r.d, r.err)
					continue
				}
				if r.el > 1500*time.Millisecond {
					t.Errorf("a call with a 150ms deadline took %v", r.el)
				}
				switch pol {
				case FailClosed:
					if r.d.Allowed || r.d.RetryAfter != -1 {
						t.Errorf("FailClosed decided %+v; want a denial with RetryAfter -1", r.d)
					}
				case FailOpen:
					if !r.d.Allowed || r.d.Remaining != burst {
						t.Errorf("FailOpen decided %+v; want an admission, Remaining = Burst", r.d)
					}
				}
			}
			for i, l := range ls {
				st := l.Stats()
				want := Stats{Decisions: 3 + 6, ServerCalls: 3 + 6, ServerErrors: 6, Timeouts: 6, DegradedPeriod: 1}
				if pol == FailClosed {
					want.PolicyDenials = 6
				} else {
					want.PolicyAdmits = 6
				}
				if st != want {
					t.Errorf("instance %d: stats %+v; want %+v", i, st, want)
				}
			}
			p.Signal(syscall.SIGCONT)
			cont = true
			for i, l := range ls {
				lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				d, err := l.Allow(lctx, fmt.Sprint("after", i))
				cancel()
				if err != nil || !d.Allowed || l.Degraded() {
					t.Errorf("instance %d: first call after SIGCONT = %+v, %v, Degraded %v; want a server admission", i, d, err, l.Degraded())
				}
			}
			var after int64
			for j := 0; j < 2*burst; j++ {
				d, err := ls[(j/3)%4].Allow(ctx, "hot")
				if err != nil {
					t.Fatal(err)
				}
				if d.Allowed {
					after++
				}
			}
			debt, err := ls[0].debtTokens(ctx, "hot")
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%v: %d admitted before the pause, %d after; debt %v", pol, before, after, debt)
			if before+after > burst {
				t.Errorf("%d admitted before the pause + %d after > Burst %d", before, after, burst)
			}
			if debt != burst && debt < float64(before+after) {
				t.Errorf("debt %v tokens; at least the %d admitted", debt, before+after)
			}
		})
	}
}

// TestAudit44GoRedisClosedPortFromStart: a go-redis client (which does
// not dial at construction) on a port where no server listens, with
// ServerCheck CheckWarn: NewLimiterGoRedis returns the limiter
// (LimiterConfig.ServerCheck: "CheckWarn logs it and goes on"), each of
// 20 calls under FailClosed is a denial matching ErrDegraded with
// RetryAfter -1 that returns within 1.5 s (Timeout 100 ms), Stats count
// 20 ServerErrors = 20 PolicyDenials, Timeouts <= 20, DegradedPeriod 1;
// once a server listens on the port, a call (polled, within 4 s: the go-redis
// pool's dial circuit breaker probes once a second) is decided by it and
// Degraded clears.
func TestAudit44GoRedisClosedPortFromStart(t *testing.T) {
	srv := &testServer{t: t, port: freePort(t), dir: t.TempDir()}
	t.Cleanup(srv.stop)
	e := &env{t: t, lib: "go-redis", srv: srv}
	l, err := e.newLimiter(t, LimiterConfig{Name: "a44closed", Limit: PerSecond(10, 10), Timeout: 100 * time.Millisecond,
		ServerCheck: CheckWarn, CheckTimeout: 200 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatalf("NewLimiterGoRedis with CheckWarn: %v", err)
	}
	ctx := context.Background()
	for i := range 20 {
		t0 := time.Now()
		d, err := l.Allow(ctx, "k")
		el := time.Since(t0)
		if !errors.Is(err, ErrDegraded) || d.Allowed || d.RetryAfter != -1 {
			t.Fatalf("call %d on a closed port: %+v, %v; want a FailClosed denial", i, d, err)
		}
		if el > 1500*time.Millisecond {
			t.Fatalf("call %d took %v; Timeout 100ms", i, el)
		}
	}
	st := l.Stats()
	if st.ServerErrors != 20 || st.PolicyDenials != 20 || st.Timeouts > 20 || st.DegradedPeriod != 1 || st.Decisions != 20 || st.ServerCalls != 20 {
		t.Fatalf("stats %+v", st)
	}
	srv.start()
	start := time.Now()
	fails := 0
	for {
		d, err := l.Allow(ctx, "k")
		if err == nil && d.Allowed && !l.Degraded() {
			break
		}
		fails++
		if time.Since(start) > 4*time.Second {
			t.Fatalf("no recovery within 4s of the server's start (%d failed calls): %v", fails, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("recovered %v after the server started, %d calls failed meanwhile; stats %+v", time.Since(start), fails, l.Stats())
}
