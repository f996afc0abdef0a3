package redis

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// testServer is a redis-server the tests start on a free loopback port,
// with no persistence, and stop.
type testServer struct {
	t    testing.TB
	port int
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

// redisServerPath finds redis-server on PATH. Without it the test fails
// when CI is set and is skipped, with the reason, otherwise.
func redisServerPath(t testing.TB) string {
	p, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("redis-server not found on PATH (CI is set; .ci/run installs it with apt-get install -y redis-server): %v", err)
		}
		t.Skip("redis-server not found on PATH; install it (apt-get install -y redis-server) to run the Redis tests")
	}
	return p
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startServer starts a server on a free port and registers its stop.
func startServer(t testing.TB) *testServer {
	s := &testServer{t: t, port: freePort(t), dir: t.TempDir()}
	s.start()
	t.Cleanup(s.stop)
	return s
}

func (s *testServer) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// start runs redis-server on s.port and waits until it answers PING.
func (s *testServer) start() {
	s.t.Helper()
	s.cmd = exec.Command(redisServerPath(s.t),
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", s.dir, "--daemonize", "no", "--enable-debug-command", "local",
		"--logfile", filepath.Join(s.dir, "redis.log"))
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
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	s.t.Fatalf("redis-server on %s did not answer PING within 10s; log:\n%s", s.addr(), log)
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

// client returns a rueidis client for the server, closed at cleanup.
func (s *testServer) client(t testing.TB) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:  []string{s.addr()},
		DisableCache: true,
	})
	if err != nil {
		t.Fatalf("rueidis.NewClient: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// do runs a raw command for test setup.
func do(t testing.TB, c rueidis.Client, args ...string) rueidis.RedisResult {
	t.Helper()
	return c.Do(context.Background(), c.B().Arbitrary(args...).Build())
}
