package redis

import (
	"context"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// TestAudit74GoRedisFailedDial: a go-redis client whose dials failed (its
// pool starts a prober that sleeps 1 s between tries) is closed at the end
// of the test; run alone, TestMain's goleak check (retried for 3 s) must
// still pass. Several clients, so several probers.
func TestAudit74GoRedisFailedDial(t *testing.T) {
	for i := 0; i < 3; i++ {
		c := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true, DialTimeout: 100 * time.Millisecond, MaxRetries: -1})
		s, err := NewGoRedis(c, Config{Name: "leak", Hi: 1e9, CellsPerLevel: 16})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		if err := s.Update(ctx, "k", 1); err == nil {
			t.Fatal("Update on a closed port succeeded")
		}
		cancel()
		c.Close()
	}
}
