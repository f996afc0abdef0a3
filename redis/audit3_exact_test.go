package redis

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

// audit3Instances returns k Limiters for cfg, each on a client of its
// own (separate service instances), alternating rueidis and go-redis,
// every other one with the deny cache and pre-check.
func audit3Instances(t *testing.T, e *env, k int, cfg LimiterConfig) []*Limiter {
	t.Helper()
	var ls []*Limiter
	for i := range k {
		e2 := *e
		e2.lib = []string{"rueidis", "go-redis"}[i%2]
		c := cfg
		if i%4 >= 2 {
			c.DenyCacheCells, c.PreCheck = 1024, true
		}
		ls = append(ls, e2.limiter(t, c))
	}
	return ls
}

// TestAudit3ExactMixedSizes: "AllowN reports whether n tokens may be
// taken for key now, globally: across every instance sharing the server
// sketch, exactly", and "Sketch.TryUpdate racing from N clients admits
// exactly the limit (no decay)". 4 instances (both client libraries, two
// with the deny cache and pre-check: "Neither the cache nor the pre-check
// ever admits: the global limit stays exact") x 4 goroutines race AllowN
// on one key with sizes 0.25, 0.5, 1, 2 and 3 (float32-exact) at Rate
// 1e-6/s (no refill to speak of): the admitted sizes never add up past
// Burst, and once every goroutine has seen denials, a tail of 0.25s fills
// the bucket to exactly Burst. Standalone and on the cluster.
func TestAudit3ExactMixedSizes(t *testing.T) {
	for _, topo := range []string{"standalone", "cluster"} {
		t.Run(topo, func(t *testing.T) {
			e := newEnv(t, "rueidis", topo)
			const burst = 97.0
			ls := audit3Instances(t, e, 4, LimiterConfig{Name: e.ns("audit3:mixed"), Limit: PerSecond(1e-6, burst)})
			sizes := []float64{0.25, 0.5, 1, 2, 3}
			var quarters atomic.Int64 // admitted total, in quarter tokens
			var wg sync.WaitGroup
			ctx := context.Background()
			for i, l := range ls {
				for g := range 4 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						rng := rand.New(rand.NewPCG(uint64(i), uint64(g)))
						denials := 0
						for denials < 20 {
							n := sizes[rng.IntN(len(sizes))]
							d, err := l.AllowN(ctx, "hot", n)
							if err != nil {
								t.Errorf("AllowN: %v", err)
								return
							}
							if d.Allowed {
								if q := quarters.Add(int64(n * 4)); q > burst*4 {
									t.Errorf("admitted %v tokens in all; Burst is %v", float64(q)/4, burst)
								}
							} else {
								denials++
							}
						}
					}()
				}
			}
			wg.Wait()
			// The tail: quarters until the server denies, from each instance
			// in turn.
			for i := 0; ; i++ {
				d, err := ls[i%len(ls)].AllowN(ctx, "hot", 0.25)
				if err != nil {
					t.Fatal(err)
				}
				if !d.Allowed {
					break
				}
				quarters.Add(1)
				if i > 4*burst {
					t.Fatal("the tail never ends")
				}
			}
			if got := float64(quarters.Load()) / 4; got != burst {
				t.Fatalf("admitted %v tokens in all; want exactly Burst %v", got, burst)
			}
		})
	}
}

// TestAudit3ExactShardedCluster: the same promise with Config.Shards 3
// on the cluster, its 3 shards ("{Name:<shard>}:...") on the 3 masters, 48 keys, 6 instances x 3 goroutines,
// Allow at random keys: every key ends at exactly Burst admissions and
// none ever passes it; no call fails.
func TestAudit3ExactShardedCluster(t *testing.T) {
	e := newEnv(t, "rueidis", "cluster")
	const keys, burst = 48, 13
	// A name whose 3 shards are on 3 different masters.
	var name string
	for i := 0; name == ""; i++ {
		cand := e.ns("audit3:shards:" + strconv.Itoa(i))
		owners := map[*testServer]bool{}
		for s := range 3 {
			owners[e.cluster.owner(t, keySlot("{"+cand+":"+strconv.Itoa(s)+"}:g"))] = true
		}
		if len(owners) == 3 {
			name = cand
		}
	}
	ls := audit3Instances(t, e, 6, LimiterConfig{Name: name, Limit: PerSecond(1e-6, burst), Shards: 3, CellsPerLevel: 4096})
	for s, k := range ls[0].Sketch().Keys() {
		if want := "{" + name + ":" + strconv.Itoa(s) + "}:g"; k != want {
			t.Fatalf("Sketch.Keys()[%d] = %q; the doc says %q", s, k, want)
		}
	}
	var counts [keys]atomic.Int64
	var wg sync.WaitGroup
	ctx := context.Background()
	for i, l := range ls {
		for g := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(i), uint64(g)+100))
				for range 3 * keys * burst / (len(ls) * 3) {
					k := rng.IntN(keys)
					d, err := l.Allow(ctx, strconv.Itoa(k))
					if err != nil {
						t.Errorf("Allow: %v", err)
						return
					}
					if d.Allowed {
						if n := counts[k].Add(1); n > burst {
							t.Errorf("key %d admitted %d times; Burst %d", k, n, burst)
						}
					}
				}
			}()
		}
	}
	wg.Wait()
	// Fill what the random walk left, round-robin over the instances.
	for k := range keys {
		for i := 0; ; i++ {
			d, err := ls[i%len(ls)].Allow(ctx, strconv.Itoa(k))
			if err != nil {
				t.Fatal(err)
			}
			if !d.Allowed {
				break
			}
			counts[k].Add(1)
			if i > 2*burst {
				t.Fatalf("key %d: the tail never ends", k)
			}
		}
	}
	for k := range keys {
		if got := counts[k].Load(); got != burst {
			t.Errorf("key %d admitted %d; want exactly %d", k, got, burst)
		}
	}
	for i, l := range ls {
		if st := l.Stats(); st.ServerErrors != 0 {
			t.Errorf("instance %d: %+v", i, st)
		}
	}
}
