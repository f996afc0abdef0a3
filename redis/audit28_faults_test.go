package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"go.uber.org/goleak"
)

// TestAudit28FunctionFlushLoopExact: FUNCTION FLUSH runs over and over
// (about every 2 ms) on the server while 3 instances (2 rueidis, 1
// go-redis) x 3 goroutines call Allow on one hot key (Burst 30, no
// refill to speak of), FailClosed. doc.go: calls are "never retried by
// the sketch ... except after replies that say no code ran: 'Function
// not found' ... (the client loads the library ...) and calls once
// more"; a call that failed is the policy's (ErrDegraded, denied).
// Checked: every error matches ErrDegraded and every policy decision is
// a denial; at no point more than Burst admissions; once the flushing
// stops, the key reaches exactly Burst (no failed call was counted by
// the server, none applied twice), and the server's debt is exactly
// Burst; each limiter's Stats balance (policy decisions = errors).
func TestAudit28FunctionFlushLoopExact(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		e := newEnv(t, "rueidis", "standalone")
		const burst = 30
		name := "a28ff:" + strings.ReplaceAll(t.Name(), "/", ":")
		var ls []*Limiter
		for i := range 3 {
			e2 := *e
			e2.lib = []string{"rueidis", "go-redis"}[i%2]
			ls = append(ls, e2.limiter(t, LimiterConfig{Name: name, Limit: PerSecond(1e-6, burst), Timeout: 2 * time.Second}))
		}
		ctx := context.Background()
		var admitted, policyDenials, notFound atomic.Int64
		var stop atomic.Bool
		var wg sync.WaitGroup
		for _, l := range ls {
			for range 3 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for !stop.Load() {
						d, err := l.Allow(ctx, "hot")
						if err != nil {
							if !errors.Is(err, ErrDegraded) || d.Allowed || d.RetryAfter != -1 {
								t.Errorf("FailClosed fault: %+v, %v", d, err)
								return
							}
							if strings.Contains(err.Error(), "Function not found") {
								notFound.Add(1)
							}
							policyDenials.Add(1)
							continue
						}
						if d.Allowed {
							if a := admitted.Add(1); a > burst {
								t.Errorf("admission %d > Burst %d", a, burst)
							}
						}
					}
				}()
			}
		}
		flushes := 0
		deadline := time.Now().Add(400 * time.Millisecond)
		for time.Now().Before(deadline) {
			if _, err := rawDo(e.srv.addr(), "FUNCTION", "FLUSH"); err != nil {
				t.Fatal(err)
			}
			flushes++
			time.Sleep(2 * time.Millisecond)
		}
		// After the flushing: the load drains the key to exactly Burst.
		waitFor(t, 10*time.Second, "the key to reach Burst", func() bool { return admitted.Load() >= burst })
		time.Sleep(20 * time.Millisecond)
		stop.Store(true)
		wg.Wait()
		if a := admitted.Load(); a != burst {
			t.Fatalf("admitted %d; want exactly Burst %d", a, burst)
		}
		debt, err := ls[0].debtTokens(ctx, "hot")
		if err != nil {
			t.Fatal(err)
		}
		if debt < burst-1e-3 || debt > burst+1e-3 {
			t.Fatalf("server debt %v after %d admissions; want %d (a failed call counted, or one applied twice)", debt, burst, burst)
		}
		for i, l := range ls {
			st := l.Stats()
			if st.PolicyAdmits != 0 || st.PolicyDenials != st.ServerErrors || l.Degraded() {
				t.Fatalf("limiter %d: stats %+v degraded %v", i, st, l.Degraded())
			}
		}
		t.Logf("%d flushes, %d policy denials (%d 'Function not found' twice)", flushes, policyDenials.Load(), notFound.Load())
	})
}

// TestAudit28DenyCacheAfterServerLoss: one instance with the deny cache
// (and PreCheck), fake clock, Rate 10/s Burst 10. The key is exhausted
// and denied (the cache holds it), then the server loses the debt:
// FLUSHALL, or SIGKILL and restart on the same port (no persistence, and
// the library gone). docs/distributed.md: the cache is "stale only
// toward denial ... never longer than Burst/Rate"; "a key the server
// denied is denied locally ... while its reported debt has not
// drained". Checked: every local denial's RetryAfter and ResetAfter are
// at most Burst/Rate (1 s); a retry at the RetryAfter reaches the server
// (restarted: the library is reloaded, no error) and is admitted; the
// key then admits exactly what the server's bucket holds (no admission
// past the limit after the loss either).
func TestAudit28DenyCacheAfterServerLoss(t *testing.T) {
	for _, loss := range []string{"FLUSHALL", "restart"} {
		for _, lib := range []string{"rueidis", "go-redis"} {
			t.Run(loss+"/"+lib, func(t *testing.T) {
				e := newEnv(t, lib, "standalone")
				clk := sketchtest.NewFakeClock()
				clk.Set(1_780_000_000_000)
				l := e.limiter(t, LimiterConfig{Name: "a28loss", Limit: PerSecond(10, 10), Clock: clk,
					DenyCacheCells: 1024, PreCheck: true, Timeout: 2 * time.Second})
				ctx := context.Background()
				for i := range 10 {
					if d, err := l.Allow(ctx, "k"); err != nil || !d.Allowed {
						t.Fatalf("admission %d: %+v, %v", i, d, err)
					}
				}
				d, err := l.Allow(ctx, "k")
				if err != nil || d.Allowed || d.RetryAfter != 100*time.Millisecond {
					t.Fatalf("11th: %+v, %v; want a denial, RetryAfter 100ms", d, err)
				}
				switch loss {
				case "FLUSHALL":
					if _, err := rawDo(e.srv.addr(), "FLUSHALL"); err != nil {
						t.Fatal(err)
					}
				default:
					e.srv.kill()
					e.srv.start()
				}
				clk.Advance(40 * time.Millisecond)
				before := l.Stats().CacheDenials
				d, err = l.Allow(ctx, "k")
				if err != nil || d.Allowed {
					t.Fatalf("after the loss, cached key: %+v, %v; want the cache's denial", d, err)
				}
				if l.Stats().CacheDenials != before+1 {
					t.Fatalf("not a cache denial: %+v", l.Stats())
				}
				if d.RetryAfter <= 0 || d.RetryAfter > time.Second || d.ResetAfter > time.Second {
					t.Fatalf("cache denial %+v: want 0 < RetryAfter, ResetAfter <= Burst/Rate = 1s", d)
				}
				clk.Advance(d.RetryAfter)
				// A client whose server restarted may fail a call or two on
				// connections that died with it (EOF: the fault policy's
				// decision, as documented), even after one call succeeded:
				// heal them on other keys, 64 successes in a row (rueidis
				// spreads calls over several pipelined connections, not
				// in turn: five in a row once left a dead one, stop 49),
				// before the key's own calls are counted.
				ok := 0
				probe := 0
				waitFor(t, 10*time.Second, "the restarted server", func() bool {
					probe++
					if _, err := l.Allow(ctx, fmt.Sprintf("probe-%d", probe)); err != nil {
						ok = 0
						return false
					}
					ok++
					return ok >= 64
				})
				got, err := l.Allow(ctx, "k")
				if err != nil {
					t.Fatalf("retry at the cache's RetryAfter: %v", err)
				}
				if !got.Allowed {
					t.Fatalf("retry at the cache's RetryAfter: %+v; want the server's admission", got)
				}
				// The server's fresh bucket: 9 more, then a denial.
				for i := range 9 {
					if d, err := l.Allow(ctx, "k"); err != nil || !d.Allowed {
						t.Fatalf("fresh bucket admission %d: %+v, %v", i+2, d, err)
					}
				}
				if d, err := l.Allow(ctx, "k"); err != nil || d.Allowed {
					t.Fatalf("fresh bucket, 11th: %+v, %v; want a denial", d, err)
				}
			})
		}
	}
}

// TestAudit28CanceledContext: a caller's context canceled before the
// call, or while the server is paused (CLIENT PAUSE), under each
// policy. doc.go: a round trip that fails "is decided by the Limiter's
// Policy", AllowN returns it "with an error matching ErrDegraded that
// also wraps the cause"; Stats.Timeouts counts "failures by deadline"
// only. Checked: the policy's decision (FailClosed denies with
// RetryAfter -1, FailOpen admits with Remaining = Burst, LocalFallback
// decides locally), errors.Is(err, context.Canceled), no Timeout
// counted, and a canceled call returns promptly (rueidis; go-redis ends
// a call in flight at its deadline only, see the test).
func TestAudit28CanceledContext(t *testing.T) {
	forEachClient(t, func(t *testing.T, e *env) {
		for _, pol := range []Policy{FailClosed, FailOpen, LocalFallback} {
			t.Run(pol.String(), func(t *testing.T) {
				l := e.limiter(t, LimiterConfig{Name: "a28cx:" + pol.String(), Limit: PerSecond(1, 4), Policy: pol, Instances: 2})
				if _, err := l.Allow(context.Background(), "warm"); err != nil {
					t.Fatal(err)
				}
				check := func(how string, d Decision, err error, el time.Duration) {
					t.Helper()
					if !errors.Is(err, ErrDegraded) || !errors.Is(err, context.Canceled) {
						t.Fatalf("%s: err %v; want ErrDegraded wrapping context.Canceled", how, err)
					}
					if el > 2*time.Second {
						t.Fatalf("%s: took %v", how, el)
					}
					switch pol {
					case FailClosed:
						if d.Allowed || d.RetryAfter != -1 || d.Remaining != 0 {
							t.Fatalf("%s: FailClosed %+v", how, d)
						}
					case FailOpen:
						if !d.Allowed || d.RetryAfter != -1 || d.Remaining != 4 {
							t.Fatalf("%s: FailOpen %+v", how, d)
						}
					case LocalFallback:
						if !d.Allowed || d.Limit != (Limit{Rate: 0.5, Burst: 2}) {
							t.Fatalf("%s: LocalFallback %+v; want the fallback's admission", how, d)
						}
					}
				}
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				start := time.Now()
				d, err := l.Allow(ctx, "pre")
				check("canceled before", d, err, time.Since(start))

				if _, err := rawDo(e.srv.addr(), "CLIENT", "PAUSE", "1000", "ALL"); err != nil {
					t.Fatal(err)
				}
				ctx, cancel = context.WithCancel(context.Background())
				time.AfterFunc(100*time.Millisecond, cancel)
				start = time.Now()
				d, err = l.Allow(ctx, "mid")
				el := time.Since(start)
				wantErrs := int64(2)
				if e.lib == "go-redis" && err == nil {
					// go-redis (ContextTimeoutEnabled) bounds a call by the
					// context's deadline, not by its cancellation: the call
					// waited for the pause and the server decided. doc.go
					// promises deadlines only ("Context deadlines bound every
					// call"); recorded in the report.
					t.Logf("go-redis: a call canceled in flight waited %v for the paused server and returned its decision %+v", el, d)
					wantErrs = 1
				} else {
					check("canceled in flight", d, err, el)
				}
				rawDo(e.srv.addr(), "CLIENT", "UNPAUSE")
				if st := l.Stats(); st.Timeouts != 0 || st.ServerErrors != wantErrs || st.PolicyAdmits+st.PolicyDenials != wantErrs {
					t.Fatalf("stats %+v; want %d errors, no timeout", st, wantErrs)
				}
				// Recovery.
				waitFor(t, 5*time.Second, "recovery", func() bool {
					_, err := l.Allow(context.Background(), "after")
					return err == nil
				})
			})
		}
	})
}

// TestAudit28FallbackInstancesConcurrent: N = 4 LocalFallback instances
// whose server is down, racing on one key at one instant (fake clock:
// no refill), at several GOMAXPROCS. policy.go: "N instances that all
// fall back admit at most the global rate between them": each admits
// exactly floor(Burst/N) of 1 token (its local limiter is exact under
// contention), in all at most Burst; every admission reports
// 0 <= Remaining <= Burst/N, the fallback's Limit, RetryAfter -1.
func TestAudit28FallbackInstancesConcurrent(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		for round := range 20 {
			clk := sketchtest.NewFakeClock()
			clk.Set(1_780_000_000_000)
			const burst, n = 41.0, 4
			var ls []*Limiter
			for range n {
				ls = append(ls, a28FallbackLimiter(t, PerSecond(3, burst), n, clk))
			}
			var per [n]atomic.Int64
			var wg sync.WaitGroup
			for i, l := range ls {
				for range 4 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for range 30 {
							d, err := l.Allow(context.Background(), "hot")
							if !errors.Is(err, ErrDegraded) {
								t.Errorf("err %v", err)
								return
							}
							if d.Allowed {
								per[i].Add(1)
								if d.Remaining < 0 || d.Remaining > burst/n || d.RetryAfter != -1 || d.Limit != (Limit{Rate: 3.0 / n, Burst: burst / n}) {
									t.Errorf("fallback admission %+v", d)
								}
							} else if d.RetryAfter <= 0 {
								t.Errorf("fallback denial %+v", d)
							}
						}
					}()
				}
			}
			wg.Wait()
			total := int64(0)
			for i := range per {
				if p := per[i].Load(); p != 10 { // floor(41/4)
					t.Fatalf("round %d: instance %d admitted %d; want floor(Burst/N) = 10", round, i, p)
				}
				total += per[i].Load()
			}
			if total > burst {
				t.Fatalf("round %d: %d admitted across the instances; Burst %v", round, total, burst)
			}
		}
	})
}

// TestAudit28NoLeakAfterFaults: a rueidis and a go-redis client, each
// with a limiter per policy, through a SIGKILL, calls while the server
// is down, a restart on the same port, FUNCTION FLUSH and calls again;
// then the clients are closed and the server stopped: no goroutine of
// the run remains (goleak; the Limiter starts none, doc.go: "no lock, no
// goroutine", the caller closes the client).
func TestAudit28NoLeakAfterFaults(t *testing.T) {
	opts := []goleak.Option{goleak.IgnoreCurrent()}
	srv := startServer(t)
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	gc := goredis.NewClient(&goredis.Options{Addr: srv.addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	var ls []*Limiter
	for _, pol := range []Policy{FailClosed, FailOpen, LocalFallback} {
		cfg := LimiterConfig{Name: "a28leak", Limit: PerSecond(100, 10), Policy: pol, Timeout: 300 * time.Millisecond,
			DenyCacheCells: 256, ServerCheck: CheckWarn}
		l1, err := NewLimiter(rc, cfg)
		if err != nil {
			t.Fatal(err)
		}
		l2, err := NewLimiterGoRedis(gc, cfg)
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l1, l2)
	}
	ctx := context.Background()
	burst := func(wantErr bool) {
		var wg sync.WaitGroup
		for _, l := range ls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 20 {
					_, err := l.Allow(ctx, fmt.Sprint("k", i%3))
					if wantErr && err != nil && !errors.Is(err, ErrDegraded) {
						t.Errorf("err %v", err)
					}
				}
			}()
		}
		wg.Wait()
	}
	burst(false)
	srv.kill()
	burst(true)
	srv.start()
	waitFor(t, 10*time.Second, "recovery", func() bool {
		for _, l := range ls {
			if _, err := l.Allow(ctx, "probe"); err != nil {
				return false
			}
		}
		return true
	})
	if _, err := rawDo(srv.addr(), "FUNCTION", "FLUSH"); err != nil {
		t.Fatal(err)
	}
	burst(false)
	rc.Close()
	gc.Close()
	srv.kill()
	// go-redis's pool probes a failed dial from a goroutine of its own
	// that sleeps 1 s between probes and notices the Close after its
	// sleep (internal/pool, tryDial): allow it a few seconds.
	var leakErr error
	for deadline := time.Now().Add(5 * time.Second); ; {
		if leakErr = goleak.Find(opts...); leakErr == nil || time.Now().After(deadline) {
			break
		}
	}
	if err := leakErr; err != nil {
		t.Fatalf("goroutines left after closing the clients and stopping the server: %v", err)
	}
}
