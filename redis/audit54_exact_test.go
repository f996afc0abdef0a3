package redis

// Audit 54: API.md, "Global limits run on Redis standalone and on Redis
// Cluster ... with the same exactness" as the in-process sketch, whose
// promise is "N goroutines racing TryUpdate(k, 1, 1000) with no decay
// admit exactly 1000, every run, and with every key colliding
// (CellsPerLevel=1) the total admitted over all keys never exceeds the
// limit".

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// TestAudit54RedisSketchTryUpdateExact: the server sketch's TryUpdate,
// racing from 4 clients (both libraries) x 4 goroutines, on one key and
// on 32 keys that share every cell (CellsPerLevel 1), admits exactly the
// limit, on every backend.
func TestAudit54RedisSketchTryUpdateExact(t *testing.T) {
	const limit = 300
	forEachBackend(t, func(t *testing.T, e *env) {
		for _, cells := range []uint32{4096, 1} {
			name := e.ns(fmt.Sprintf("audit54:try:%d", cells))
			var ss []*Sketch
			for i := range 4 {
				e2 := *e
				e2.lib = []string{"rueidis", "go-redis"}[i%2]
				ss = append(ss, e2.sketch(t, Config{Name: name, Levels: 3, CellsPerLevel: cells, Hi: 1e9}))
			}
			ctx := context.Background()
			var admitted atomic.Int64
			var wg sync.WaitGroup
			for i, s := range ss {
				for g := range 4 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for j := range limit / 8 {
							key := "hot"
							if cells == 1 {
								key = fmt.Sprintf("k%d", (i*4+g+j)%32)
							}
							ok, err := s.TryUpdate(ctx, key, 1, limit)
							if err != nil {
								t.Errorf("TryUpdate: %v", err)
								return
							}
							if ok {
								admitted.Add(1)
							}
						}
					}()
				}
			}
			wg.Wait()
			if a := admitted.Load(); a != limit {
				t.Errorf("M=%d: admitted %d of %d racing TryUpdate(k, 1, %d), want exactly %d", cells, a, 2*limit, limit, limit)
			}
		}
	})
}

// TestAudit54RedisLimiterCollidingExact: the Limiter's Allow, racing from
// 4 instances (both libraries, two with the deny cache and PreCheck) on
// 24 keys that share every cell (CellsPerLevel 1), admits exactly Burst
// in all, on standalone and cluster.
func TestAudit54RedisLimiterCollidingExact(t *testing.T) {
	const burst = 120
	for _, topo := range []string{"standalone", "cluster"} {
		t.Run(topo, func(t *testing.T) {
			e := newEnv(t, "rueidis", topo)
			ls := audit3Instances(t, e, 4, LimiterConfig{Name: e.ns("audit54:collide"), Limit: PerSecond(1e-6, burst), Levels: 3, CellsPerLevel: 1})
			ctx := context.Background()
			var admitted atomic.Int64
			var wg sync.WaitGroup
			for i, l := range ls {
				for g := range 4 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for j := range burst / 8 {
							d, err := l.Allow(ctx, fmt.Sprintf("user-%d", (i*7+g*3+j)%24))
							if err != nil {
								t.Errorf("Allow: %v", err)
								return
							}
							if d.Allowed {
								admitted.Add(1)
							}
						}
					}()
				}
			}
			wg.Wait()
			if a := admitted.Load(); a != burst {
				t.Errorf("admitted %d over colliding keys, want exactly Burst %d", a, burst)
			}
		})
	}
}
