package redis

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// TestMain stops the shared test cluster, then fails the run if any test
// left a goroutine behind: the clients are closed and every redis-server
// reaped at cleanup.
func TestMain(m *testing.M) {
	// go-redis logs every failed dial of the killed-server tests to
	// stderr; the tests check the errors themselves.
	goredis.SetLogger(quietLogger{})
	code := m.Run()
	stopSharedCluster()
	if code == 0 {
		// rueidis closes the connections a cluster topology refresh
		// dropped 5 s later, from a goroutine of its own (cluster.go,
		// _refresh), and after a MOVED refreshes the topology once more
		// after a delay (a singleflight DelayDo): not ours to wait for.
		//
		// go-redis, after a failed dial, probes the server from a
		// goroutine that sleeps 1 s between tries and looks at the
		// pool's Close only when it wakes (pool.go, tryDial): a closed
		// client's prober may outlive the last test by up to 1 s. So the
		// check is retried for 3 s; a goroutine that is still there then
		// is a leak. (Run alone, a test that killed its server used to
		// fail here.)
		deadline := time.Now().Add(3 * time.Second)
		for {
			err := goleak.Find(
				goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*clusterClient)._refresh.func2"),
				goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo"),
			)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				fmt.Fprintln(os.Stderr, "goleak:", err)
				code = 1
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	os.Exit(code)
}
