package redis

import (
	"context"
	"fmt"
	"math/big"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a44Instances returns k Limiters for cfg, each on a client of its own
// (separate service instances), alternating rueidis and go-redis; the
// odd ones have the deny cache and PreCheck on. Instance 0 never has the
// cache.
func a44Instances(t *testing.T, e *env, k int, cfg LimiterConfig) []*Limiter {
	t.Helper()
	var ls []*Limiter
	for i := range k {
		e2 := *e
		e2.lib = []string{"rueidis", "go-redis"}[(i/2)%2]
		c := cfg
		if i%2 == 1 {
			c.DenyCacheCells, c.PreCheck = 4096, true
		}
		ls = append(ls, e2.limiter(t, c))
	}
	return ls
}

// a44Race makes every goroutine of every instance call AllowN(key, n) on
// random keys of keys until it has seen 3 denials, then drains each key
// from instance 0 (no deny cache) until the server denies it. It returns
// the admissions per key.
func a44Race(t *testing.T, ls []*Limiter, keys []string, n float64, gor int) []int64 {
	t.Helper()
	ctx := context.Background()
	adm := make([]atomic.Int64, len(keys))
	var wg sync.WaitGroup
	for i, l := range ls {
		for g := range gor {
			wg.Add(1)
			go func() {
				defer wg.Done()
				den := 0
				for j := 0; den < 3*len(keys); j++ {
					ki := (i*7 + g*3 + j) % len(keys)
					d, err := l.AllowN(ctx, keys[ki], n)
					if err != nil {
						t.Errorf("instance %d: AllowN: %v", i, err)
						return
					}
					if d.Allowed {
						adm[ki].Add(1)
					} else {
						den++
					}
				}
			}()
		}
	}
	wg.Wait()
	out := make([]int64, len(keys))
	for ki, k := range keys {
		for {
			d, err := ls[0].AllowN(ctx, k, n)
			if err != nil {
				t.Fatalf("tail: %v", err)
			}
			if !d.Allowed {
				break
			}
			adm[ki].Add(1)
		}
		out[ki] = adm[ki].Load()
	}
	return out
}

// TestAudit44ExactRefillAcrossInstances: "AllowN reports whether n
// tokens may be taken for key now, globally: across every instance
// sharing the server sketch, exactly" and, for exact units, "every
// decision ... is exactly the rational token bucket's at millisecond
// resolution"; for tokens "decisions are never early, and late by that
// rounding" (limiter.go); "Neither the cache nor the pre-check ever
// admits: the global limit stays exact" (doc.go). 4 instances (both
// clients, two with DenyCacheCells and PreCheck) x 3 goroutines race on
// one key and on 6 keys, on one fake clock that advances 130 ms between
// saturated rounds: after every round the admissions per key equal
// floor((Burst + Rate*T)/n) (exact units, whole requests n = 1), or lie
// in [floor((Burst+Rate*T)/n)-1, floor((Burst+Rate*T)/n)] (tokens, or a
// request of 1/3 token in exact units; the rational upper bound is never
// passed). Also with Config.Shards 3 (on the cluster the shards sit in
// different slots).
func TestAudit44ExactRefillAcrossInstances(t *testing.T) {
	cases := []struct {
		name   string
		lim    Limit
		exact  bool    // exact units (and whole requests: the count is exact)
		n      float64 // request size
		shards uint32
	}{
		{"exact-units", PerSecond(10, 25), true, 1, 0},
		{"tokens", PerSecond(7.123456789, 11.5), false, 1, 0},
		{"exact-units-third", PerSecond(10, 25), true, 1.0 / 3, 0},
		{"tokens-0.7", PerSecond(7.123456789, 11.5), false, 0.7, 0},
		{"exact-units-shards3", PerSecond(10, 25), true, 1, 3},
	}
	for _, topo := range []string{"standalone", "cluster"} {
		e := newEnv(t, "rueidis", topo)
		for _, tc := range cases {
			for _, nkeys := range []int{1, 6} {
				t.Run(fmt.Sprintf("%s/%s/keys=%d", topo, tc.name, nkeys), func(t *testing.T) {
					clk := sketchtest.NewFakeClock()
					clk.Set(1_700_000_000_000)
					ls := a44Instances(t, e, 4, LimiterConfig{Name: e.ns(fmt.Sprintf("a44x:%s:%d", tc.name, nkeys)), Limit: tc.lim, Clock: clk, Shards: tc.shards})
					if got := ls[0].unit != 1; got != tc.exact {
						t.Fatalf("exact units = %v; the case assumes %v", got, tc.exact)
					}
					keys := make([]string, nkeys)
					for i := range keys {
						keys[i] = fmt.Sprint("key", i)
					}
					total := make([]int64, nkeys)
					const step = 130 // ms
					for round := 0; round < 8; round++ {
						T := int64(round * step)
						got := a44Race(t, ls, keys, tc.n, 3)
						// bound = Burst + Rate*T/1000, exactly (float64 values as rationals).
						bound := new(big.Rat).SetFloat64(tc.lim.Rate)
						bound.Mul(bound, big.NewRat(T, 1000))
						bound.Add(bound, new(big.Rat).SetFloat64(tc.lim.Burst))
						// In requests of n: bound / n.
						reqs := new(big.Rat).Quo(bound, new(big.Rat).SetFloat64(tc.n))
						fl := new(big.Int).Quo(reqs.Num(), reqs.Denom()).Int64()
						whole := tc.exact && tc.n == 1
						for ki := range keys {
							total[ki] += got[ki]
							c := total[ki]
							if whole && c != fl {
								t.Fatalf("round %d (T=%d ms) key %d: %d admitted in all; the rational bucket admits exactly %d", round, T, ki, c, fl)
							}
							if !whole && (c > fl || c < fl-1) {
								t.Fatalf("round %d (T=%d ms) key %d: %d admitted in all; want %d..%d (Burst+Rate*T = %s)", round, T, ki, c, fl-1, fl, bound.FloatString(4))
							}
						}
						clk.Advance(step * time.Millisecond)
					}
				})
			}
		}
	}
}

// TestAudit44RealClockUpperBound: the same instances on the server's own
// clock (no Clock), rate 200/s, burst 10 (exact units) and 137.77/s,
// burst 9.5 (tokens), racing for 700 ms on one key and on 4 keys: the
// admissions per key never pass Burst + Rate x (wall time from before the
// first call to after the last reply, plus the 1 ms of the server's
// whole-ms clock), and reach at least Burst.
func TestAudit44RealClockUpperBound(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	for _, lim := range []Limit{PerSecond(200, 10), PerSecond(137.77, 9.5)} {
		for _, nkeys := range []int{1, 4} {
			t.Run(fmt.Sprintf("%v/%v/keys=%d", lim.Rate, lim.Burst, nkeys), func(t *testing.T) {
				ls := a44Instances(t, e, 4, LimiterConfig{Name: fmt.Sprintf("a44rt:%v:%d", lim.Rate, nkeys), Limit: lim})
				keys := make([]string, nkeys)
				for i := range keys {
					keys[i] = fmt.Sprint("key", i)
				}
				adm := make([]atomic.Int64, nkeys)
				ctx := context.Background()
				var stop atomic.Bool
				var wg sync.WaitGroup
				start := time.Now()
				for i, l := range ls {
					for g := range 3 {
						wg.Add(1)
						go func() {
							defer wg.Done()
							for j := 0; !stop.Load(); j++ {
								ki := (i + g + j) % nkeys
								d, err := l.Allow(ctx, keys[ki])
								if err != nil {
									t.Errorf("Allow: %v", err)
									return
								}
								if d.Allowed {
									adm[ki].Add(1)
								}
							}
						}()
					}
				}
				time.Sleep(700 * time.Millisecond)
				stop.Store(true)
				wg.Wait()
				el := time.Since(start)
				// The server's clock counts whole ms: its first decision
				// may read up to 1 ms before start (stop 47: 152 admitted
				// against a bound of 151.94 over 709.7 ms under load).
				bound := lim.Burst + lim.Rate*(el.Seconds()+0.001)
				for ki := range keys {
					c := adm[ki].Load()
					if float64(c) > bound || float64(c) < lim.Burst {
						t.Fatalf("key %d: %d admitted in %v; want %v..%.3f (Burst + Rate x elapsed)", ki, c, el, lim.Burst, bound)
					}
					t.Logf("key %d: %d admitted in %v; bound %.3f", ki, c, el, bound)
				}
			})
		}
	}
}

// TestAudit44RemainingExactAcrossInstances: limiter.go: for exact units
// "every decision, RetryAfter and ResetAfter for whole-token (or
// whole-unit) requests is exactly the rational token bucket's at
// millisecond resolution"; Remaining "is Burst minus the key's debt after
// the decision". 4 instances (two with the deny cache and PreCheck) x 3
// goroutines race Allow on one key at a frozen fake clock (10/s, burst
// 25): the admissions' Remaining values are exactly 24, 23, .., 0 (each
// once: every admission saw the debt the others left), and every denial,
// the server's and the deny cache's, has Remaining 0, RetryAfter exactly
// 100 ms and ResetAfter exactly 2.5 s.
func TestAudit44RemainingExactAcrossInstances(t *testing.T) {
	for _, topo := range []string{"standalone", "cluster"} {
		t.Run(topo, func(t *testing.T) {
			e := newEnv(t, "rueidis", topo)
			clk := sketchtest.NewFakeClock()
			clk.Set(1_700_000_000_000)
			ls := a44Instances(t, e, 4, LimiterConfig{Name: e.ns("a44rem"), Limit: PerSecond(10, 25), Clock: clk})
			ctx := context.Background()
			var mu sync.Mutex
			var rems []float64
			var wg sync.WaitGroup
			for _, l := range ls {
				for range 3 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for den := 0; den < 4; {
							d, err := l.Allow(ctx, "hot")
							if err != nil {
								t.Errorf("Allow: %v", err)
								return
							}
							if d.Allowed {
								mu.Lock()
								rems = append(rems, d.Remaining)
								mu.Unlock()
								continue
							}
							den++
							if d.Remaining != 0 || d.RetryAfter != 100*time.Millisecond || d.ResetAfter != 2500*time.Millisecond {
								t.Errorf("denial %+v; want Remaining 0, RetryAfter 100ms, ResetAfter 2.5s", d)
							}
						}
					}()
				}
			}
			wg.Wait()
			if len(rems) != 25 {
				t.Fatalf("%d admissions; want 25", len(rems))
			}
			seen := make(map[float64]int)
			for _, r := range rems {
				seen[r]++
			}
			for want := 0; want < 25; want++ {
				if seen[float64(want)] != 1 {
					t.Fatalf("Remaining values %v; want each of 0..24 once", rems)
				}
			}
			var cache int64
			for _, l := range ls {
				cache += l.Stats().CacheDenials
			}
			t.Logf("cache denials %d", cache)
		})
	}
}
