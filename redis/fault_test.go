package redis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// TestServerKilledAndRestarted: the server is killed mid-run while
// goroutines call AllowN, and restarted on the same port. Under each
// policy: no panic, every outage decision is the policy's (FailClosed
// denies all, FailOpen admits all, LocalFallback admits at most Burst/N
// per key), Degraded reports it, and the limiter recovers on the
// restarted (empty) server.
func TestServerKilledAndRestarted(t *testing.T) {
	for _, pol := range []Policy{FailClosed, FailOpen, LocalFallback} {
		t.Run(pol.String(), func(t *testing.T) {
			srv := startServer(t)
			const burst, instances = 40, 4
			l := mustLimiter(t, srv.client(t), LimiterConfig{Name: "restart", Limit: PerSecond(1e-3, burst),
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
	srv := startServer(t)
	admin := srv.client(t)
	tests := []struct {
		name    string
		timeout time.Duration // LimiterConfig.Timeout
		ctx     time.Duration // context deadline; 0 means none
	}{{"option", 100 * time.Millisecond, 0}, {"context", 0, 100 * time.Millisecond}, {"context wins", 5 * time.Second, 100 * time.Millisecond}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := mustLimiter(t, srv.client(t), LimiterConfig{Name: "slow", Limit: PerSecond(10, 10), Timeout: tt.timeout, Policy: FailClosed})
			if _, err := l.Allow(context.Background(), "warm"); err != nil {
				t.Fatal(err)
			}
			if err := do(t, admin, "CLIENT", "PAUSE", "1000", "ALL").Error(); err != nil {
				t.Fatal(err)
			}
			defer do(t, admin, "CLIENT", "UNPAUSE")
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
}

var _ rueidis.Client = fakeClient{}
