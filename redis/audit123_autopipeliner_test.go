package redis

// Audit 123: go-redis's AutoPipeliner over a ClusterClient, which doc.go
// lists among the clients ("a go-redis v9 redis.UniversalClient (Client,
// ClusterClient, Ring, or an AutoPipeliner), standalone or Redis
// Cluster") and NewGoRedis recommends ("Passing client.AutoPipeline()
// batches concurrent calls").

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"
)

// TestAudit123FixedAutoPipelinerClusterRefused (audit 123; fixed at stop
// 63, the text below says what was wrong): doc.go listed "an
// AutoPipeliner" among the clients and said that after "Function not
// found" the client "loads the library on every node it can reach ...
// and calls once more", and Check verifies "on every node the client
// knows". Over an AutoPipeliner built from a ClusterClient,
// goredisConn.nodes listed the AutoPipeliner as one node "server" (it
// hides the ClusterClient's ForEachShard), so FUNCTION LOAD, and Check's
// CONFIG GET, went to one node: after FUNCTION FLUSH on every node 6 of
// 144 AllowN over 16 shards failed with "Function not found" (FailClosed:
// degraded denials), Check failed with "ERR Function not found" on 5 of 5
// tries (so NewLimiter refused to start), and allkeys-lru on 2 of the 3
// nodes went unseen. Now such a client is refused: on a cluster
// (cluster_enabled:1) Check, NewLimiterGoRedis under CheckRefuse, and a
// call that must load the library fail with an error matching
// ErrInvalidConfig that says what to pass instead; NewGoRedis's doc says
// to build an AutoPipeliner from a *redis.Client only.
func TestAudit123FixedAutoPipelinerClusterRefused(t *testing.T) {
	e := newEnv(t, "go-redis", "cluster")
	c := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: e.seeds(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	ap, err := c.AutoPipeline()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ap.Close() })
	t.Cleanup(func() {
		for _, n := range e.nodes() {
			rawDo(n.addr(), "FUNCTION", "LOAD", "REPLACE", libCode)
		}
	})
	s, err := NewGoRedis(ap, Config{Name: e.ns("a123apc"), Hi: 10, Shards: 16, CellsPerLevel: 64})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Check(context.Background()); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "AutoPipeliner") {
		t.Errorf("Check over an AutoPipeliner on a cluster = %v; want an error matching ErrInvalidConfig naming the AutoPipeliner", err)
	}
	if _, err := NewLimiterGoRedis(ap, LimiterConfig{Name: e.ns("a123apl"), Limit: PerSecond(1, 10)}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("NewLimiterGoRedis (CheckRefuse) over an AutoPipeliner on a cluster = %v; want an error matching ErrInvalidConfig", err)
	}
	l, err := NewLimiterGoRedis(ap, LimiterConfig{Name: e.ns("a123aps"), Limit: PerSecond(1, 10), Shards: 16, CellsPerLevel: 1024, ServerCheck: CheckSkip})
	if err != nil {
		t.Fatal(err)
	}
	e.doAll(t, "FUNCTION", "FLUSH", "SYNC")
	refused := 0
	for i := range 48 {
		if _, err := l.AllowN(context.Background(), "k"+strconv.Itoa(i), 1); err != nil {
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("AllowN after FUNCTION FLUSH: %v; want the refusal (ErrInvalidConfig)", err)
			}
			refused++
		}
	}
	if refused == 0 {
		t.Error("no AllowN over 16 shards after FUNCTION FLUSH met the library's absence")
	}
}

// TestAudit123AutoPipelinerStandaloneLoads: an AutoPipeliner built from
// a *redis.Client (what NewGoRedis's doc allows) passes Check, and
// reloads the library after FUNCTION FLUSH with no failed call.
func TestAudit123AutoPipelinerStandaloneLoads(t *testing.T) {
	e := newEnv(t, "go-redis", "standalone")
	c := goredis.NewClient(&goredis.Options{Addr: e.seeds()[0], ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	ap, err := c.AutoPipeline()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ap.Close() })
	l, err := NewLimiterGoRedis(ap, LimiterConfig{Name: e.ns("a123sa"), Limit: PerSecond(1, 10)})
	if err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		e.doAll(t, "FUNCTION", "FLUSH", "SYNC")
		for i := range 8 {
			if _, err := l.AllowN(context.Background(), "r"+strconv.Itoa(round)+"k"+strconv.Itoa(i), 1); err != nil {
				t.Fatalf("AllowN after FUNCTION FLUSH over an AutoPipeliner on a standalone server: %v", err)
			}
		}
	}
}

// TestAudit123ClusterClientLibraryLoad: the same over the ClusterClient
// itself (no AutoPipeliner), which loads on every shard: no call fails.
func TestAudit123ClusterClientLibraryLoad(t *testing.T) {
	e := newEnv(t, "go-redis", "cluster")
	c := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: e.seeds(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	if failed := audit123FlushedCalls(t, e, c, "a123cc"); len(failed) > 0 {
		t.Errorf("ClusterClient: %d of 144 AllowN after FUNCTION FLUSH failed (first %q)", len(failed), failed[0])
	}
}

// audit123FlushedCalls runs 3 rounds of FUNCTION FLUSH on every node and
// 48 AllowN over 16 shards (every node's slots), and returns the keys
// whose AllowN failed with "Function not found". It leaves the library
// loaded on every node.
func audit123FlushedCalls(t *testing.T, e *env, c goredis.UniversalClient, name string) []string {
	t.Helper()
	l, err := NewLimiterGoRedis(c, LimiterConfig{Name: e.ns(name), Limit: PerSecond(1, 10), Shards: 16,
		CellsPerLevel: 1024, ServerCheck: CheckSkip})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, n := range e.nodes() {
			rawDo(n.addr(), "FUNCTION", "LOAD", "REPLACE", libCode)
		}
	})
	var failed []string
	for round := range 3 {
		e.doAll(t, "FUNCTION", "FLUSH", "SYNC")
		for i := range 48 {
			key := "r" + strconv.Itoa(round) + "k" + strconv.Itoa(i)
			if _, err := l.AllowN(context.Background(), key, 1); err != nil {
				if !strings.Contains(err.Error(), "Function not found") {
					t.Fatalf("AllowN(%q): %v", key, err)
				}
				failed = append(failed, key)
			}
		}
	}
	return failed
}
