package redis

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
	goredis "github.com/redis/go-redis/v9"
)

// TestAuditMixedClientsRotationShardsExact: "Sketch.TryUpdate racing from
// N clients admits exactly the limit (no decay)", here with rotation
// (Period, Generations 3) and Shards 2, from instances on both client
// libraries at once (rueidis and go-redis against one server, as two
// services would), on colliding and distinct keys.
func TestAuditMixedClientsRotationShardsExact(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	cfg := Config{Name: "auditmix", Levels: 3, CellsPerLevel: 2, Hi: 1e6, Period: 3600_000_000_000, Generations: 3, Shards: 2}
	var sks []*Sketch
	for range 2 {
		s, err := New(e.srv.direct(t), cfg)
		if err != nil {
			t.Fatal(err)
		}
		sks = append(sks, s)
		g := goredis.NewClient(&goredis.Options{Addr: e.srv.addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
		t.Cleanup(func() { g.Close() })
		s2, err := NewGoRedis(g, cfg)
		if err != nil {
			t.Fatal(err)
		}
		sks = append(sks, s2)
	}
	const limit, keys = 150, 4
	var admitted [keys]atomic.Int64
	var wg sync.WaitGroup
	ctx := context.Background()
	for i, s := range sks {
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := range 2 * limit * keys / len(sks) / 4 * 2 {
					k := (i + g + j) % keys
					ok, err := s.TryUpdate(ctx, fmt.Sprint("key", k), 1, limit)
					if err != nil {
						t.Error(err)
						return
					}
					if ok {
						admitted[k].Add(1)
					}
				}
			}()
		}
	}
	wg.Wait()
	// With M = 2 the keys collide, so a key may be admitted less than the
	// limit (Min over colliding cells over-estimates), never more; the
	// keys of one cell together never exceed it.
	total := int64(0)
	for k := range keys {
		n := admitted[k].Load()
		total += n
		if n > limit {
			t.Errorf("key%d admitted %d > limit %d", k, n, limit)
		}
		if q, err := sks[0].Query(ctx, fmt.Sprint("key", k)); err != nil || q < float64(n) {
			t.Errorf("key%d: Query %v (%v) below its %d admissions", k, q, err, n)
		}
	}
	if total < limit {
		t.Errorf("only %d admitted over %d keys", total, keys)
	}
}

// TestAuditLimiterMixedClientsExact: Limiters on both client libraries
// (deny cache with pre-check on some, none on others), a fixed fake clock
// (no drain), many goroutines: exactly Burst admitted per key, and every
// Decision's Remaining is Burst minus the debt it saw (never negative,
// never above Burst).
func TestAuditLimiterMixedClientsExact(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	clk := sketchtest.NewFakeClock()
	clk.Set(10_000_000)
	const burst = 200
	var ls []*Limiter
	for i := range 4 {
		cfg := LimiterConfig{Name: "auditlmix", Limit: PerSecond(5, burst), Clock: clk, ServerCheck: CheckSkip}
		if i%2 == 1 {
			cfg.DenyCacheCells, cfg.PreCheck = 64, true
		}
		var l *Limiter
		var err error
		if i < 2 {
			l, err = NewLimiter(e.srv.direct(t), cfg)
		} else {
			g := goredis.NewClient(&goredis.Options{Addr: e.srv.addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
			t.Cleanup(func() { g.Close() })
			l, err = NewLimiterGoRedis(g, cfg)
		}
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	var admitted [3]atomic.Int64
	var wg sync.WaitGroup
	ctx := context.Background()
	for i, l := range ls {
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := range 120 {
					k := (i + g + j) % 3
					n := float64(1 + (j % 2)) // 1 or 2 tokens
					d, err := l.AllowN(ctx, fmt.Sprint("k", k), n)
					if err != nil {
						t.Error(err)
						return
					}
					if d.Remaining < 0 || d.Remaining > burst {
						t.Errorf("Remaining %v out of [0, %v]", d.Remaining, burst)
					}
					if d.Allowed {
						admitted[k].Add(int64(n))
						if d.RetryAfter != -1 {
							t.Errorf("allowed with RetryAfter %v", d.RetryAfter)
						}
					} else if d.RetryAfter <= 0 {
						t.Errorf("denied %v with RetryAfter %v (n <= burst)", n, d.RetryAfter)
					}
				}
			}()
		}
	}
	wg.Wait()
	for k := range 3 {
		if n := admitted[k].Load(); n > burst || n < burst-1 {
			// n is 1 or 2 tokens: the last request may not fit exactly.
			t.Errorf("k%d: %d tokens admitted, want %d (or %d)", k, n, burst, burst-1)
		}
	}
}
