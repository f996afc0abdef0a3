package redis

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit60ConcurrentOneKeyExact: one key, Every(999ms) x 50 (exact
// units: 999 units a token, 1 drained a ms), three instances on one
// server (no cache, deny cache, deny cache + PreCheck) and 8 goroutines
// asking 1 token each, on a frozen clock, under several GOMAXPROCS.
// Every admission is the server's, so their Remaining values are
// exactly Burst-1, ..., 0 once each (then 6, ..., 0); no more than the Burst is admitted,
// and after a top-up by the cache-less instance exactly the Burst is;
// every denial's RetryAfter is at least the exact 999 ms (the server's:
// exactly 999 ms) and its ResetAfter at least 49.95 s. Then 7 tokens'
// time (6993 ms) later, exactly 7 more (doc.go: "Sketch.TryUpdate racing
// from N clients admits exactly the limit"; "Neither the cache nor the
// pre-check ever admits: the global limit stays exact").
func TestAudit60ConcurrentOneKeyExact(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	run := 0
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		run++
		audit60Concurrent(t, e, fmt.Sprintf("a60c%d", run))
	})
}

// TestAudit60ConcurrentOneKeyExactCluster: the same on the shared Redis
// Cluster, with both client libraries' instances mixed (GOMAXPROCS as
// set).
func TestAudit60ConcurrentOneKeyExactCluster(t *testing.T) {
	for _, lib := range []string{"rueidis", "go-redis"} {
		t.Run(lib, func(t *testing.T) {
			e := newEnv(t, lib, "cluster")
			audit60Concurrent(t, e, e.ns("a60cc"))
		})
	}
}

func audit60Concurrent(t *testing.T, e *env, name string) {
	lim := PerSecond(1000.0/999, 50)
	{
		clk := sketchtest.NewFakeClock()
		clk.Set(1_000_000)
		cfg := LimiterConfig{Name: name, Limit: lim, Clock: clk, Timeout: 5 * time.Second}
		plain := e.limiter(t, cfg)
		cfg.DenyCacheCells = 512
		cached := e.limiter(t, cfg)
		cfg.PreCheck = true
		pre := e.limiter(t, cfg)
		insts := []*Limiter{plain, cached, pre}
		ctx := context.Background()
		phase := func(want int) {
			var mu sync.Mutex
			var rem []float64
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 20 {
						l := insts[(g+i)%3]
						d, err := l.Allow(ctx, "k")
						if err != nil {
							t.Error(err)
							return
						}
						if d.Allowed {
							mu.Lock()
							rem = append(rem, d.Remaining)
							mu.Unlock()
						} else if d.RetryAfter < 999*time.Millisecond || d.ResetAfter < 49950*time.Millisecond {
							t.Errorf("denial %+v: want RetryAfter >= 999ms, ResetAfter >= 49.95s", d)
						}
					}
				}()
			}
			wg.Wait()
			// Top up through the instance without a cache.
			for {
				d, err := plain.Allow(ctx, "k")
				if err != nil {
					t.Fatal(err)
				}
				if !d.Allowed {
					if d.RetryAfter != 999*time.Millisecond || d.ResetAfter != 49950*time.Millisecond || d.Remaining != 0 {
						t.Errorf("server denial at full debt: %+v; want RetryAfter 999ms, ResetAfter 49.95s, Remaining 0", d)
					}
					break
				}
				rem = append(rem, d.Remaining)
			}
			if len(rem) != want {
				t.Fatalf("admitted %d; want exactly %d (remaining %v)", len(rem), want, rem)
			}
			sort.Float64s(rem)
			for i, r := range rem {
				if r != float64(i) {
					t.Fatalf("Remaining of the admissions %v; want 0..%d once each", rem, want-1)
				}
			}
		}
		phase(50)
		clk.Advance(7 * 999 * time.Millisecond)
		phase(7)
	}
}
