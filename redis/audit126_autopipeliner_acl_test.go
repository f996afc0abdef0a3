package redis

import (
	"context"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"
)

// TestAudit126FixedAutoPipelinerNeedsInfoACL (audit 126; fixed at stop 63, the text below says what was wrong): goredisConn.nodes
// (redis/client.go:188) now sends INFO cluster before listing the nodes
// of any AutoPipeliner, the standalone one NewGoRedis's doc recommends
// included, and returns its error. INFO is not in RequiredACL
// (redis/check.go:48; docs/distributed.md: "+config|get, or else +info",
// only for the start-up check, "not needed with CheckSkip"), so a user
// granted exactly RequiredACL over client.AutoPipeline() can no longer
// load the library: after FUNCTION FLUSH (a restart, a failover) every
// call fails with "FUNCTION LOAD: listing the nodes: NOPERM ... info",
// and Check fails with "listing the nodes" even where CONFIG GET works.
// Before stop 63 both worked. Fix: in client.go's nodes, treat an INFO
// that fails (a NOPERM at least) as "not known to be a cluster" and go
// on (or ask CLUSTER INFO/CLUSTER MYID and read its error, or list +info
// in RequiredACL and the docs' table), and do the probe only where it
// can refuse (once, not before every FUNCTION LOAD).
func TestAudit126FixedAutoPipelinerNeedsInfoACL(t *testing.T) {
	e := newEnv(t, "go-redis", "standalone")
	addr := e.srv.addr()
	acl := strings.ReplaceAll(RequiredACL, "{Name", "{a126")
	args := append([]string{"ACL", "SETUSER", "a126", "on", ">pw"}, strings.Fields(acl+" "+connectionACL)...)
	if r, err := rawDo(addr, args...); err != nil || r != "OK" {
		t.Fatalf("%v: %v, %v", args, r, err)
	}
	c := goredis.NewClient(&goredis.Options{Addr: addr, Username: "a126", Password: "pw", ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	ap, err := c.AutoPipeline()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ap.Close() })
	l, err := NewLimiterGoRedis(ap, LimiterConfig{Name: "a126", Limit: PerSecond(1, 10), ServerCheck: CheckSkip})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	e.doAll(t, "FUNCTION", "FLUSH", "SYNC")
	if _, err := l.Allow(ctx, "k"); err != nil {
		t.Errorf("Allow after FUNCTION FLUSH, user granted RequiredACL, over an AutoPipeliner of a *redis.Client: %v; want the library reloaded", err)
	}
	if err := l.Sketch().Check(ctx); err != nil && strings.Contains(err.Error(), "listing the nodes") {
		t.Errorf("Check, user granted RequiredACL, over an AutoPipeliner of a *redis.Client: %v; want no failure listing the nodes", err)
	}
}
