package redis

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestServerKilledAndRestarted: the server is killed mid-run while
// goroutines call AllowN, and restarted on the same port. Under each
// policy: no panic, every outage decision is the policy's (FailClosed
// denies all, FailOpen admits all, LocalFallback admits at most Burst/N
// per key), Degraded reports it, and the limiter recovers on the
// restarted (empty) server.
func TestServerKilledAndRestarted(t *testing.T) {
	forEachClient(t, func(t *testing.T, e *env) { testServerKilledAndRestarted(t, e) })
}

func testServerKilledAndRestarted(t *testing.T, e *env) {
	srv := e.srv
	for _, pol := range []Policy{FailClosed, FailOpen, LocalFallback} {
		t.Run(pol.String(), func(t *testing.T) {
			const burst, instances = 40, 4
			l := e.limiter(t, LimiterConfig{Name: "restart:" + pol.String(), Limit: PerSecond(1e-3, burst),
				Policy: pol, Instances: instances, Timeout: 200 * time.Millisecond})
			ctx := context.Background()
			var stop atomic.Bool
			var outageAdmits, outageDenies atomic.Int64
			var wg sync.WaitGroup
			for g := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for !stop.Load() {
						d, err := l.Allow(ctx, fmt.Sprint("k", g))
						if err != nil {
							if !errors.Is(err, ErrDegraded) {
								t.Errorf("error %v does not match ErrDegraded", err)
								return
							}
							if d.Allowed {
								outageAdmits.Add(1)
							} else {
								outageDenies.Add(1)
							}
						}
						time.Sleep(time.Millisecond)
					}
				}()
			}
			time.Sleep(50 * time.Millisecond)
			srv.kill()
			deadline := time.Now().Add(5 * time.Second)
			for outageAdmits.Load()+outageDenies.Load() < 20 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if !l.Degraded() {
				t.Fatal("Degraded() = false with the server down")
			}
			srv.start()
			// Recovery: a call succeeds again on the restarted server.
			var recovered bool
			for time.Now().Before(deadline.Add(5 * time.Second)) {
				if _, err := l.Allow(ctx, "probe"); err == nil {
					recovered = true
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			stop.Store(true)
			wg.Wait()
			if !recovered || l.Degraded() {
				t.Fatalf("no recovery after restart: recovered=%v Degraded=%v stats %+v", recovered, l.Degraded(), l.Stats())
			}
			a, d := outageAdmits.Load(), outageDenies.Load()
			st := l.Stats()
			if a+d == 0 || st.ServerErrors == 0 || st.DegradedPeriod == 0 {
				t.Fatalf("no outage decisions seen: admits %d denies %d stats %+v", a, d, st)
			}
			switch pol {
			case FailClosed:
				if a != 0 {
					t.Fatalf("FailClosed admitted %d during the outage", a)
				}
			case FailOpen:
				if d != 0 {
					t.Fatalf("FailOpen denied %d during the outage", d)
				}
			case LocalFallback:
				if a > 4*burst/instances { // 4 keys, Burst/N each, no refill to speak of
					t.Fatalf("LocalFallback admitted %d during the outage; at most %d", a, 4*burst/instances)
				}
			}
			// Every failed round trip made exactly one policy decision.
			if st.PolicyAdmits+st.PolicyDenials != st.ServerErrors {
				t.Fatalf("policy decisions %d+%d != server errors %d", st.PolicyAdmits, st.PolicyDenials, st.ServerErrors)
			}
		})
	}
}

// TestSlowServerTimesOut: a paused server (CLIENT PAUSE) makes a call hit
// its deadline, from the Timeout option or from the context, and the
// policy answers well before the pause ends.
func TestSlowServerTimesOut(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		tests := []struct {
			name    string
			timeout time.Duration // LimiterConfig.Timeout
			ctx     time.Duration // context deadline; 0 means none
		}{{"option", 100 * time.Millisecond, 0}, {"context", 0, 100 * time.Millisecond}, {"context wins", 5 * time.Second, 100 * time.Millisecond}}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				name := e.ns("slow:" + tt.name)
				l := e.limiter(t, LimiterConfig{Name: name, Limit: PerSecond(10, 10), Timeout: tt.timeout, Policy: FailClosed})
				if _, err := l.Allow(context.Background(), "warm"); err != nil {
					t.Fatal(err)
				}
				node := e.nodeOf(t, "{"+name+"}:g")
				if _, err := rawDo(node.addr(), "CLIENT", "PAUSE", "1000", "ALL"); err != nil {
					t.Fatal(err)
				}
				defer rawDo(node.addr(), "CLIENT", "UNPAUSE")
				ctx := context.Background()
				if tt.ctx > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tt.ctx)
					defer cancel()
				}
				start := time.Now()
				d, err := l.Allow(ctx, "k")
				el := time.Since(start)
				if !errors.Is(err, ErrDegraded) || !errors.Is(err, context.DeadlineExceeded) || d.Allowed {
					t.Fatalf("Allow = %+v, %v; want a FailClosed denial wrapping DeadlineExceeded", d, err)
				}
				if el > 600*time.Millisecond {
					t.Fatalf("took %v; the deadline was 100ms", el)
				}
				if st := l.Stats(); st.Timeouts != 1 || !l.Degraded() {
					t.Fatalf("stats %+v, Degraded %v; want one timeout, degraded", st, l.Degraded())
				}
			})
		}
	})
}

// TestTimedOutCallStillExecuted: a call the client gave up on (its
// deadline passed while the server was busy: DEBUG SLEEP from another
// connection) is still executed by the server afterwards, after the
// policy has decided: the server then counts the request although
// FailClosed denied it (an over-count, the safe side), FailOpen's
// admission is counted once, and LocalFallback's admission is counted
// both locally and on the server. Both libraries close a connection whose
// read timed out, but the command was already in the server's socket
// buffer, and the server runs what it read before it sees the close.
func TestTimedOutCallStillExecuted(t *testing.T) {
	forEachClient(t, func(t *testing.T, e *env) {
		for _, pol := range []Policy{FailClosed, FailOpen, LocalFallback} {
			t.Run(pol.String(), func(t *testing.T) {
				name := "late:" + pol.String()
				const n = 3
				l := e.limiter(t, LimiterConfig{Name: name, Limit: PerSecond(1e-3, 10), Timeout: 100 * time.Millisecond, Policy: pol, Instances: 1})
				ctx := context.Background()
				// Concurrent calls open every connection the client will
				// use: a connection opened during the stall would time out
				// in its handshake, and the call would never be sent (the
				// other possible outcome: timed out and not executed).
				var wg sync.WaitGroup
				for g := range 8 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for j := range 5 {
							if _, err := l.Allow(ctx, fmt.Sprint("warm", g, j)); err != nil {
								t.Error(err)
							}
						}
					}()
				}
				wg.Wait()
				wg.Add(1)
				go func() {
					defer wg.Done()
					rawDo(e.srv.addr(), "DEBUG", "SLEEP", "1")
				}()
				awaitAsleep(t, e.srv.addr()) // DEBUG SLEEP has the server
				d, err := l.AllowN(ctx, "k", n)
				wg.Wait()
				if !errors.Is(err, ErrDegraded) || !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("AllowN = %+v, %v; want a policy decision wrapping DeadlineExceeded", d, err)
				}
				if want := pol != FailClosed; d.Allowed != want {
					t.Fatalf("%v decided Allowed=%v; want %v", pol, d.Allowed, want)
				}
				// Its own deadline: Timeout (100 ms) is for the call above,
				// and a stall of the machine as the server wakes is not
				// what this checks (audit 156).
				cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				debt, err := l.debtTokens(cctx, "k")
				if err != nil {
					t.Fatal(err)
				}
				if math.Abs(debt-n) > 0.01 {
					t.Fatalf("server debt for k after the stall = %v; want %d: the timed-out call ran late", debt, n)
				}
			})
		}
	})
}
