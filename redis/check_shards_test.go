package redis

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestCheckShardsInOrder: Check runs the ACL check on many shards at once
// (checkShards) and still reports what one call after the other would:
// the lowest shard the ACL denies. The user may touch the keys of shards
// 0 to 9 and 100 to 299 only ({sh:N}), so shard 10 is the first denied,
// while shards 300 and up, checked alongside it, are denied too. With
// every shard granted, 300 shards pass; a cancelled context is an error,
// not a pass.
func TestCheckShardsInOrder(t *testing.T) {
	forEachClient(t, func(t *testing.T, e *env) {
		addr := e.srv.addr()
		acl := strings.ReplaceAll(RequiredACL, "{Name", "{sh")
		users := map[string]string{
			"allshards": acl,
			"someshards": strings.ReplaceAll(acl, "~{sh:*",
				"~{sh:[0-9]}* ~{sh:[12][0-9][0-9]}*"),
		}
		for u, rules := range users {
			args := append([]string{"ACL", "SETUSER", u, "on", "resetkeys", ">pw"}, strings.Fields(rules+" "+connectionACL)...)
			if r, err := rawDo(addr, args...); err != nil || r != "OK" {
				t.Fatalf("%v: %v, %v", args, r, err)
			}
		}
		cfg := LimiterConfig{Name: "sh", Limit: PerSecond(1e-3, 10), Shards: 400, CellsPerLevel: 16}
		l, err := limiterAs(t, e, "allshards", LimiterConfig{Name: "sh", Limit: PerSecond(1e-3, 10), Shards: 300, CellsPerLevel: 16})
		if err != nil {
			t.Fatalf("every shard granted, 300 shards: NewLimiter: %v", err)
		}
		if err := l.sk.Check(context.Background()); err != nil {
			t.Fatalf("every shard granted, 300 shards: Check: %v", err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := l.sk.Check(ctx); err == nil {
			t.Fatal("Check with a cancelled context passed")
		}
		for range 3 {
			_, err := limiterAs(t, e, "someshards", cfg)
			if !errors.Is(err, ErrPermission) {
				t.Fatalf("shards 10-99 and 300-399 denied: NewLimiter: %v; want ErrPermission", err)
			}
			if !strings.Contains(err.Error(), "{sh:10}") {
				t.Fatalf("shards 10-99 and 300-399 denied: %q does not name shard 10, the first denied", err)
			}
		}
	})
}
