package redis

// Audit 123: a slot moved to a node that joined the cluster after the
// client started (a scale-out), which has no library yet.

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit123ScaleOutToFreshNode: doc.go: after "Function not found"
// ("a cluster node the slot just moved to") the client loads the library
// on every node it can reach and calls once more. A second node joins a
// running one-node cluster (CLUSTER MEET) after both clients (rueidis, go-redis
// ClusterClient) started, with no library, and the sketch's slot moves
// to it (SETSLOT IMPORTING/MIGRATING, MIGRATE, SETSLOT NODE): every
// AllowN at every step is answered by the server, and on a frozen clock
// the debt goes on exactly (Remaining 100 - 30 - i), also through a
// third instance on an AutoPipeliner (MOVED and ASK inside its batches).
func TestAudit123ScaleOutToFreshNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of its own")
	}
	clusterNode := func() *testServer {
		d := t.TempDir()
		return startServer(t, "--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(d, "nodes.conf"), "--cluster-node-timeout", "5000")
	}
	// A one-node cluster holding every slot.
	c := &testCluster{nodes: []*testServer{clusterNode()}}
	if r, err := rawDo(c.nodes[0].addr(), "CLUSTER", "ADDSLOTSRANGE", "0", "16383"); err != nil || r != "OK" {
		t.Fatal(r, err)
	}
	if err := c.waitConsistent(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	clk := sketchtest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	name := "a123nn"
	slot := keySlot("{" + name + "}")
	src := c.owner(t, slot)
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: c.seeds(), DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	gc := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: c.seeds(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { gc.Close() })
	cfg := LimiterConfig{Name: name, Limit: PerSecond(1, 100), Clock: clk, CellsPerLevel: 1024}
	lr, err := NewLimiter(rc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	lg, err := NewLimiterGoRedis(gc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// And an AutoPipeliner over a ClusterClient of its own (after the
	// other two at each step, which load the library on the new node: it
	// cannot, and Check refuses it, TestAudit123FixedAutoPipelinerClusterRefused;
	// so CheckSkip, for its calls' MOVED and ASK).
	gc2 := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: c.seeds(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { gc2.Close() })
	ap, err := gc2.AutoPipeline()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ap.Close() })
	cfgAP := cfg
	cfgAP.ServerCheck = CheckSkip
	la, err := NewLimiterGoRedis(ap, cfgAP)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if d, err := lr.AllowN(ctx, "k", 30); err != nil || !d.Allowed {
		t.Fatal(d, err)
	}
	// A second node joins.
	n4 := clusterNode()
	if r, err := rawDo(n4.addr(), "CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(c.nodes[0].port)); err != nil || r != "OK" {
		t.Fatal(r, err)
	}
	c.nodes = append(c.nodes, n4)
	waitFor(t, 20*time.Second, "the new node known", func() bool {
		for _, n := range c.nodes {
			r, err := rawDo(n.addr(), "CLUSTER", "NODES")
			if err != nil || len(splitLines(r.(string))) != 2 {
				return false
			}
		}
		return true
	})
	if err := c.waitConsistent(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	want := 70.0
	try := func(what string) {
		for i, l := range []*Limiter{lr, lg, la} {
			want--
			d, err := l.AllowN(ctx, "k", 1)
			if err != nil || !d.Allowed || d.Remaining != want {
				t.Errorf("%s, client %d: AllowN = %+v, %v; want admitted by the server, Remaining %v", what, i, d, err, want)
			}
		}
	}
	moveBySetslot(t, c, slot, src, n4, func(step int, key string) { try("step " + strconv.Itoa(step)) })
	try("after the move")
	try("after the move, again")
	if r, err := rawDo(n4.addr(), "FUNCTION", "LIST"); err != nil || len(r.([]any)) != 1 {
		t.Errorf("FUNCTION LIST on the new node = %v, %v; want the library", r, err)
	}
}

func splitLines(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			if i > start {
				out = append(out, s[start:i])
			}
			start = i + 1
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}
