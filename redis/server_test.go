package redis

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// testServer is a redis-server the tests start on a free loopback port,
// with no persistence, and stop.
type testServer struct {
	t     testing.TB
	port  int
	dir   string
	extra []string // more redis-server arguments
	cmd   *exec.Cmd
	done  chan struct{}
}

// lookTool finds a Redis tool on PATH. Without it the test fails when CI
// is set and is skipped, with the reason, otherwise.
func lookTool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s not found on PATH (CI is set; .ci/run installs it with apt-get install -y redis-server): %v", name, err)
		}
		t.Skipf("%s not found on PATH; install it (apt-get install -y redis-server) to run the Redis tests", name)
	}
	return p
}

func redisServerPath(t testing.TB) string { return lookTool(t, "redis-server") }

// freePort returns a loopback port that was free a moment ago, with its
// cluster bus port (port+10000, where a cluster node also listens). Both
// are handed out once per process, so two servers of one run never race
// for the same one; another process (or an outgoing connection given
// that port) still can, which launch retries.
var usedPorts sync.Map

func freePort(t testing.TB) int {
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if p+10000 >= 65536 {
			continue
		}
		bus, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+10000))
		if err != nil {
			continue
		}
		bus.Close()
		if _, dup := usedPorts.LoadOrStore(p, true); dup {
			continue
		}
		if _, dup := usedPorts.LoadOrStore(p+10000, true); dup {
			continue
		}
		return p
	}
}

// startServer starts a standalone server on a free port, with extra
// redis-server arguments, and registers its stop.
func startServer(t testing.TB, extra ...string) *testServer {
	s := &testServer{t: t, port: freePort(t), dir: t.TempDir(), extra: extra}
	s.launch()
	t.Cleanup(s.stop)
	return s
}

// launch starts a new server (not a restart, which must keep its port),
// on another free port when its port or bus port was taken between
// freePort and the server's bind.
func (s *testServer) launch() {
	s.t.Helper()
	for range 4 {
		if !s.tryStart() {
			s.port = freePort(s.t)
			continue
		}
		return
	}
	s.start()
}

func (s *testServer) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// start runs redis-server on s.port and waits until it answers PING.
func (s *testServer) start() {
	s.t.Helper()
	if !s.tryStart() {
		s.t.Fatalf("redis-server on %s: its port or its cluster bus port is in use", s.addr())
	}
}

// tryStart is start, reporting false (the server stopped) when the
// server could not bind its port or bus port.
func (s *testServer) tryStart() bool {
	s.t.Helper()
	args := append([]string{
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", s.dir, "--daemonize", "no", "--enable-debug-command", "local",
		"--logfile", filepath.Join(s.dir, "redis.log")}, s.extra...)
	s.cmd = exec.Command(redisServerPath(s.t), args...)
	s.cmd.SysProcAttr = dieWithParent()
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("start redis-server: %v", err)
	}
	s.done = make(chan struct{})
	go func(c *exec.Cmd, done chan struct{}) { c.Wait(); close(done) }(s.cmd, s.done)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", s.addr(), 100*time.Millisecond)
		if err == nil {
			fmt.Fprint(c, "PING\r\n")
			buf := make([]byte, 7)
			c.SetReadDeadline(time.Now().Add(time.Second))
			n, _ := c.Read(buf)
			c.Close()
			if string(buf[:n]) == "+PONG\r\n" {
				return true
			}
		}
		select {
		case <-s.done: // exited: nothing more to wait for
			deadline = time.Now()
		case <-time.After(20 * time.Millisecond):
		}
	}
	log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	s.kill()
	if bytes.Contains(log, []byte("Address already in use")) {
		return false
	}
	s.t.Fatalf("redis-server on %s did not answer PING within 10s; log:\n%s", s.addr(), log)
	return false
}

// kill stops the server with SIGKILL (a crash) and waits for it.
func (s *testServer) kill() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

func (s *testServer) stop() { s.kill() }

// direct returns a rueidis client connected to this one node only (also
// when it is a cluster node), closed at cleanup.
func (s *testServer) direct(t testing.TB) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress: []string{s.addr()}, DisableCache: true, ForceSingleClient: true,
	})
	if err != nil {
		t.Fatalf("rueidis.NewClient(%s): %v", s.addr(), err)
	}
	t.Cleanup(c.Close)
	return c
}

// client returns a rueidis client for the server, closed at cleanup.
func (s *testServer) client(t testing.TB) rueidis.Client { return s.direct(t) }

// --- Redis Cluster ---

// testCluster is a Redis Cluster of 3 masters (no replicas) on loopback
// ports, made with redis-cli --cluster create.
type testCluster struct {
	nodes []*testServer
}

func (c *testCluster) seeds() []string {
	var s []string
	for _, n := range c.nodes {
		s = append(s, n.addr())
	}
	return s
}

// startCluster starts a 3-master cluster; stop must be called (tests use
// the shared one, stopped by TestMain; a crashed test binary takes its
// servers with it, see dieWithParent).
func startCluster(t testing.TB, dir string) (*testCluster, error) {
	cli := lookTool(t, "redis-cli")
	c := &testCluster{}
	for i := range 3 {
		d := filepath.Join(dir, strconv.Itoa(i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
		s := &testServer{t: t, port: freePort(t), dir: d, extra: []string{
			"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(d, "nodes.conf"),
			"--cluster-node-timeout", "5000"}}
		s.launch()
		c.nodes = append(c.nodes, s)
	}
	args := append([]string{"--cluster", "create"}, c.seeds()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	out, err := exec.Command(cli, args...).CombinedOutput()
	if err != nil {
		c.stop()
		return nil, fmt.Errorf("redis-cli --cluster create: %v\n%s", err, out)
	}
	if err := c.waitConsistent(30 * time.Second); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

func (c *testCluster) stop() {
	for _, n := range c.nodes {
		n.stop()
	}
}

// rawDo runs one command on node n with a short-lived connection (no
// client library, so usable from TestMain and from any goroutine).
func rawDo(addr string, args ...string) (any, error) {
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		return nil, err
	}
	return readRESP(newLineReader(conn))
}

// awaitAsleep returns once the server at addr no longer answers a PING
// within 50 ms (a DEBUG SLEEP sent from another goroutine has it), or
// fails the test after 5 s: a fixed head start let a late DEBUG SLEEP
// arrive after the call it was to stall (audit 156, on a loaded machine).
// Each probe is a new connection, which the server serves when it wakes.
func awaitAsleep(t *testing.T, addr string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			t.Fatalf("awaitAsleep: %v", err)
		}
		conn.SetDeadline(time.Now().Add(50 * time.Millisecond))
		_, err = conn.Write([]byte("*1\r\n$4\r\nPING\r\n"))
		if err == nil {
			_, err = readRESP(newLineReader(conn))
		}
		conn.Close()
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("awaitAsleep: the server still answers after 5 s")
}

// waitConsistent waits until every node says cluster_state:ok and every
// node maps every slot to the same owner.
func (c *testCluster) waitConsistent(within time.Duration) error {
	deadline := time.Now().Add(within)
	var last string
	for time.Now().Before(deadline) {
		ok := true
		var ref string
		for _, n := range c.nodes {
			info, err := rawDo(n.addr(), "CLUSTER", "INFO")
			if err != nil || !strings.Contains(fmt.Sprint(info), "cluster_state:ok") {
				ok, last = false, fmt.Sprintf("%s: %v %v", n.addr(), info, err)
				break
			}
			owners, err := c.slotOwners(n.addr())
			if err != nil {
				ok, last = false, err.Error()
				break
			}
			if ref == "" {
				ref = owners
			} else if owners != ref {
				ok, last = false, "nodes disagree on slot owners"
				break
			}
		}
		if ok {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("cluster not consistent after %v: %s", within, last)
}

// slotOwners is CLUSTER SLOTS from addr as a comparable string.
func (c *testCluster) slotOwners(addr string) (string, error) {
	r, err := rawDo(addr, "CLUSTER", "SLOTS")
	if err != nil {
		return "", err
	}
	rows, _ := r.([]any)
	var parts []string
	for _, row := range rows {
		f, _ := row.([]any)
		if len(f) < 3 {
			return "", fmt.Errorf("bad CLUSTER SLOTS row %v", row)
		}
		m, _ := f[2].([]any)
		if len(m) < 2 {
			return "", fmt.Errorf("bad CLUSTER SLOTS row %v", row)
		}
		parts = append(parts, fmt.Sprintf("%v-%v@%v", f[0], f[1], m[1]))
	}
	sortStrings(parts)
	return strings.Join(parts, ","), nil
}

// owner returns the node that serves slot, by CLUSTER SLOTS.
func (c *testCluster) owner(t testing.TB, slot int) *testServer {
	t.Helper()
	r, err := rawDo(c.nodes[0].addr(), "CLUSTER", "SLOTS")
	if err != nil {
		t.Fatal(err)
	}
	rows, _ := r.([]any)
	for _, row := range rows {
		f := row.([]any)
		lo, hi := f[0].(int64), f[1].(int64)
		if int64(slot) >= lo && int64(slot) <= hi {
			port := f[2].([]any)[1].(int64)
			for _, n := range c.nodes {
				if int64(n.port) == port {
					return n
				}
			}
		}
	}
	t.Fatalf("no owner for slot %d", slot)
	return nil
}

// nodeID is CLUSTER MYID of n.
func nodeID(t testing.TB, n *testServer) string {
	t.Helper()
	r, err := rawDo(n.addr(), "CLUSTER", "MYID")
	if err != nil {
		t.Fatal(err)
	}
	return r.(string)
}

// The shared cluster: started by the first test that needs one, stopped
// by TestMain.
var shared struct {
	once sync.Once
	c    *testCluster
	err  error
	dir  string
}

func sharedCluster(t testing.TB) *testCluster {
	t.Helper()
	lookTool(t, "redis-server")
	lookTool(t, "redis-cli")
	shared.once.Do(func() {
		shared.dir, shared.err = os.MkdirTemp("", "grudge-redis-cluster-")
		if shared.err == nil {
			shared.c, shared.err = startCluster(t, shared.dir)
		}
	})
	if shared.err != nil {
		t.Fatalf("start the test cluster: %v", shared.err)
	}
	return shared.c
}

func stopSharedCluster() {
	if shared.c != nil {
		shared.c.stop()
	}
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
}

// --- backends: one client library on one topology ---

// env is where a conformance test runs: a client library (rueidis or
// go-redis) on a topology (a standalone server of its own, or the shared
// cluster).
type env struct {
	t       testing.TB
	lib     string // "rueidis" or "go-redis"
	srv     *testServer
	cluster *testCluster
	admin   rueidis.Client // routes keyed commands in a cluster
	seq     int64
}

var envSeq atomic.Int64

// forEachBackend runs f as a subtest on every client library and topology.
func forEachBackend(t *testing.T, f func(t *testing.T, e *env)) {
	for _, topo := range []string{"standalone", "cluster"} {
		for _, lib := range []string{"rueidis", "go-redis"} {
			t.Run(lib+"/"+topo, func(t *testing.T) {
				f(t, newEnv(t, lib, topo))
			})
		}
	}
}

// forEachClient runs f on both client libraries against a standalone
// server each.
func forEachClient(t *testing.T, f func(t *testing.T, e *env)) {
	for _, lib := range []string{"rueidis", "go-redis"} {
		t.Run(lib, func(t *testing.T) { f(t, newEnv(t, lib, "standalone")) })
	}
}

func newEnv(t testing.TB, lib, topo string, extra ...string) *env {
	e := &env{t: t, lib: lib, seq: envSeq.Add(1)}
	if topo == "cluster" {
		e.cluster = sharedCluster(t)
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: e.cluster.seeds(), DisableCache: true})
		if err != nil {
			t.Fatalf("rueidis.NewClient(cluster): %v", err)
		}
		t.Cleanup(c.Close)
		e.admin = c
	} else {
		e.srv = startServer(t, extra...)
		e.admin = e.srv.direct(t)
	}
	return e
}

// ns makes name unique to this env (the cluster is shared by every test
// and by both libraries).
func (e *env) ns(name string) string {
	if e.cluster == nil {
		return name
	}
	return fmt.Sprintf("%s:%s:%d", name, e.lib, e.seq)
}

// conn returns a new client (an "instance") of the env's library,
// closed at cleanup.
func (e *env) conn(t testing.TB) conn {
	t.Helper()
	seeds := e.seeds()
	switch e.lib {
	case "rueidis":
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: seeds, DisableCache: true})
		if err != nil {
			t.Fatalf("rueidis.NewClient: %v", err)
		}
		t.Cleanup(c.Close)
		return rueidisConn{c}
	default:
		var c goredis.UniversalClient
		if e.cluster != nil {
			c = goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: seeds, ContextTimeoutEnabled: true})
		} else {
			c = goredis.NewClient(&goredis.Options{Addr: seeds[0], ContextTimeoutEnabled: true})
		}
		t.Cleanup(func() { c.Close() })
		return goredisConn{c}
	}
}

func (e *env) seeds() []string {
	if e.cluster != nil {
		return e.cluster.seeds()
	}
	return []string{e.srv.addr()}
}

// sketch returns a Sketch for cfg on a new client, through the public
// constructor of the env's library.
func (e *env) sketch(t testing.TB, cfg Config) *Sketch {
	t.Helper()
	var s *Sketch
	var err error
	switch c := e.conn(t).(type) {
	case rueidisConn:
		s, err = New(c.c, cfg)
	case goredisConn:
		s, err = NewGoRedis(c.c, cfg)
	}
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// limiter returns a Limiter for cfg on a new client (an instance).
func (e *env) limiter(t testing.TB, cfg LimiterConfig) *Limiter {
	t.Helper()
	l, err := e.newLimiter(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func (e *env) newLimiter(t testing.TB, cfg LimiterConfig) (*Limiter, error) {
	switch c := e.conn(t).(type) {
	case rueidisConn:
		return NewLimiter(c.c, cfg)
	case goredisConn:
		return NewLimiterGoRedis(c.c, cfg)
	}
	panic("unreachable")
}

// do runs a command on the node that holds key (routed by the admin
// client); key is the command's first argument.
func (e *env) do(t testing.TB, cmd, key string, args ...string) rueidis.RedisResult {
	t.Helper()
	c := e.admin
	return c.Do(context.Background(), c.B().Arbitrary(cmd).Keys(key).Args(args...).Build())
}

// nodes returns the servers of the env.
func (e *env) nodes() []*testServer {
	if e.cluster != nil {
		return e.cluster.nodes
	}
	return []*testServer{e.srv}
}

// doAll runs a command on every node.
func (e *env) doAll(t testing.TB, args ...string) {
	t.Helper()
	for _, n := range e.nodes() {
		if _, err := rawDo(n.addr(), args...); err != nil {
			t.Fatalf("%v on %s: %v", args, n.addr(), err)
		}
	}
}

// nodeOf returns the server that holds key.
func (e *env) nodeOf(t testing.TB, key string) *testServer {
	t.Helper()
	if e.cluster == nil {
		return e.srv
	}
	return e.cluster.owner(t, keySlot(key))
}
