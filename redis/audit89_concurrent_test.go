package redis

// Audit 89: concurrent callers through the clients' pipelining (rueidis
// auto-pipelines concurrent commands on one connection; go-redis's
// AutoPipeliner batches them), on a frozen fake clock: Limiter's
// "AllowN ... globally: across every instance ... exactly", and "Neither
// the cache nor the pre-check ever admits: the global limit stays exact"
// (doc.go). Every key's admitted tokens add up to its Burst, however the
// replies interleave.

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

const (
	audit89Keys  = 48
	audit89Burst = 9
)

// audit89Hammer runs gor goroutines over every instance, each asking for
// n = 1 + (i+g) mod 3 tokens of every key in turn, for a few rounds (96
// calls each for a single key), then drains every key serially with
// n = 1, and checks each key's admitted tokens are exactly its Burst.
func audit89Hammer(t *testing.T, ls []*Limiter, keys []string, gor int) {
	t.Helper()
	ctx := context.Background()
	got := make([]atomic.Int64, len(keys))
	var wg sync.WaitGroup
	var failed atomic.Value
	for g := range gor {
		l := ls[g%len(ls)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := range max(3, 96/len(keys)) {
				for j := range keys {
					i := (j + g*7 + round) % len(keys)
					n := 1 + (i+g)%3
					d, err := l.AllowN(ctx, keys[i], float64(n))
					if err != nil {
						failed.Store(err)
						return
					}
					if d.Allowed {
						got[i].Add(int64(n))
					}
				}
			}
		}()
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		l := ls[i%len(ls)]
		peek, err := l.AllowN(ctx, k, 0)
		if err != nil {
			t.Fatal(err)
		}
		if float64(got[i].Load())+peek.Remaining != audit89Burst {
			t.Errorf("key %q: %d tokens admitted concurrently, Remaining %v after; Burst %d", k, got[i].Load(), peek.Remaining, audit89Burst)
		}
		for {
			d, err := l.AllowN(ctx, k, 1)
			if err != nil {
				t.Fatal(err)
			}
			if !d.Allowed {
				break
			}
			got[i].Add(1)
		}
		if got[i].Load() != audit89Burst {
			t.Errorf("key %q: %d tokens admitted in all; Burst %d (frozen clock)", k, got[i].Load(), audit89Burst)
		}
	}
}

func audit89HammerKeys(prefix string) []string {
	keys := make([]string, audit89Keys)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return keys
}

// TestAudit89RedisConcurrentExact: 3 instances x 24 goroutines, one key
// and 48 keys, plain, with the deny cache, and with PreCheck; rueidis
// standalone and in the cluster (sharded there).
func TestAudit89RedisConcurrentExact(t *testing.T) {
	for _, topo := range []string{"standalone", "cluster"} {
		t.Run(topo, func(t *testing.T) {
			e := newEnv(t, "rueidis", topo)
			for ci, c := range [][2]bool{{false, false}, {true, false}, {true, true}} {
				clk := sketchtest.NewFakeClock()
				clk.Set(1_800_000_000_000)
				cfg := LimiterConfig{Name: e.ns(fmt.Sprintf("a89cc%d", ci)), Limit: PerSecond(1, audit89Burst), Clock: clk,
					Levels: 4, CellsPerLevel: 4096}
				if e.cluster != nil {
					cfg.Shards = 6
				}
				if c[0] {
					cfg.DenyCacheCells, cfg.PreCheck = 4096, c[1]
				}
				ls := []*Limiter{e.limiter(t, cfg), e.limiter(t, cfg), e.limiter(t, cfg)}
				t.Run(fmt.Sprintf("cache=%v/pre=%v/one", c[0], c[1]), func(t *testing.T) {
					audit89Hammer(t, ls, []string{"hot"}, 24)
				})
				t.Run(fmt.Sprintf("cache=%v/pre=%v/many", c[0], c[1]), func(t *testing.T) {
					audit89Hammer(t, ls, audit89HammerKeys("k"), 24)
				})
			}
		})
	}
}

// TestAudit89RedisConcurrentAutoPipelinerCluster: go-redis's
// AutoPipeliner over a ClusterClient (NewGoRedis: "Passing
// client.AutoPipeline() batches concurrent calls"), sharded over the
// cluster's slots. Since stop 63 (audit 123) Check and the library's
// load refuse such a client (it hides the nodes), so the library is
// loaded on every node here and the check skipped: the calls themselves
// (MOVED, ASK and the batches) are what this test is about.
func TestAudit89RedisConcurrentAutoPipelinerCluster(t *testing.T) {
	e := newEnv(t, "go-redis", "cluster")
	for _, n := range e.nodes() {
		if _, err := rawDo(n.addr(), "FUNCTION", "LOAD", "REPLACE", libCode); err != nil {
			t.Fatal(err)
		}
	}
	clk := sketchtest.NewFakeClock()
	clk.Set(1_800_000_000_000)
	cfg := LimiterConfig{Name: e.ns("a89ap"), Limit: PerSecond(1, audit89Burst), Clock: clk, Levels: 4, CellsPerLevel: 4096,
		Shards: 6, DenyCacheCells: 4096, PreCheck: true, ServerCheck: CheckSkip}
	var ls []*Limiter
	for range 2 {
		c := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: e.seeds(), ContextTimeoutEnabled: true})
		t.Cleanup(func() { c.Close() })
		ap, err := c.AutoPipeline()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ap.Close() })
		l, err := NewLimiterGoRedis(ap, cfg)
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	audit89Hammer(t, ls, []string{"hot"}, 16)
	audit89Hammer(t, ls, audit89HammerKeys("ap"), 16)
}
