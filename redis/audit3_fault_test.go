package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// audit3Outcome is what the load saw, per instance.
type audit3Outcome struct {
	outageAdmits, outageDenies atomic.Int64 // decisions with an error
	okCalls                    atomic.Int64 // decisions without an error
	maxCall                    atomic.Int64 // ns, the slowest call
	badErr                     atomic.Value // an error not matching ErrDegraded
	lastErr                    atomic.Value // the last error, as a string
}

// TestAudit3KillRestartPolicies: the server is killed (SIGKILL) while 4
// instances (2 rueidis, 2 go-redis clients) x 2 goroutines call Allow
// on one hot key, then restarted on the same port (empty). Per policy,
// from the docs:
//   - "When the server fails or times out, the Policy decides, and AllowN
//     returns that decision with an error matching ErrDegraded that also
//     wraps the cause": every failed call's error matches ErrDegraded and
//     says more than ErrDegraded alone.
//   - FailClosed "denies", FailOpen "admits", LocalFallback "decides with
//     a local lock-free limiter at Rate/N and Burst/N ... N instances that
//     all fall back admit at most the global rate between them": at most
//     Burst/N per instance and Burst in all on the hot key (Rate 1e-3/s:
//     no refill to speak of).
//   - "Context deadlines bound every call; Config.Timeout supplies one
//     when the context has none": no call takes much longer than Timeout
//     (150 ms; 1 s allowed).
//   - "Degraded reports whether the last round trip failed": true on
//     every instance during the outage; "Recovery needs nothing from the
//     caller" (docs/distributed.md): after the restart every instance
//     answers from the server again (the load sees it), then a call under
//     a 5 s deadline succeeds and Degraded is false, and the global limit
//     is exact again: a fresh key admits exactly Burst across the
//     instances.
//   - Stats: every failed round trip made exactly one policy decision.
func TestAudit3KillRestartPolicies(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	srv := e.srv
	for _, pol := range []Policy{FailClosed, FailOpen, LocalFallback} {
		t.Run(pol.String(), func(t *testing.T) {
			const burst, instances = 40, 4
			const timeout = 150 * time.Millisecond
			var ls []*Limiter
			for i := range instances {
				e2 := *e
				e2.lib = []string{"rueidis", "go-redis"}[i%2]
				ls = append(ls, e2.limiter(t, LimiterConfig{Name: "audit3:kill:" + pol.String(), Limit: PerSecond(1e-3, burst),
					Policy: pol, Instances: instances, Timeout: timeout}))
			}
			audit3Outage(t, ls, pol, burst, timeout, srv.kill, srv.start)
		})
	}
}

// audit3Outage runs the load on ls, kills the server (kill), restarts it
// (restart) and checks what TestAudit3KillRestartPolicies says.
func audit3Outage(t *testing.T, ls []*Limiter, pol Policy, burst int64, timeout time.Duration, kill, restart func()) {
	instances := len(ls)
	ctx := context.Background()
	outs := make([]audit3Outcome, instances)
	var down atomic.Bool // set before the kill, cleared after every instance recovered
	var stop atomic.Bool
	var wg sync.WaitGroup
	defer func() { stop.Store(true); wg.Wait() }()
	for i, l := range ls {
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				o := &outs[i]
				for !stop.Load() {
					t0 := time.Now()
					d, err := l.Allow(ctx, "hot")
					if el := int64(time.Since(t0)); el > o.maxCall.Load() {
						o.maxCall.Store(el) // racy max; close enough for a bound
					}
					if err != nil {
						o.lastErr.Store(fmt.Sprintf("%v (after %v, %d ok calls before)", err, time.Since(t0), o.okCalls.Load()))
					}
					switch {
					case err == nil:
						o.okCalls.Add(1)
					case !errors.Is(err, ErrDegraded) || err.Error() == ErrDegraded.Error():
						o.badErr.Store(err)
					case !down.Load():
						o.badErr.Store(fmt.Errorf("a policy decision while the server was up: %w", err))
					case d.Allowed:
						o.outageAdmits.Add(1)
					default:
						o.outageDenies.Add(1)
					}
					time.Sleep(time.Millisecond)
				}
			}()
		}
	}
	waitFor(t, 10*time.Second, "calls answered by the server", func() bool {
		for i := range outs {
			if outs[i].okCalls.Load() < 3 {
				return false
			}
		}
		return true
	})
	down.Store(true)
	kill()
	waitFor(t, 10*time.Second, "policy decisions on every instance", func() bool {
		for i := range outs {
			if outs[i].outageAdmits.Load()+outs[i].outageDenies.Load() < 8 {
				return false
			}
		}
		return true
	})
	for i, l := range ls {
		if !l.Degraded() {
			t.Errorf("instance %d: Degraded() = false with the server down", i)
		}
	}
	okAtRestart := make([]int64, instances)
	for i := range outs {
		okAtRestart[i] = outs[i].okCalls.Load()
	}
	restart()
	waitFor(t, 10*time.Second, "every instance answered by the restarted server", func() bool {
		for i := range outs {
			if outs[i].okCalls.Load() < okAtRestart[i]+3 {
				return false
			}
		}
		return true
	})
	stop.Store(true)
	wg.Wait()
	down.Store(false)
	var admits int64
	for i := range outs {
		o := &outs[i]
		if err, _ := o.badErr.Load().(error); err != nil {
			t.Errorf("instance %d: %v", i, err)
		}
		if m := time.Duration(o.maxCall.Load()); m > timeout+850*time.Millisecond {
			t.Errorf("instance %d: a call took %v; Timeout is %v", i, m, timeout)
		}
		a, d := o.outageAdmits.Load(), o.outageDenies.Load()
		admits += a
		switch pol {
		case FailClosed:
			if a != 0 {
				t.Errorf("instance %d: FailClosed admitted %d during the outage", i, a)
			}
		case FailOpen:
			if d != 0 {
				t.Errorf("instance %d: FailOpen denied %d during the outage", i, d)
			}
		case LocalFallback:
			if a > burst/int64(instances) || a == 0 {
				t.Errorf("instance %d: LocalFallback admitted %d on the hot key during the outage; want 1..%d (Burst/N)", i, a, burst/int64(instances))
			}
		}
		// Right after a restart a go-redis client may still time out a
		// call now and then (its pool's dial circuit breaker): the check
		// of Degraded follows one call under a generous deadline.
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := ls[i].Allow(lctx, "probe")
		cancel()
		if err != nil || ls[i].Degraded() {
			t.Errorf("instance %d: after recovery Allow = %v, Degraded() = %v; the last load error: %v", i, err, ls[i].Degraded(), o.lastErr.Load())
		}
		st := ls[i].Stats()
		if st.PolicyAdmits+st.PolicyDenials != st.ServerErrors || st.DegradedPeriod < 1 || st.ServerErrors != a+d || st.Decisions != st.ServerCalls {
			t.Errorf("instance %d: stats %+v; outage decisions seen %d admitted, %d denied", i, st, a, d)
		}
	}
	if pol == LocalFallback && admits > burst {
		t.Errorf("LocalFallback: %d instances admitted %d in all during the outage; Burst is %d", instances, admits, burst)
	}
	// Exact again on the restarted server: a fresh key, round-robin
	// (a generous deadline again).
	var got int64
	for i := 0; i < 2*int(burst); i++ {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		d, err := ls[i%instances].Allow(lctx, "fresh")
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
}

// TestAudit3ClusterNodeKillRestart: the same on a cluster of its own (3
// masters, no replicas): the master holding the sketch's slot is killed
// mid-load and restarted on the same port from its nodes.conf (within
// the node timeout, so the cluster never fails over), empty and without
// the library, under LocalFallback and FailClosed. The restarted node's
// "Function not found" is one of the replies after which the sketch loads
// the library on every node and calls once more: the instances recover
// with no help.
func TestAudit3ClusterNodeKillRestart(t *testing.T) {
	lookTool(t, "redis-server")
	c, err := startCluster(t, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.stop)
	t.Cleanup(audit3WaitDelayedRefresh)
	for _, pol := range []Policy{LocalFallback, FailClosed} {
		t.Run(pol.String(), func(t *testing.T) {
			const burst, instances = 40, 4
			const timeout = 150 * time.Millisecond
			name := "audit3:ckill:" + pol.String()
			node := c.owner(t, keySlot("{"+name+"}:g"))
			var ls []*Limiter
			for i := range instances {
				e := &env{t: t, lib: []string{"rueidis", "go-redis"}[i%2], cluster: c}
				ls = append(ls, e.limiter(t, LimiterConfig{Name: name, Limit: PerSecond(1e-3, burst),
					Policy: pol, Instances: instances, Timeout: timeout}))
			}
			audit3Outage(t, ls, pol, burst, timeout, node.kill, func() {
				node.start()
				if err := c.waitConsistent(10 * time.Second); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}

// TestAudit3ReloadWithAnotherNodeDown: docs/distributed.md: "Function not
// found" (a fresh server, one restarted without persistence, ...) "makes
// it send FUNCTION LOAD to every node the client knows ... and call once
// more"; "Recovery needs nothing from the caller ... the library is
// loaded again after the restarted server's 'Function not found'". On a
// cluster of its own (cluster-require-full-coverage no, so a master serves
// its slots while another is down): master Y (the lowest address, the
// first the sketch loads the library on) is killed and stays down; the
// master X that holds the sketch's slot is killed and restarted, empty.
// X serves its slots again, so the limiter should recover on X: a call
// that gets "Function not found" loads the library on every node it can
// reach and calls once more.
func TestAudit3ReloadWithAnotherNodeDown(t *testing.T) {
	lookTool(t, "redis-server")
	c, err := startCluster(t, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.stop)
	t.Cleanup(audit3WaitDelayedRefresh)
	noFullCoverage := func(n *testServer) {
		if r, err := rawDo(n.addr(), "CONFIG", "SET", "cluster-require-full-coverage", "no"); err != nil || r != "OK" {
			t.Fatalf("CONFIG SET on %s: %v %v", n.addr(), r, err)
		}
	}
	for _, n := range c.nodes {
		noFullCoverage(n)
	}
	y := c.nodes[0]
	for _, n := range c.nodes {
		if n.addr() < y.addr() {
			y = n
		}
	}
	// One sketch per client library, on the same master x (not y).
	var x *testServer
	libs := []string{"rueidis", "go-redis"}
	names := make([]string, len(libs))
	for i := 0; names[1] == ""; i++ {
		cand := "audit3:reload:" + strconv.Itoa(i)
		o := c.owner(t, keySlot("{"+cand+"}:g"))
		if o == y || (x != nil && o != x) {
			continue
		}
		x = o
		if names[0] == "" {
			names[0] = cand
		} else {
			names[1] = cand
		}
	}
	ctx := context.Background()
	var ls []*Limiter
	for i, lib := range libs {
		e := &env{t: t, lib: lib, cluster: c}
		l := e.limiter(t, LimiterConfig{Name: names[i], Limit: PerSecond(1e-3, 10), Timeout: time.Second})
		if _, err := l.Allow(ctx, "k"); err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	y.kill()
	x.kill()
	x.start()
	noFullCoverage(x)
	waitFor(t, 10*time.Second, "the restarted master serving its slots", func() bool {
		r, err := rawDo(x.addr(), "SET", "{"+names[0]+"}:probe", "1")
		return err == nil && r == "OK"
	})
	for i, l := range ls {
		var lastErr error
		ok := false
		for deadline := time.Now().Add(1500 * time.Millisecond); time.Now().Before(deadline) && !ok; time.Sleep(50 * time.Millisecond) {
			_, lastErr = l.Allow(ctx, "k")
			ok = lastErr == nil
		}
		if !ok {
			fl, _ := rawDo(x.addr(), "FUNCTION", "LIST")
			t.Errorf("%s: with %s down, the limiter never recovered on the restarted %s that holds its slot (1.5 s): %v; stats %+v; FUNCTION LIST on it: %v",
				libs[i], y.addr(), x.addr(), lastErr, l.Stats(), fl)
		}
	}
}
