package redis

// Audit 89: the deny cache's waits when other keys share the key's cells
// on the server (a count-min: every key's L cells hold other keys' debt
// too), with one instance and no concurrency.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit89RedisDenyCacheRetryEarlySharedCells (a finding, now a
// documented limitation asserted as documented): PerSecond(10,
// 10), L 2 x M 1000 on the server, DenyCacheCells 4096, one instance, a
// fake clock. Key A takes its burst; A asks 1 more: the server denies it
// and the cache learns A's debt, 10. 100 ms later (A's cells at 9) key
// B0, which shares A's level-0 cell, and B1, which shares its level-1
// cell, take 1 token each: both of A's cells hold 10 again, A's debt on
// the server is 10. A asks for 2: the cache denies it from the debt it
// learned, drained to 9: RetryAfter 100 ms, Remaining 1, ResetAfter 900
// ms. The server holds 10: the exact wait is 200 ms (Remaining 0,
// ResetAfter 1 s), and A's retry at the RetryAfter given, with nothing
// admitted meanwhile, is denied again (by the server, RetryAfter 100 ms).
//
// limiter.go, Decision.RetryAfter: "When denied: the exact wait, rounded
// up to the ms, after which the same request fits if nothing else is
// admitted meanwhile (never early, ...)"; docs/distributed.md ("Why the
// limit stays exact"): "with one instance a local denial's waits are the
// server's". Only other instances' admissions are named as making the
// cache's RetryAfter early; this instance's own admissions of other keys
// raise the key's cells on the server while the cache, which updates
// only the admitted key, keeps the key's older debt. Without the cache
// the same sequence answers 200 ms. DenyCacheCells and distributed.md now
// name this case.
func TestAudit89RedisDenyCacheRetryEarlySharedCells(t *testing.T) {
	const cells = 1000
	for _, cache := range []uint32{0, 4096} {
		t.Run(fmt.Sprintf("DenyCacheCells=%d", cache), func(t *testing.T) {
			e := newEnv(t, "rueidis", "standalone")
			clk := sketchtest.NewFakeClock()
			clk.Set(1_800_000_000_000)
			ctx := context.Background()
			l := e.limiter(t, LimiterConfig{Name: "a89dc", Limit: PerSecond(10, 10), Levels: 2, CellsPerLevel: cells, Clock: clk,
				DenyCacheCells: cache})
			place := func(key string) [2]uint32 {
				h := l.Sketch().hasher.Sum64String(key)
				return [2]uint32{uint32(core.Index(h, 0, cells)), uint32(core.Index(h, 1, cells))}
			}
			a := place("A")
			var b0, b1 string
			for i := 0; b0 == "" || b1 == ""; i++ {
				k := fmt.Sprintf("B%d", i)
				p := place(k)
				if b0 == "" && p[0] == a[0] && p[1] != a[1] {
					b0 = k
				}
				if b1 == "" && p[1] == a[1] && p[0] != a[0] {
					b1 = k
				}
			}
			allow := func(key string, n float64) Decision {
				t.Helper()
				d, err := l.AllowN(ctx, key, n)
				if err != nil {
					t.Fatal(err)
				}
				return d
			}
			if d := allow("A", 10); !d.Allowed {
				t.Fatalf("A's burst: %+v", d)
			}
			if d := allow("A", 1); d.Allowed || d.RetryAfter != 100*time.Millisecond {
				t.Fatalf("A's 11th token: %+v; want denied, RetryAfter 100ms", d)
			}
			clk.Advance(100 * time.Millisecond)
			for _, k := range []string{b0, b1} {
				if d := allow(k, 1); !d.Allowed {
					t.Fatalf("%s (sharing one of A's cells): %+v; want allowed", k, d)
				}
			}
			d := allow("A", 2)
			if cache == 0 {
				if d.Allowed || d.RetryAfter != 200*time.Millisecond || d.Remaining != 0 || d.ResetAfter != time.Second {
					t.Errorf("A asks 2 with its cells at 10 of 10: %+v; want denied, RetryAfter 200ms, Remaining 0, ResetAfter 1s", d)
				}
				clk.Advance(d.RetryAfter)
				if d2 := allow("A", 2); !d2.Allowed {
					t.Errorf("A's retry at the RetryAfter %v it was given, nothing admitted meanwhile: %+v", d.RetryAfter, d2)
				}
				return
			}
			// The documented limitation (DenyCacheCells, distributed.md):
			// the local denial counts from the debt the cache learned, 9
			// after 100 ms, so its waits are early; the retry then gets
			// the server's answer, and the server's wait is exact.
			if d.Allowed || d.RetryAfter != 100*time.Millisecond || d.Remaining != 1 || d.ResetAfter != 900*time.Millisecond || l.Stats().CacheDenials != 1 {
				t.Errorf("A asks 2 with its cells at 10 of 10, the cache holding 9: %+v (cache denials %d); want the cache's denial, RetryAfter 100ms, Remaining 1, ResetAfter 900ms",
					d, l.Stats().CacheDenials)
			}
			clk.Advance(d.RetryAfter)
			d2 := allow("A", 2)
			if d2.Allowed || d2.RetryAfter != 100*time.Millisecond || l.Stats().CacheDenials != 1 {
				t.Fatalf("A's retry at the cache's early RetryAfter: %+v (cache denials %d); want the server's denial, RetryAfter 100ms", d2, l.Stats().CacheDenials)
			}
			clk.Advance(d2.RetryAfter)
			if d3 := allow("A", 2); !d3.Allowed {
				t.Errorf("A's retry at the server's RetryAfter %v: %+v", d2.RetryAfter, d3)
			}
		})
	}
}
