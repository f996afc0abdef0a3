package redis

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/core"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// Audit 133: a review of stop 64's redis changes (typed-nil clients,
// the zero Sketch's and Limiter's panics, READONLY in retrying).

// a133ServerErr is a server's error reply for the fake conn.
type a133ServerErr struct{ msg string }

func (e a133ServerErr) Error() string { return e.msg }

// a133Node is one fake node: FUNCTION LOAD answers load (nil: taken).
type a133Node struct {
	address string
	load    error
	took    *atomic.Bool // set when load is nil and FUNCTION LOAD ran
}

func (n a133Node) addr() string { return n.address }
func (n a133Node) functionLoad(context.Context, string) error {
	if n.load == nil && n.took != nil {
		n.took.Store(true)
	}
	return n.load
}
func (n a133Node) configGet(context.Context, string) (string, error) {
	return "", errors.New("a133: not served")
}
func (n a133Node) info(context.Context, string) (string, error) {
	return "", errors.New("a133: not served")
}

// a133Conn is a client over the fake nodes: FCALL answers "ERR Function
// not found" until a node flagged took has taken the library, then "ok".
type a133Conn struct {
	ns    []node
	took  *atomic.Bool
	calls atomic.Int64
}

func (c *a133Conn) fcall(context.Context, string, []string, []string) (string, error) {
	c.calls.Add(1)
	if c.took != nil && c.took.Load() {
		return "ok", nil
	}
	return "", a133ServerErr{"ERR Function not found"}
}
func (c *a133Conn) fcallStrings(context.Context, string, []string, []string) ([]string, error) {
	return nil, a133ServerErr{"ERR Function not found"}
}
func (c *a133Conn) nodes(context.Context) ([]node, error) { return c.ns, nil }
func (c *a133Conn) concurrent() int                       { return 1 }
func (c *a133Conn) serverError(err error) (string, bool) {
	var se a133ServerErr
	if errors.As(err, &se) {
		return se.msg, true
	}
	return "", false
}

const (
	a133ReadOnly = "READONLY You can't write against a read only replica."
	a133NoPerm   = "NOPERM User svc has no permissions to run the 'function|load' command"
	a133OOM      = "OOM command not allowed when used memory > 'maxmemory'."
)

func a133Fcall(t *testing.T, c *a133Conn) error {
	t.Helper()
	s, err := newSketch(c, Config{Name: "a133", Hi: 1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.fcall(context.Background(), s.keys[0], []string{"Q"})
	return err
}

// TestAudit133FixedReadOnlyReplicaBlamedForPrimaryLoadFailure (audit 133; fixed at stop 64,
// the text below says what was wrong): a client
// that knows a primary and its replica (a rueidis or go-redis
// ClusterClient: client.go's conn.nodes lists "primaries and, where the
// client tracks them, replicas"), whose primary refuses FUNCTION LOAD for
// a reason of its own (its ACL lacks function|load, or it is out of
// memory), while the replica answers READONLY as replicas always do.
//
// docs/distributed.md (stop 64): "A call that still finds no library after
// a load a node refused with READONLY (a client pointed at a read-only
// replica whose primary never loaded it) fails with ErrNoFunctions naming
// the replica." ErrNoFunctions: "the server has no Redis Functions
// (FUNCTION LOAD and FCALL, Redis 7.0 or later)".
//
// Observed: the call ran on the primary, not on a replica, and the
// client is not pointed at a replica; yet the error is ErrNoFunctions
// saying "FUNCTION LOAD was refused with READONLY by replica:6380, a
// read-only replica ...: point the client at the primary", the primary's
// real cause (NOPERM, ErrPermission; OOM) only in the "(after loading the
// library: ...)" tail. Before stop 64 the same call matched ErrPermission
// only (check.go's default case). In a Redis Cluster with replicas every
// reload records READONLY replicas, so every primary-side load failure
// is now reported as a replica misconfiguration.
//
// Suggested fix (redis/check.go:133): take the replica branch only when
// no other node failed the load (`len(readOnly) > 0 && loadErr == nil`),
// or only when the nodes that refused with READONLY are all the nodes
// (the client reaches replicas only); otherwise keep the default case.
func TestAudit133FixedReadOnlyReplicaBlamedForPrimaryLoadFailure(t *testing.T) {
	for _, c := range []struct {
		name    string
		primary string
		want    error // the sentinel the primary's refusal matches (nil: none)
	}{
		{"NOPERM", a133NoPerm, ErrPermission},
		{"OOM", a133OOM, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn := &a133Conn{ns: []node{
				a133Node{address: "primary:6379", load: a133ServerErr{c.primary}},
				a133Node{address: "replica:6380", load: a133ServerErr{a133ReadOnly}},
			}}
			err := a133Fcall(t, conn)
			if err == nil {
				t.Fatal("the call succeeded without a library")
			}
			if c.want != nil && !errors.Is(err, c.want) {
				t.Errorf("the primary's refusal is lost: %v does not match %v", err, c.want)
			}
			if !strings.Contains(err.Error(), c.primary) {
				t.Errorf("the primary's refusal %q is not in %q", c.primary, err)
			}
			if errors.Is(err, ErrNoFunctions) || strings.Contains(err.Error(), "point the client at the primary") {
				t.Errorf("the primary refused the load (%s) and the call ran there, but the error blames the read-only replica: %v", c.name, err)
			}
		})
	}
}

// TestAudit133ReadOnlyCases: the cases the READONLY branch is for, and
// those it must leave alone: a client reaching only a replica gets
// ErrNoFunctions naming it (audit 131's fix); a primary that takes the
// library beside a replica that answers READONLY: the retried call
// succeeds (two FCALLs, no error); a primary that refuses the load with
// NOPERM and no replica: ErrPermission, not ErrNoFunctions, and no
// READONLY text; a network error is never retried.
func TestAudit133ReadOnlyCases(t *testing.T) {
	// A replica alone.
	conn := &a133Conn{ns: []node{a133Node{address: "replica:6380", load: a133ServerErr{a133ReadOnly}}}}
	err := a133Fcall(t, conn)
	if !errors.Is(err, ErrNoFunctions) || !strings.Contains(err.Error(), "replica:6380") || !strings.Contains(err.Error(), "READONLY") {
		t.Errorf("replica alone: %v; want ErrNoFunctions naming replica:6380 (READONLY)", err)
	}
	if n := conn.calls.Load(); n != 2 {
		t.Errorf("replica alone: %d FCALLs, want 2 (one retry after the load)", n)
	}
	// A primary that takes it, and its replica.
	took := new(atomic.Bool)
	conn = &a133Conn{took: took, ns: []node{
		a133Node{address: "primary:6379", took: took},
		a133Node{address: "replica:6380", load: a133ServerErr{a133ReadOnly}},
	}}
	if err := a133Fcall(t, conn); err != nil || conn.calls.Load() != 2 {
		t.Errorf("primary + replica: %v after %d FCALLs; want nil after 2", err, conn.calls.Load())
	}
	// A primary that refuses it, no replica.
	conn = &a133Conn{ns: []node{a133Node{address: "primary:6379", load: a133ServerErr{a133NoPerm}}}}
	err = a133Fcall(t, conn)
	if !errors.Is(err, ErrPermission) || errors.Is(err, ErrNoFunctions) || strings.Contains(err.Error(), "READONLY") {
		t.Errorf("primary refusing with NOPERM: %v; want ErrPermission only, no READONLY", err)
	}
	// The library already there on one node (another instance loaded it).
	conn = &a133Conn{took: took, ns: []node{a133Node{address: "primary:6379", load: a133ServerErr{"ERR Library 'grudge' already exists"}}}}
	took.Store(true)
	if err := a133Fcall(t, conn); err != nil {
		t.Errorf("library present: %v", err)
	}
}

// TestAudit133NilClientKinds: core.IsNil (the constructors' nil check) refuses a nil interface and a nil
// pointer, map, slice, func or chan behind it, and nothing else: a struct
// value, a non-nil pointer, map or func, and go-redis's real clients
// (a *Client, a *ClusterClient, a *Ring, an AutoPipeliner) are valid; a
// go-redis AutoPipeliner and a UniversalClient implemented by a struct
// value (wrapping a client) build a Sketch and a Limiter.
func TestAudit133NilClientKinds(t *testing.T) {
	type st struct{ x int }
	var nilMap map[string]int
	var nilFunc func()
	var nilPtr *st
	var nilSlice []int
	var nilChan chan int
	for _, c := range []struct {
		name string
		v    any
		want bool
	}{
		{"nil", nil, true},
		{"nil pointer", nilPtr, true},
		{"nil map", nilMap, true},
		{"nil func", nilFunc, true},
		{"nil slice", nilSlice, true},
		{"nil chan", nilChan, true},
		{"struct value", st{1}, false},
		{"zero struct value", st{}, false},
		{"pointer", &st{}, false},
		{"map", map[string]int{}, false},
		{"func", func() {}, false},
		{"int", 0, false},
		{"string", "", false},
	} {
		if got := core.IsNil(c.v); got != c.want {
			t.Errorf("core.IsNil(%s) = %v, want %v", c.name, got, c.want)
		}
	}
	gc := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true, MaxRetries: -1,
		DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = gc.Close() })
	cc := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = cc.Close() })
	ring := goredis.NewRing(&goredis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = ring.Close() })
	ap, err := gc.AutoPipeline()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ap.Close() })
	cfg := Config{Name: "a133", Hi: 1}
	lcfg := LimiterConfig{Name: "a133", Limit: PerSecond(1, 1), ServerCheck: CheckSkip}
	for _, c := range []struct {
		name string
		cl   goredis.UniversalClient
	}{
		{"*Client", gc}, {"*ClusterClient", cc}, {"*Ring", ring}, {"AutoPipeliner", ap},
		{"struct value wrapping a client", a133Wrap{gc}},
	} {
		if core.IsNil(c.cl) {
			t.Errorf("core.IsNil(%s) = true", c.name)
		}
		if _, err := NewGoRedis(c.cl, cfg); err != nil {
			t.Errorf("NewGoRedis(%s): %v", c.name, err)
		}
		if _, err := NewLimiterGoRedis(c.cl, lcfg); err != nil {
			t.Errorf("NewLimiterGoRedis(%s): %v", c.name, err)
		}
	}
	// The error for a typed nil is the untyped nil's: ErrInvalidConfig,
	// saying the client is nil.
	_, err = NewGoRedis((*goredis.Client)(nil), cfg)
	_, err2 := NewGoRedis(nil, cfg)
	if !errors.Is(err, ErrInvalidConfig) || err == nil || err2 == nil || err.Error() != err2.Error() || !strings.Contains(err.Error(), "nil") {
		t.Errorf("typed nil %v, nil %v; want the same ErrInvalidConfig naming a nil client", err, err2)
	}
}

// a133Wrap is a UniversalClient implemented by a struct value.
type a133Wrap struct{ goredis.UniversalClient }

// TestAudit133RueidisClientNotNil: a client rueidis.NewClient built (one
// server) is not taken for a nil one: New and NewLimiter (CheckSkip)
// build over it, and a call goes through.
func TestAudit133RueidisClientNotNil(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a redis-server")
	}
	srv := startServer(t)
	c := srv.direct(t)
	if core.IsNil(c) {
		t.Fatal("core.IsNil(rueidis.NewClient) = true")
	}
	s, err := New(c, Config{Name: "a133r", Hi: 10})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateAndQuery(context.Background(), "k", 1); err != nil {
		t.Fatal(err)
	}
	l, err := NewLimiter(c, LimiterConfig{Name: "a133rl", Limit: PerSecond(10, 10), ServerCheck: CheckSkip})
	if err != nil {
		t.Fatal(err)
	}
	if d, err := l.Allow(context.Background(), "k"); err != nil || !d.Allowed {
		t.Fatalf("Allow: %+v, %v", d, err)
	}
}

// TestAudit133ZeroValuesPanicFirst: the zero Sketch's and Limiter's
// panics fire before anything else is looked at (a bad delta or n on a
// zero value panics either way, never a nil dereference), and the
// accessors that do not decide (Keys, Config, MemoryBytes, Limit,
// Sketch, Degraded, Stats, Policies) answer on the zero values without
// panicking; a Limiter built by NewLimiter never takes the zero path.
func TestAudit133ZeroValuesPanicFirst(t *testing.T) {
	ctx := context.Background()
	var zs Sketch
	var zl Limiter
	for name, f := range map[string]func(){
		"Sketch.TryUpdate NaN": func() { _, _ = zs.TryUpdate(ctx, "k", math.NaN(), 2) },
		"Sketch.Update NaN":    func() { _ = zs.Update(ctx, "k", math.NaN()) },
		"Sketch.Query":         func() { _, _ = zs.Query(ctx, "k") },
		"Limiter.AllowN -1":    func() { _, _ = zl.AllowN(ctx, "k", -1) },
		"Limiter.Decide 0":     func() { _, _ = zl.DecideContext(ctx, "k", 0) },
		"Limiter.Decide 1":     func() { _, _ = zl.DecideContext(ctx, "k", 1) },
	} {
		msg := a133Panic(f)
		if !strings.HasPrefix(msg, "redis: ") || strings.Contains(msg, "runtime error") {
			t.Errorf("%s: panic %q, want the package's own \"redis: ...\" panic", name, msg)
		}
	}
	for name, f := range map[string]func(){
		"Sketch.Keys":          func() { _ = zs.Keys() },
		"Sketch.Config":        func() { _ = zs.Config() },
		"Sketch.MemoryBytes":   func() { _ = zs.MemoryBytes() },
		"Limiter.Limit":        func() { _ = zl.Limit() },
		"Limiter.Sketch":       func() { _ = zl.Sketch() },
		"Limiter.Degraded":     func() { _ = zl.Degraded() },
		"Limiter.Stats":        func() { _ = zl.Stats() },
		"Limiter.Policies":     func() { _ = zl.Policies() },
		"nil Limiter.Policies": func() { _ = (*Limiter)(nil).Policies() },
	} {
		if msg := a133Panic(f); msg != "" {
			t.Errorf("%s on the zero value panicked: %s", name, msg)
		}
	}
	// A real one over a down server: the zero checks let it through to
	// its policy (FailOpen admits with ErrDegraded).
	gc := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true, MaxRetries: -1,
		DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { _ = gc.Close() })
	l, err := NewLimiterGoRedis(gc, LimiterConfig{Name: "a133z", Limit: PerSecond(1, 1), ServerCheck: CheckSkip,
		Policy: FailOpen, Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if msg := a133Panic(func() {
		d, err := l.Allow(ctx, "k")
		if !d.Allowed || !errors.Is(err, ErrDegraded) {
			t.Errorf("FailOpen over a down server: %+v, %v", d, err)
		}
		if err := l.Sketch().Update(ctx, "k", 1); err == nil {
			t.Errorf("Sketch().Update over a down server: nil error")
		}
	}); msg != "" {
		t.Errorf("a built limiter panicked: %s", msg)
	}
}

func a133Panic(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
			if msg == "" {
				msg = "empty panic"
			}
		}
	}()
	f()
	return ""
}

// TestAudit133FixedClusterReplicasBlamedForACL (audit 133; fixed at stop 64,
// the text below says what was wrong): the fake-conn finding
// above on a real Redis Cluster of 3 primaries with a replica each
// (redis-cli --cluster create --cluster-replicas 1), through rueidis's
// cluster client, whose Nodes() lists the replicas: the primaries' ACL
// denies FUNCTION LOAD (ACL SETUSER default -function|load: the operator
// loads the library; the replicas' users may run it, and answer
// READONLY). The call runs on a primary, through a cluster client that
// reaches every primary; the error still says the library "was refused
// with READONLY by <the three replicas>, a read-only replica ...: point
// the client at the primary" and matches ErrNoFunctions. Skipped under
// -short (six servers).
func TestAudit133FixedClusterReplicasBlamedForACL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts six redis-servers")
	}
	cli := lookTool(t, "redis-cli")
	dir := t.TempDir()
	c := &testCluster{}
	for i := range 6 {
		d := filepath.Join(dir, strconv.Itoa(i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		s := &testServer{t: t, port: freePort(t), dir: d, extra: []string{
			"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(d, "nodes.conf"),
			"--cluster-node-timeout", "5000"}}
		s.launch()
		t.Cleanup(s.stop)
		c.nodes = append(c.nodes, s)
	}
	args := append([]string{"--cluster", "create"}, c.seeds()...)
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	if err := c.waitConsistent(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	var primaries, replicas []string
	deadline := time.Now().Add(30 * time.Second)
	for {
		primaries, replicas = nil, nil
		for _, n := range c.nodes {
			v, err := rawDo(n.addr(), "ROLE")
			if err != nil {
				t.Fatal(err)
			}
			role := fmt.Sprint(v)
			switch {
			case strings.Contains(role, "master"):
				primaries = append(primaries, n.addr())
			case strings.Contains(role, "connected"):
				replicas = append(replicas, n.addr())
			}
		}
		if len(primaries) == 3 && len(replicas) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("roles: primaries %v, synced replicas %v", primaries, replicas)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Every node's CLUSTER SLOTS lists the replicas (gossip lags ROLE).
	for _, n := range c.nodes {
		for {
			sl, err := rawDo(n.addr(), "CLUSTER", "SLOTS")
			if err != nil {
				t.Fatal(err)
			}
			all := true
			for _, m := range c.nodes {
				all = all && strings.Contains(fmt.Sprint(sl), " "+strconv.Itoa(m.port)+" ")
			}
			if all {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("CLUSTER SLOTS on %s never listed every node: %v", n.addr(), sl)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	for _, p := range primaries {
		if _, err := rawDo(p, "ACL", "SETUSER", "default", "-function|load"); err != nil {
			t.Fatalf("ACL SETUSER on %s: %v", p, err)
		}
	}
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: c.seeds(), DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	if n := len(rc.Nodes()); n != 6 {
		t.Fatalf("the cluster client knows %d nodes, want the 6", n)
	}
	s, err := New(rc, Config{Name: "a133c", Hi: 10})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = s.Update(ctx, "k", 1)
	if err == nil {
		t.Fatal("Update succeeded though no node could load the library")
	}
	t.Logf("primaries %v, replicas %v: %v", primaries, replicas, err)
	if !errors.Is(err, ErrPermission) {
		t.Errorf("the primaries' NOPERM is lost: %v", err)
	}
	if errors.Is(err, ErrNoFunctions) || strings.Contains(err.Error(), "point the client at the primary") {
		t.Errorf("a cluster client reaching every primary, whose ACL denies FUNCTION LOAD, is told it points at a read-only replica: %v", err)
	}
}
