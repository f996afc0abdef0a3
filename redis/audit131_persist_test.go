package redis

// Audit 131: the global limiter through faults the earlier audits did not
// make: a server killed and restarted WITH persistence (AOF, RDB), DEBUG
// RELOAD mid-traffic, a replica promoted after the primary died, and a
// limiter pointed at a read-only replica. docs/distributed.md: "With
// persistence or replication the library survives restarts and failovers
// like the data."

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
)

// a131Env wraps an already started server as an env of lib.
func a131Env(t *testing.T, lib string, s *testServer) *env {
	return &env{t: t, lib: lib, srv: s, admin: s.direct(t), seq: envSeq.Add(1)}
}

// a131Heal calls l on fresh keys until 32 calls in a row succeed (a
// client whose server restarted may fail a call or two on connections
// that died with it).
func a131Heal(t *testing.T, l *Limiter, tag string) {
	t.Helper()
	ok, probe := 0, 0
	waitFor(t, 10*time.Second, "the server back", func() bool {
		probe++
		if _, err := l.AllowN(context.Background(), fmt.Sprintf("%s-probe-%d", tag, probe), 0); err != nil {
			ok = 0
			return false
		}
		ok++
		return ok >= 32
	})
}

// a131Admit calls Allow on key until the server denies it (at most max
// calls), and returns how many it admitted; any error fails the test.
func a131Admit(t *testing.T, l *Limiter, key string, max int) int {
	t.Helper()
	n := 0
	for range max {
		d, err := l.Allow(context.Background(), key)
		if err != nil {
			t.Fatalf("Allow(%q): %v", key, err)
		}
		if !d.Allowed {
			return n
		}
		n++
	}
	return n
}

// a131LibraryListed reports whether the server at addr lists the sketch's
// library (FUNCTION LIST LIBRARYNAME).
func a131LibraryListed(t *testing.T, addr string) bool {
	t.Helper()
	name, _ := Library()
	v, err := rawDo(addr, "FUNCTION", "LIST", "LIBRARYNAME", name)
	if err != nil {
		t.Fatalf("FUNCTION LIST on %s: %v", addr, err)
	}
	return strings.Contains(fmt.Sprint(v), name)
}

// TestAudit131PersistedRestartKeepsDebt: a server with persistence (AOF
// with appendfsync always, or an RDB written by SAVE) is SIGKILLed and
// restarted on the same port. docs/distributed.md: "With persistence or
// replication the library survives restarts and failovers like the data";
// the LocalFallback "starts from its own state, not from the server's
// debts, and the server never learns what the fallbacks admitted".
// Frozen fake clock (no refill), Burst 10, LocalFallback (N = 1), deny
// cache with PreCheck. Before the kill: k1 admitted 6, k2 exhausted (10,
// then a server denial the cache learns). During the outage: k2 is the
// cache's denial (no error), k1 the fallback's (admits exactly 10, its
// own bucket, with ErrDegraded). After the restart: the library is
// listed before any call (persisted with the data), Degraded clears, k1
// admits exactly 4 more on the server (the fallback's 10 were not
// charged, the 6 persisted), k2 none (probed with a cache-less instance),
// and a key never seen admits exactly 10. Stats balance: every failed
// round trip is one policy decision, every decision a server call or a
// cache denial.
func TestAudit131PersistedRestartKeepsDebt(t *testing.T) {
	for _, mode := range []string{"aof", "rdb"} {
		for _, lib := range []string{"rueidis", "go-redis"} {
			t.Run(mode+"/"+lib, func(t *testing.T) {
				extra := []string{"--appendonly", "yes", "--appendfsync", "always"}
				if mode == "rdb" {
					extra = []string{"--dbfilename", "dump.rdb"}
				}
				e := newEnv(t, lib, "standalone", extra...)
				clk := sketchtest.NewFakeClock()
				clk.Set(1_790_000_000_000)
				cfg := LimiterConfig{Name: "a131p", Limit: PerSecond(10, 10), Clock: clk,
					Policy: LocalFallback, Instances: 1, DenyCacheCells: 1024, PreCheck: true,
					CellsPerLevel: 1000, Timeout: 300 * time.Millisecond}
				if lib == "go-redis" {
					// go-redis redials a closed port until the deadline:
					// each outage call takes the whole Timeout.
					cfg.Timeout = 150 * time.Millisecond
				}
				l := e.limiter(t, cfg)
				ctx := context.Background()
				if got := a131Admit(t, l, "k1", 6); got != 6 {
					t.Fatalf("k1 admitted %d of 6", got)
				}
				if got := a131Admit(t, l, "k2", 20); got != 10 {
					t.Fatalf("k2 admitted %d, want 10 then a denial", got)
				}
				if mode == "rdb" {
					if _, err := rawDo(e.srv.addr(), "SAVE"); err != nil {
						t.Fatal(err)
					}
				}
				e.srv.kill()

				// The outage.
				cd := l.Stats().CacheDenials
				d, err := l.Allow(ctx, "k2")
				if err != nil || d.Allowed || l.Stats().CacheDenials != cd+1 {
					t.Fatalf("outage, k2 (cached): %+v, %v, %+v; want the cache's denial", d, err, l.Stats())
				}
				fb := 0
				for i := range 11 {
					d, err := l.Allow(ctx, "k1")
					if !errors.Is(err, ErrDegraded) {
						t.Fatalf("outage, k1 call %d: %+v, %v; want ErrDegraded", i, d, err)
					}
					if d.Allowed {
						fb++
					}
				}
				if fb != 10 {
					t.Fatalf("outage: the fallback admitted k1 %d times, want its own Burst/N = 10", fb)
				}
				if !l.Degraded() {
					t.Fatal("Degraded false during the outage")
				}

				e.srv.start()
				if !a131LibraryListed(t, e.srv.addr()) {
					t.Errorf("%s: the library was not restored with the data", mode)
				}
				a131Heal(t, l, "h")
				if l.Degraded() {
					t.Fatal("Degraded still true after successful round trips")
				}
				st := l.Stats()
				if st.ServerErrors != st.PolicyAdmits+st.PolicyDenials || st.Decisions != st.ServerCalls+st.CacheDenials ||
					st.DegradedPeriod < 1 || st.DegradedPeriod > st.ServerErrors || st.PolicyAdmits < 10 {
					t.Fatalf("Stats do not balance across the outage: %+v", st)
				}
				if got := a131Admit(t, l, "k1", 20); got != 4 {
					t.Fatalf("after the restart k1 admitted %d more, want exactly 10-6 = 4 (the persisted debt, the fallback's admissions not charged)", got)
				}
				probe := e.limiter(t, LimiterConfig{Name: "a131p", Limit: PerSecond(10, 10), Clock: clk,
					CellsPerLevel: 1000, Timeout: 2 * time.Second})
				d, err = probe.AllowN(ctx, "k2", 0)
				if err != nil || d.Remaining != 0 {
					t.Fatalf("after the restart k2 peek: %+v, %v; want Remaining 0 (persisted)", d, err)
				}
				if got := a131Admit(t, probe, "k2", 5); got != 0 {
					t.Fatalf("after the restart k2 admitted %d, want 0", got)
				}
				if got := a131Admit(t, probe, "k3", 20); got != 10 {
					t.Fatalf("fresh key admitted %d, want 10", got)
				}
			})
		}
	}
}

// TestAudit131DebugReloadMidTrafficExact: DEBUG RELOAD (the server saves
// an RDB, empties itself, functions included, and loads it back) and
// SCRIPT FLUSH run over and over while 2 instances x 3 goroutines call
// Allow on one hot key, frozen clock, Burst 40. doc.go: "Sketch.TryUpdate
// racing from N clients admits exactly the limit (no decay)"; calls are
// never retried except after replies that say no code ran. Checked: at
// no point more than Burst admissions, and once the faults stop the key
// has taken exactly Burst (each call that failed, if any, is the
// policy's denial, FailClosed, and none was applied by the server), the
// server's debt exactly Burst.
func TestAudit131DebugReloadMidTrafficExact(t *testing.T) {
	for _, lib := range []string{"rueidis", "go-redis"} {
		t.Run(lib, func(t *testing.T) {
			e := newEnv(t, lib, "standalone")
			clk := sketchtest.NewFakeClock()
			clk.Set(1_790_000_000_000)
			const burst = 40
			cfg := LimiterConfig{Name: "a131r", Limit: PerSecond(1e-3, burst), Clock: clk,
				CellsPerLevel: 1000, Timeout: 5 * time.Second}
			ls := []*Limiter{e.limiter(t, cfg), e.limiter(t, cfg)}
			admitted, failed, stop := a131Traffic(t, ls, burst, 0, time.Millisecond)
			for i := range 12 {
				if i%3 == 2 {
					if _, err := rawDo(e.srv.addr(), "SCRIPT", "FLUSH"); err != nil {
						t.Error(err)
					}
				} else if _, err := rawDo(e.srv.addr(), "DEBUG", "RELOAD"); err != nil {
					t.Error(err)
				}
				time.Sleep(3 * time.Millisecond)
			}
			stop()
			rest := a131Admit(t, ls[0], "hot", burst+1)
			if got := admitted.Load() + int64(rest); got != burst {
				t.Fatalf("admitted %d in all (%d during the reloads, %d failed calls), want exactly Burst %d",
					got, admitted.Load(), failed.Load(), burst)
			}
			d, err := ls[1].AllowN(context.Background(), "hot", 0)
			if err != nil || d.Remaining != 0 {
				t.Fatalf("peek: %+v, %v; want Remaining 0", d, err)
			}
			t.Logf("%d admitted during the reloads, %d failed calls", admitted.Load(), failed.Load())
		})
	}
}

// a131WaitReplica waits until the replica at addr reports its link up.
func a131WaitReplica(t *testing.T, addr string) {
	t.Helper()
	waitFor(t, 10*time.Second, "the replica's link", func() bool {
		v, err := rawDo(addr, "INFO", "replication")
		return err == nil && strings.Contains(fmt.Sprint(v), "master_link_status:up")
	})
}

// a131Offset reads field (an integer) from INFO replication at addr.
func a131Offset(t *testing.T, addr, field string) int64 {
	t.Helper()
	v, err := rawDo(addr, "INFO", "replication")
	if err != nil {
		t.Fatalf("INFO replication on %s: %v", addr, err)
	}
	for _, line := range strings.Split(fmt.Sprint(v), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			var n int64
			fmt.Sscan(rest, &n)
			return n
		}
	}
	return -1
}

// a131Sync waits until the replica has processed everything the primary
// has written so far (WAIT counts only its own connection's writes).
func a131Sync(t *testing.T, primary, replica *testServer) {
	t.Helper()
	want := a131Offset(t, primary.addr(), "master_repl_offset")
	waitFor(t, 10*time.Second, "the replica's offset", func() bool {
		return a131Offset(t, replica.addr(), "slave_repl_offset") >= want
	})
}

// TestAudit131ReplicaPromotedKeepsDebt: a primary and a replica; a
// limiter on the primary admits k1 6 of 10 and exhausts k2; wait until
// the replica's offset reaches the primary's, SIGKILL the primary, REPLICAOF NO ONE on the replica, and a
// new limiter (the start-up check on, CheckRefuse) on the promoted
// replica. docs/distributed.md: "With persistence or replication the
// library survives restarts and failovers like the data." Checked: the
// library is listed on the replica before any call of the new limiter;
// the limiter starts; k1 admits exactly 4 more, k2 none, a fresh key 10.
func TestAudit131ReplicaPromotedKeepsDebt(t *testing.T) {
	for _, lib := range []string{"rueidis", "go-redis"} {
		t.Run(lib, func(t *testing.T) {
			primary := startServer(t, "--repl-diskless-sync-delay", "0")
			replica := startServer(t, "--replicaof", "127.0.0.1", fmt.Sprint(primary.port))
			a131WaitReplica(t, replica.addr())
			clk := sketchtest.NewFakeClock()
			clk.Set(1_790_000_000_000)
			cfg := LimiterConfig{Name: "a131f", Limit: PerSecond(10, 10), Clock: clk,
				CellsPerLevel: 1000, Timeout: 2 * time.Second, DenyCacheCells: 256}
			l := a131Env(t, lib, primary).limiter(t, cfg)
			if got := a131Admit(t, l, "k1", 6); got != 6 {
				t.Fatalf("k1 admitted %d of 6", got)
			}
			if got := a131Admit(t, l, "k2", 20); got != 10 {
				t.Fatalf("k2 admitted %d, want 10", got)
			}
			a131Sync(t, primary, replica)
			primary.kill()
			if _, err := rawDo(replica.addr(), "REPLICAOF", "NO", "ONE"); err != nil {
				t.Fatal(err)
			}
			if !a131LibraryListed(t, replica.addr()) {
				t.Error("the library did not replicate to the replica")
			}
			l2 := a131Env(t, lib, replica).limiter(t, cfg)
			if got := a131Admit(t, l2, "k1", 20); got != 4 {
				t.Fatalf("after the failover k1 admitted %d, want exactly 4", got)
			}
			if got := a131Admit(t, l2, "k2", 5); got != 0 {
				t.Fatalf("after the failover k2 admitted %d, want 0", got)
			}
			if got := a131Admit(t, l2, "k3", 20); got != 10 {
				t.Fatalf("fresh key admitted %d, want 10", got)
			}
		})
	}
}

// a131Replica starts a primary and a replica of it, waits for the link,
// and, when load, loads the library on the primary (a limiter's start)
// and waits until the replica has it.
func a131Replica(t *testing.T, lib string, load bool) (primary, replica *testServer) {
	t.Helper()
	primary = startServer(t, "--repl-diskless-sync-delay", "0")
	replica = startServer(t, "--replicaof", "127.0.0.1", fmt.Sprint(primary.port))
	a131WaitReplica(t, replica.addr())
	if load {
		a131Env(t, lib, primary).limiter(t, LimiterConfig{Name: "a131ro", Limit: PerSecond(10, 10),
			CellsPerLevel: 1000, Timeout: 2 * time.Second})
		a131Sync(t, primary, replica)
		if !a131LibraryListed(t, replica.addr()) {
			t.Fatal("the library did not replicate")
		}
	}
	return primary, replica
}

// TestAudit131LimiterOnReadOnlyReplica: a limiter whose client reaches
// only a read-only replica (a misconfigured address, or a primary demoted
// under it) that holds the library (replicated from its primary). doc.go:
// Check "names what would make the servers unfit"; limiter.go: "When the
// server fails or times out, the Policy decides, and AllowN returns that
// decision with an error matching ErrDegraded". Checked: NewLimiter
// (CheckRefuse) fails and its error says READONLY; with CheckSkip every
// call is FailClosed's denial with ErrDegraded quoting READONLY, and
// nothing is written on the replica.
func TestAudit131LimiterOnReadOnlyReplica(t *testing.T) {
	for _, lib := range []string{"rueidis", "go-redis"} {
		t.Run(lib, func(t *testing.T) {
			_, replica := a131Replica(t, lib, true)
			cfg := LimiterConfig{Name: "a131ro", Limit: PerSecond(10, 10),
				CellsPerLevel: 1000, Timeout: 2 * time.Second}
			re := a131Env(t, lib, replica)
			if _, err := re.newLimiter(t, cfg); err == nil || !strings.Contains(err.Error(), "READONLY") {
				t.Fatalf("NewLimiter(CheckRefuse) on a replica: %v; want an error quoting READONLY", err)
			}
			cfg.ServerCheck = CheckSkip
			l := re.limiter(t, cfg)
			for i := range 3 {
				d, err := l.Allow(context.Background(), "k")
				if !errors.Is(err, ErrDegraded) || d.Allowed || d.RetryAfter != -1 ||
					!strings.Contains(err.Error(), "READONLY") {
					t.Fatalf("call %d on a replica: %+v, %v; want FailClosed's denial with ErrDegraded (READONLY)", i, d, err)
				}
			}
			if v, err := rawDo(replica.addr(), "DBSIZE"); err != nil || fmt.Sprint(v) != "0" {
				t.Fatalf("replica DBSIZE: %v, %v; want 0", v, err)
			}
		})
	}
}

// TestAudit131FixedCheckOnReplicaWithoutLibrary (audit 131; fixed at stop 64,
// the text below says what was wrong): the same read-only
// replica, but its primary never ran a limiter, so the library is on
// neither. Check tries FUNCTION LOAD on the replica, which answers
// READONLY; docs/distributed.md counts "a replica's READONLY" as fine for
// FUNCTION LOAD, and the check then reports only the call's "Function not
// found".
//
// check.go, Check's godoc: "that they run Redis Functions (it loads the
// library where it is missing; ErrNoFunctions)"; docs/distributed.md,
// "What the server must allow": "Several problems are joined
// (errors.Join); each matches one of:" ErrNoFunctions, ErrPermission,
// ErrEvictionPolicy, ErrInvalidConfig.
//
// Observed (both clients): NewLimiter returns "redis: Check: Function not
// found" (go-redis: "ERR Function not found"). The error matches none of
// the four sentinels and does not say READONLY or replica, though the
// node refused the load for exactly that reason; the same bare "Function
// not found" is the cause inside every call's ErrDegraded. An operator who
// pointed the service at a replica reads it as a Redis without Functions.
// Suggested fix: check.go:160 (loadLibrary) counts a READONLY answer to
// FUNCTION LOAD as taken and drops it; keep it (e.g. in the error
// retrying's `after` appends, check.go:93-98), so that when the retried
// call still answers "Function not found" (check.go:111, then the default
// case) the error says the node is a read-only replica, or wrap it in
// ErrNoFunctions with that reason.
func TestAudit131FixedCheckOnReplicaWithoutLibrary(t *testing.T) {
	for _, lib := range []string{"rueidis", "go-redis"} {
		t.Run(lib, func(t *testing.T) {
			_, replica := a131Replica(t, lib, false)
			cfg := LimiterConfig{Name: "a131ro", Limit: PerSecond(10, 10),
				CellsPerLevel: 1000, Timeout: 2 * time.Second}
			_, err := a131Env(t, lib, replica).newLimiter(t, cfg)
			if err == nil {
				t.Fatal("NewLimiter(CheckRefuse) on a replica without the library succeeded")
			}
			if !errors.Is(err, ErrNoFunctions) || !strings.Contains(err.Error(), "READONLY") ||
				!strings.Contains(err.Error(), "read-only replica") {
				t.Errorf("Check on a read-only replica without the library: %q is not ErrNoFunctions "+
					"saying the node is a read-only replica (READONLY)", err)
			}
		})
	}
}

// TestAudit131AOFCrashMidTrafficNoLostAdmission: appendfsync always (Redis
// writes the AOF before it replies), 2 instances (rueidis and go-redis) x
// 3 goroutines on one hot key, frozen clock, Burst 300, FailClosed; the
// server gets SIGKILL mid-traffic and restarts on the same port from its
// AOF. docs/distributed.md: "With persistence or replication the library
// survives restarts and failovers like the data"; doc.go: the sketch
// never applies a write twice, go-redis's own retries "can only
// over-count". Checked: every admission made before the crash is in the
// restarted server's debt (admitted <= Burst - Remaining: no acknowledged
// admission lost), the key then admits exactly its Remaining and no more,
// so in all at most Burst; every failed call is FailClosed's denial.
func TestAudit131AOFCrashMidTrafficNoLostAdmission(t *testing.T) {
	s := startServer(t, "--appendonly", "yes", "--appendfsync", "always")
	clk := sketchtest.NewFakeClock()
	clk.Set(1_790_000_000_000)
	const burst = 300
	cfg := LimiterConfig{Name: "a131c", Limit: PerSecond(1e-3, burst), Clock: clk,
		CellsPerLevel: 1000, Timeout: 300 * time.Millisecond}
	ls := []*Limiter{a131Env(t, "rueidis", s).limiter(t, cfg), a131Env(t, "go-redis", s).limiter(t, cfg)}
	admitted, failed, stop := a131Traffic(t, ls, 0, 5*time.Millisecond, 0)
	waitFor(t, 10*time.Second, "100 admissions", func() bool { return admitted.Load() >= 100 })
	s.kill()
	time.Sleep(20 * time.Millisecond)
	stop()
	before := admitted.Load()
	if before > burst {
		t.Fatalf("admitted %d before the crash, Burst %d", before, burst)
	}
	s.start()
	probe := a131Env(t, "rueidis", s).limiter(t, cfg)
	a131Heal(t, probe, "c")
	d, err := probe.AllowN(context.Background(), "hot", 0)
	if err != nil {
		t.Fatal(err)
	}
	if float64(before) > burst-d.Remaining {
		t.Fatalf("%d admitted before the crash, but the restarted server's debt is %v: acknowledged admissions lost",
			before, burst-d.Remaining)
	}
	rest := a131Admit(t, probe, "hot", burst+1)
	if float64(rest) != d.Remaining {
		t.Fatalf("after the restart admitted %d, Remaining said %v", rest, d.Remaining)
	}
	t.Logf("%d admitted before the crash, server debt %v after, %d failed calls", before, burst-d.Remaining, failed.Load())
}

// TestAudit131ClientKillMidTraffic: CLIENT KILL TYPE normal (every
// client connection of the server dropped, the admin's own included) runs
// over and over while 3 goroutines on each of 2 instances call Allow on
// one hot key, frozen clock, Burst 60, FailClosed. doc.go: "Calls are
// never retried by the sketch (a write is never applied twice by it)";
// "go-redis retries after a network error on its own ...; such a retry
// can only over-count"; docs/distributed.md: "Recovery needs nothing from
// the caller: rueidis reconnects". Checked: never more than Burst
// admitted; every failed call is FailClosed's denial; afterwards each
// instance answers again without error and the key ends at exactly Burst
// on the server; with rueidis (no retry of its own for FCALL) the
// admissions lost to the over-count are at most the failed calls.
func TestAudit131ClientKillMidTraffic(t *testing.T) {
	for _, lib := range []string{"rueidis", "go-redis"} {
		t.Run(lib, func(t *testing.T) {
			e := newEnv(t, lib, "standalone")
			clk := sketchtest.NewFakeClock()
			clk.Set(1_790_000_000_000)
			const burst = 60
			cfg := LimiterConfig{Name: "a131k", Limit: PerSecond(1e-3, burst), Clock: clk,
				CellsPerLevel: 1000, Timeout: 2 * time.Second}
			ls := []*Limiter{e.limiter(t, cfg), e.limiter(t, cfg)}
			admitted, failed, stop := a131Traffic(t, ls, burst, 0, 500*time.Microsecond)
			for range 10 {
				if _, err := rawDo(e.srv.addr(), "CLIENT", "KILL", "TYPE", "normal"); err != nil {
					t.Error(err)
				}
				time.Sleep(2 * time.Millisecond)
			}
			stop()
			for i, l := range ls {
				a131Heal(t, l, fmt.Sprint("k", i))
			}
			rest := a131Admit(t, ls[0], "hot", burst+1)
			total := admitted.Load() + int64(rest)
			if total > burst {
				t.Fatalf("admitted %d in all, Burst %d", total, burst)
			}
			d, err := ls[1].AllowN(context.Background(), "hot", 0)
			if err != nil || d.Remaining != 0 {
				t.Fatalf("peek: %+v, %v; want Remaining 0", d, err)
			}
			if lib == "rueidis" && burst-total > failed.Load() {
				t.Fatalf("admitted %d of %d with only %d failed calls: a call applied without an answer more often than calls failed",
					total, burst, failed.Load())
			}
			t.Logf("%d admitted during the kills, %d in all, %d failed calls", admitted.Load(), total, failed.Load())
		})
	}
}

// TestAudit131AOFRestartRealClockBound: the server's own clock (no fake
// Clock), appendfsync always, 2 goroutines calling Allow on one key at
// 20/s x Burst 4 for about 400 ms, with a SIGKILL and restart from the AOF
// in the middle. doc.go: every operation runs "on the server's clock";
// docs/distributed.md: a key is admitted at most floor(Burst + Rate x T)
// over T (audit 44's exactness), and with persistence the sketch
// "survives restarts ... like the data". Checked: the admissions over
// the whole run, outage included, are at most floor(Burst + Rate x T) for
// T measured from before the first call to after the last, and at least
// one admission happens after the restart (the key is served again).
func TestAudit131AOFRestartRealClockBound(t *testing.T) {
	s := startServer(t, "--appendonly", "yes", "--appendfsync", "always")
	const rate, burst = 20.0, 4.0
	cfg := LimiterConfig{Name: "a131t", Limit: PerSecond(rate, burst), CellsPerLevel: 1000,
		Timeout: 500 * time.Millisecond, DenyCacheCells: 256}
	l := a131Env(t, "rueidis", s).limiter(t, cfg)
	var admitted, after atomic.Int64
	var restarted atomic.Bool
	stop := make(chan struct{})
	var wg sync.WaitGroup
	start := time.Now()
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				d, err := l.Allow(context.Background(), "k")
				if err != nil && (!errors.Is(err, ErrDegraded) || d.Allowed) {
					t.Errorf("failed call: %+v, %v", d, err)
				}
				if err == nil && d.Allowed {
					admitted.Add(1)
					if restarted.Load() {
						after.Add(1)
					}
				}
				time.Sleep(time.Millisecond)
			}
		}()
	}
	time.Sleep(150 * time.Millisecond)
	s.kill()
	time.Sleep(30 * time.Millisecond)
	s.start()
	restarted.Store(true)
	time.Sleep(250 * time.Millisecond)
	close(stop)
	wg.Wait()
	elapsed := time.Since(start)
	bound := int64(burst + rate*elapsed.Seconds())
	if admitted.Load() > bound {
		t.Fatalf("admitted %d over %v, bound floor(Burst + Rate x T) = %d", admitted.Load(), elapsed, bound)
	}
	if after.Load() == 0 {
		t.Fatalf("no admission in the 250 ms after the restart (%d in all)", admitted.Load())
	}
	t.Logf("admitted %d over %v (bound %d), %d after the restart", admitted.Load(), elapsed, bound, after.Load())
}

// a131Traffic starts 3 goroutines per limiter calling Allow on "hot"
// until stop (which waits for them): each failed call must be FailClosed's
// denial (ErrDegraded, not admitted) and counts in failed, then pauses
// failPause; each admission counts in admitted, which must stay within
// burst (0: not checked); each answered call then pauses pause.
func a131Traffic(t *testing.T, ls []*Limiter, burst int64, failPause, pause time.Duration) (admitted, failed *atomic.Int64, stop func()) {
	admitted, failed = new(atomic.Int64), new(atomic.Int64)
	done := make(chan struct{})
	var wg sync.WaitGroup
	for _, l := range ls {
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-done:
						return
					default:
					}
					d, err := l.Allow(context.Background(), "hot")
					if err != nil {
						if !errors.Is(err, ErrDegraded) || d.Allowed {
							t.Errorf("failed call: %+v, %v", d, err)
						}
						failed.Add(1)
						time.Sleep(failPause)
						continue
					}
					if d.Allowed && admitted.Add(1) > burst && burst > 0 {
						t.Errorf("admitted past Burst")
					}
					time.Sleep(pause)
				}
			}()
		}
	}
	return admitted, failed, func() { close(done); wg.Wait() }
}
