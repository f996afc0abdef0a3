package redis

import (
	"context"
	"strings"
	"testing"
)

// TestAudit74FixedACLShards: RequiredACL's key pattern "~{Name}*" is
// documented to cover the sharded keys "{Name:<shard>}:..." too
// (docs/distributed.md's table; Sketch.Keys: "~{Name}* covers them"), but
// "{acl:0}:g" does not start with "{acl}": a user granted exactly
// RequiredACL cannot run a Limiter with Shards > 1.
func TestAudit74FixedACLShards(t *testing.T) {
	for _, lib := range []string{"rueidis", "go-redis"} {
		t.Run(lib, func(t *testing.T) {
			e := newEnv(t, lib, "standalone")
			acl := strings.ReplaceAll(RequiredACL, "{Name", "{acl")
			args := append([]string{"ACL", "SETUSER", "full", "on", ">pw"}, strings.Fields(acl+" "+connectionACL)...)
			if r, err := rawDo(e.srv.addr(), args...); err != nil || r != "OK" {
				t.Fatalf("%v: %v %v", args, r, err)
			}
			for _, shards := range []uint32{1, 2} {
				cfg := LimiterConfig{Name: "acl", Limit: PerSecond(1, 10), Shards: shards, CellsPerLevel: 64}
				l, err := limiterAs(t, e, "full", cfg)
				if err == nil {
					_, err = l.Allow(context.Background(), "k")
				}
				if err != nil {
					keys := ""
					if s, serr := newSketch(aclClient(t, e, "full"), Config{Name: "acl", Shards: shards, Hi: 1, CellsPerLevel: 64}); serr == nil {
						keys = strings.Join(s.Keys(), " ")
					}
					t.Errorf("Shards %d: a user granted exactly RequiredACL (%s): %v.\n"+
						"check.go RequiredACL \"~{Name}*\"; sketch.go Keys: \"what to grant in an ACL (~{Name}* covers them)\" - keys %s; "+
						"docs/distributed.md: \"`~{Name}*` ... the sketch's keys: `{Name}:g`, `{Name}:g:<i>`, `{Name:<shard>}:...`\"", shards, acl, err, keys)
				}
			}
		})
	}
}
