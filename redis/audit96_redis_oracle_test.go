package redis

// Audit 96: many keys of one Limiter against the rational token bucket
// (audit86Bucket), on a fake clock (LimiterConfig.Clock), sharded
// (Config.Shards: keys spread over several hash-tagged strings, on the
// cluster over several slots and nodes), with the deny cache and
// PreCheck. Limiter's doc: for an exact limit "every decision,
// RetryAfter and ResetAfter for whole-token (or whole-unit) requests is
// exactly the rational token bucket's"; docs/distributed.md: with one
// instance, for a key whose server cells no other admitted key shares,
// "a local denial's waits are the server's". And with colliding keys
// (doc.go: "with Min aggregation and non-negative deltas an estimate
// never falls below the key's true score"; Decision.RetryAfter: "the
// same request fits if nothing else is admitted meanwhile").

import (
	"context"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/internal/units"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// audit96PrivateKeys returns n keys each of which has, in its shard, a
// server cell no other returned key of that shard maps to (at some
// level), and a deny-cache cell (4 levels of cacheCells, the cache's
// seed) no other returned key maps to: its Min is its own debt on the
// server and in the cache.
func audit96PrivateKeys(l *Limiter, cacheCells uint32, n int) []string {
	cfg := l.Sketch().Config()
	ch := sketch.XXH3()(cfg.Seed ^ 0xD1E5CAC4E) // the deny cache's hasher (denycache.go)
	type cell struct{ shard, level, idx uint32 }
	server := map[cell]int{}
	cache := map[cell]int{}
	var keys []string
	serverCells := func(k string) []cell {
		h := l.sk.hasher.Sum64String(k)
		s := uint32(l.sk.shard(h))
		var cs []cell
		for lv := range cfg.Levels {
			cs = append(cs, cell{s, lv, core.Index(h, lv, cfg.CellsPerLevel)})
		}
		return cs
	}
	cacheCellsOf := func(k string) []cell {
		h := ch.Sum64String(k)
		var cs []cell
		for lv := range uint32(4) {
			cs = append(cs, cell{0, lv, core.Index(h, lv, cacheCells)})
		}
		return cs
	}
	private := func(cs []cell, used map[cell]int) bool {
		for _, c := range cs {
			if used[c] == 0 {
				return true
			}
		}
		return false
	}
	for i := 0; len(keys) < n; i++ {
		k := fmt.Sprintf("a96k%d", i)
		sc, cc := serverCells(k), cacheCellsOf(k)
		if !private(sc, server) || !private(cc, cache) {
			continue
		}
		// Adding k must leave every key already taken a private cell.
		for _, c := range sc {
			server[c]++
		}
		for _, c := range cc {
			cache[c]++
		}
		ok := true
		for _, o := range keys {
			if !privateAfter(serverCells(o), server) || !privateAfter(cacheCellsOf(o), cache) {
				ok = false
				break
			}
		}
		if !ok {
			for _, c := range sc {
				server[c]--
			}
			for _, c := range cc {
				cache[c]--
			}
			continue
		}
		keys = append(keys, k)
	}
	return keys
}

// privateAfter reports whether one of cs is used once (by its own key).
func privateAfter[C comparable](cs []C, used map[C]int) bool {
	for _, c := range cs {
		if used[c] == 1 {
			return true
		}
	}
	return false
}

// audit96RunKeys runs steps random requests over keys private in their
// cells, each checked against its own rational bucket; every decision
// the deny cache answers locally must be the server's too.
func audit96RunKeys(t *testing.T, e *env, lim Limit, pre bool, seed uint64, steps int) {
	t.Helper()
	clk := sketchtest.NewFakeClock()
	const t0 = 1_750_000_000_000
	clk.Set(t0)
	const cacheCells = 1 << 10
	cfg := LimiterConfig{Name: e.ns(fmt.Sprintf("a96o:%v:%v:%v", lim.Rate, lim.Burst, pre)), Limit: lim, Clock: clk,
		Levels: 2, CellsPerLevel: 97, Shards: 3, DenyCacheCells: cacheCells, PreCheck: pre}
	l := e.limiter(t, cfg)
	keys := audit96PrivateKeys(l, cacheCells, 24)
	buckets := map[string]*audit86Bucket{}
	for _, k := range keys {
		buckets[k] = audit86NewBucket(lim, t0)
	}
	rng := rand.New(rand.NewPCG(seed, 96))
	ctx := context.Background()
	full := 1000 * lim.Burst / lim.Rate
	var lastKey string
	var lastN float64
	var lastRetry time.Duration
	for i := range steps {
		var key string
		var n float64
		if lastRetry > time.Millisecond && rng.IntN(3) == 0 {
			// the same request 1 ms before its RetryAfter, or at it
			if rng.IntN(2) == 0 {
				clk.Advance(lastRetry - time.Millisecond)
			} else {
				clk.Advance(lastRetry)
			}
			key, n = lastKey, lastN
		} else {
			clk.Advance(time.Duration(rng.Float64()*rng.Float64()*full/4) * time.Millisecond)
			key = keys[rng.IntN(len(keys))]
			n = []float64{0, 1, 1, 2, 3, lim.Burst, lim.Burst + 1}[rng.IntN(7)]
		}
		where := fmt.Sprintf("step %d t+%dms key %s n=%v", i, clk.NowMillis()-t0, key, n)
		w := buckets[key].step(clk.NowMillis(), n)
		before := l.Stats().CacheDenials
		d, err := l.AllowN(ctx, key, n)
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		if l.Stats().CacheDenials != before {
			where += " (deny cache)"
		}
		if n == 0 {
			// A peek: allowed, the key's Remaining and ResetAfter.
			w.allowed = true
		}
		audit86CheckDecision(t, where, d, w, lim)
		lastRetry = 0
		if !w.allowed && !w.never {
			lastKey, lastN, lastRetry = key, n, time.Duration(w.retryMs)*time.Millisecond
		}
	}
	s := l.Stats()
	if s.Decisions != int64(steps) || s.ServerCalls+s.CacheDenials != s.Decisions || s.ServerErrors != 0 {
		t.Fatalf("Stats %+v after %d steps", s, steps)
	}
	t.Logf("%d keys over %d shards: %d cache denials, %d server calls", len(keys), cfg.Shards, s.CacheDenials, s.ServerCalls)
}

// TestAudit96RedisOracleShardedKeys: 24 keys over 3 shards, exact
// limits, the deny cache with and without PreCheck; rueidis on a
// standalone server and go-redis on the cluster (the shards' tags in
// different slots).
func TestAudit96RedisOracleShardedKeys(t *testing.T) {
	for _, c := range []struct{ lib, topo string }{{"rueidis", "standalone"}, {"go-redis", "cluster"}} {
		t.Run(c.lib+"/"+c.topo, func(t *testing.T) {
			e := newEnv(t, c.lib, c.topo)
			for i, lim := range []Limit{PerSecond(1000.0/13, 7), PerSecond(3, 10)} {
				for _, pre := range []bool{false, true} {
					t.Run(fmt.Sprintf("%v/%v/pre=%v", lim.Rate, lim.Burst, pre), func(t *testing.T) {
						audit96RunKeys(t, e, lim, pre, uint64(10*i+1), 300)
					})
				}
			}
		})
	}
}

// TestAudit96RedisOracleCollidingNeverOverAdmits: 16 keys in 2 x 5 server
// cells (every key shares cells), whole-token requests at random times.
// Each key's admissions must fit its own rational bucket (an estimate
// never below the key's true score: no admission its bucket denies); a
// denial's RetryAfter is exact for the key's cells as they stand: the
// same request 1 ms before it is denied, at it admitted, when nothing
// else is admitted meanwhile.
func TestAudit96RedisOracleCollidingNeverOverAdmits(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	for i, lim := range []Limit{PerSecond(1000.0/13, 7), PerSecond(10, 20), PerSecond(0.7, 3.5), PerSecond(math.Pi, 5)} {
		t.Run(fmt.Sprintf("%v/%v", lim.Rate, lim.Burst), func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			const t0 = 1_750_000_000_000
			clk.Set(t0)
			l := e.limiter(t, LimiterConfig{Name: fmt.Sprintf("a96c%d", i), Limit: lim, Clock: clk, Levels: 2, CellsPerLevel: 5})
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(uint64(i), 9696))
			buckets := map[string]*audit86Bucket{}
			var keys []string
			for k := range 16 {
				key := fmt.Sprintf("c%d", k)
				keys = append(keys, key)
				buckets[key] = audit86NewBucket(lim, t0)
			}
			full := 1000 * lim.Burst / lim.Rate
			// An exact limit's bucket is exact; one counting tokens may
			// admit early by the float64 drain's rounding (Limiter's doc:
			// about 2^-52 of the debt).
			over := new(big.Rat)
			if _, _, exact, _ := units.Units(lim.Rate, lim.Burst); !exact {
				over.SetFloat64(lim.Burst * 0x1p-50)
			}
			fits := func(after, burst *big.Rat) bool { return after.Cmp(new(big.Rat).Add(burst, over)) <= 0 }
			admitted, exactRetries := 0, 0
			for s := range 400 {
				clk.Advance(time.Duration(rng.Float64()*full/40) * time.Millisecond)
				key := keys[rng.IntN(len(keys))]
				n := float64(1 + rng.IntN(2))
				where := fmt.Sprintf("step %d t+%dms key %s n=%v", s, clk.NowMillis()-t0, key, n)
				b := buckets[key]
				b.drain(clk.NowMillis())
				d, err := l.AllowN(ctx, key, n)
				if err != nil {
					t.Fatalf("%s: %v", where, err)
				}
				if d.Allowed {
					admitted++
					after := new(big.Rat).Add(b.debt, new(big.Rat).SetFloat64(n))
					if !fits(after, b.burst) {
						t.Fatalf("%s: admitted; the key's own bucket holds %v of %v", where, b.debt.FloatString(6), lim.Burst)
					}
					b.debt = after
					continue
				}
				if d.RetryAfter <= time.Millisecond {
					continue
				}
				// Nothing else is admitted meanwhile: 1 ms before, denied
				// (a denial writes nothing); at RetryAfter, admitted.
				retry := d.RetryAfter
				clk.Advance(retry - time.Millisecond)
				if d2, err := l.AllowN(ctx, key, n); err != nil || d2.Allowed {
					t.Fatalf("%s: retried 1 ms before RetryAfter %v: %+v, %v; want denied", where, retry, d2, err)
				}
				clk.Advance(time.Millisecond)
				b.drain(clk.NowMillis())
				d3, err := l.AllowN(ctx, key, n)
				if err != nil || !d3.Allowed {
					t.Fatalf("%s: retried at RetryAfter %v: %+v, %v; want admitted", where, retry, d3, err)
				}
				exactRetries++
				after := new(big.Rat).Add(b.debt, new(big.Rat).SetFloat64(n))
				if !fits(after, b.burst) {
					t.Fatalf("%s: admitted at RetryAfter; the key's own bucket holds %v of %v", where, b.debt.FloatString(6), lim.Burst)
				}
				b.debt = after
				admitted++
			}
			if admitted == 0 || exactRetries == 0 {
				t.Fatalf("setup: %d admitted, %d retries checked", admitted, exactRetries)
			}
			t.Logf("%d admitted, %d retries at RetryAfter checked", admitted, exactRetries)
		})
	}
}
