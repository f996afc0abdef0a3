package redis

import (
	"context"
	"fmt"
	"os"
	"testing"

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
		if err := goleak.Find(
			goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*clusterClient)._refresh.func2"),
			goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo"),
		); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
