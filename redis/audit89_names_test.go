package redis

// Audit 89: key naming. Config.Name: "The server keys are "{Name}:g", or
// with rotation the ring "{Name}:g:0" .. "{Name}:g:<Generations-1>", and
// "{Name:<shard>}:..." when Shards > 1: the braces are a Redis Cluster
// hash tag, so all of a shard's keys share one slot, and every call
// declares all of them"; and its warning that a sharded sketch's tags
// "Name:0" .. are shared with a sketch named so.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit89RedisClusterNamesOneSlot: names that look like shard tags,
// hold glob characters, spaces and non-ASCII, sharded and rotating: the
// server's CLUSTER KEYSLOT puts every key of a shard in one slot, the
// keys are those documented, and calls on every shard succeed in the
// cluster on both clients with estimates never below the truth.
func TestAudit89RedisClusterNamesOneSlot(t *testing.T) {
	ctx := context.Background()
	for _, lib := range []string{"rueidis", "go-redis"} {
		t.Run(lib, func(t *testing.T) {
			e := newEnv(t, lib, "cluster")
			for ni, base := range []string{"7", "rl:12", "x:0:3", "a*b?[c]\\", "ü ñ:9"} {
				for _, shards := range []uint32{1, 5} {
					name := e.ns(base)
					cfg := Config{Name: name, Shards: shards, Levels: 2, CellsPerLevel: 32, Hi: 1e6, Period: time.Hour, Generations: 3}
					if ni%2 == 1 {
						cfg.Period, cfg.Generations = 0, 0
					}
					s := e.sketch(t, cfg)
					keys := s.Keys()
					gens := 1
					if cfg.Period > 0 {
						gens = 3
					}
					if len(keys) != int(shards)*gens {
						t.Fatalf("%q: Keys %q; want %d x %d", name, keys, shards, gens)
					}
					for i, k := range keys {
						sh, g := i/gens, i%gens
						tag := "{" + name + "}"
						if shards > 1 {
							tag = fmt.Sprintf("{%s:%d}", name, sh)
						}
						want := tag + ":g"
						if cfg.Period > 0 {
							want = fmt.Sprintf("%s:g:%d", tag, g)
						}
						if k != want {
							t.Fatalf("%q shard %d generation %d: key %q; want %q", name, sh, g, k, want)
						}
						slot, err := rawDo(e.cluster.nodes[0].addr(), "CLUSTER", "KEYSLOT", k)
						if err != nil {
							t.Fatal(err)
						}
						first, _ := rawDo(e.cluster.nodes[0].addr(), "CLUSTER", "KEYSLOT", keys[sh*gens])
						if slot != first {
							t.Fatalf("%q: key %q in slot %v, its shard's first key %q in %v", name, k, slot, keys[sh*gens], first)
						}
					}
					for i := range 40 {
						k := fmt.Sprintf("{u}%d", i)
						v, err := s.UpdateAndQuery(ctx, k, float64(i+1))
						if err != nil {
							t.Fatalf("%q: UpdateAndQuery(%q): %v", name, k, err)
						}
						if v < float64(i+1) {
							t.Fatalf("%q: UpdateAndQuery(%q) = %v; below %d", name, k, v, i+1)
						}
					}
					for _, k := range keys {
						if n, _ := e.do(t, "EXISTS", k).ToInt64(); n != 1 {
							t.Fatalf("%q: key %q does not exist after 40 writes over every shard", name, k)
						}
						e.do(t, "DEL", k)
					}
				}
			}
		})
	}
}

// TestAudit89RedisShardTagSharedAsDocumented: Config.Name's warning holds
// as written: a sharded "login" and a sketch named "login:0" share shard
// 0's string (a key of shard 0 charged through one is denied through the
// other), and not shard 1's.
func TestAudit89RedisShardTagSharedAsDocumented(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	clk := sketchtest.NewFakeClock()
	clk.Set(1_800_000_000_000)
	ctx := context.Background()
	lim := PerSecond(1, 5)
	sharded := e.limiter(t, LimiterConfig{Name: "login", Limit: lim, Shards: 2, Levels: 2, CellsPerLevel: 64, Clock: clk})
	plain := e.limiter(t, LimiterConfig{Name: "login:0", Limit: lim, Levels: 2, CellsPerLevel: 64, Clock: clk})
	var in0, in1 string
	for i := 0; in0 == "" || in1 == ""; i++ {
		k := fmt.Sprintf("k%d", i)
		switch sharded.Sketch().shard(sharded.Sketch().hasher.Sum64String(k)) {
		case 0:
			if in0 == "" {
				in0 = k
			}
		case 1:
			if in1 == "" {
				in1 = k
			}
		}
	}
	for _, k := range []string{in0, in1} {
		if d, err := sharded.AllowN(ctx, k, 5); err != nil || !d.Allowed {
			t.Fatalf("sharded AllowN(%q, 5) = %+v, %v", k, d, err)
		}
	}
	d, err := plain.AllowN(ctx, in0, 1)
	if err != nil || d.Allowed {
		t.Fatalf(`"login:0" AllowN(%q, 1) = %+v, %v; the doc says it shares sharded "login"'s shard 0, where the key is at its burst`, in0, d, err)
	}
	d, err = plain.AllowN(ctx, in1, 1)
	if err != nil || !d.Allowed {
		t.Fatalf(`"login:0" AllowN(%q, 1) = %+v, %v; the key is in sharded "login"'s shard 1`, in1, d, err)
	}
}
