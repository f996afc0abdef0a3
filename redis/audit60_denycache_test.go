package redis

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// audit60CacheLimiter returns a limiter with a deny cache (and, if pre,
// PreCheck) and a plain one (no cache) on the same server sketch, both on
// clk.
func audit60CacheLimiter(t *testing.T, e *env, name string, lim Limit, clk *sketchtest.FakeClock, pre bool) (cached, plain *Limiter) {
	t.Helper()
	cfg := LimiterConfig{Name: name, Limit: lim, Clock: clk, Timeout: 5 * time.Second,
		Levels: 4, CellsPerLevel: 64, DenyCacheCells: 1024, PreCheck: pre}
	cached = e.limiter(t, cfg)
	cfg.DenyCacheCells, cfg.PreCheck = 0, false
	plain = e.limiter(t, cfg)
	return cached, plain
}

// TestAudit60FixedDenyCacheSkipsFullDebtKey: doc.go says "Limiter adds
// the local deny cache (a key the server denied is denied locally, with
// no round trip, while its reported debt has not drained)", and
// LimiterConfig.DenyCacheCells: "a key the server denied is denied
// locally, with no round trip, until its reported debt has drained
// enough". For a limiter counting tokens whose Burst a float32 does not
// hold (0.3/s x 30000001; 1e-6/s x 1000.3), a key at its full debt (the
// abusive key the cache is for) is never learned: the server's cell holds
// the float32 above Burst, its ResetAfter counts that cell's drain (3.3 s
// more than the capped estimate's at 0.3/s), and denyCache.dated reads
// the difference as a lead of the server's time, which puts the debt
// above Burst: not learned, and the whole cache is emptied when the key
// was held or another call is in flight. Every further request of the
// key goes to the server.
func TestAudit60FixedDenyCacheSkipsFullDebtKey(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	ctx := context.Background()
	for i, c := range []struct {
		lim Limit
		n   float64 // a request the cache certainly denies at full debt
	}{
		{PerSecond(0.3, 30000001), 100},
		{PerSecond(1e-6, 1000.3), 1},
		{PerSecond(1000.0/999, 1e9+1), 1000},
	} {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_000_000)
		l, _ := audit60CacheLimiter(t, e, fmt.Sprintf("a60dc%d", i), c.lim, clk, false)
		if d, err := l.AllowN(ctx, "abuser", c.lim.Burst); err != nil || !d.Allowed {
			t.Fatalf("%v: full burst: %+v %v", c.lim, d, err)
		}
		d1, err := l.AllowN(ctx, "abuser", c.n)
		if err != nil || d1.Allowed {
			t.Fatalf("%v: n=%v at full debt: %+v %v", c.lim, c.n, d1, err)
		}
		before := l.Stats()
		d2, err := l.AllowN(ctx, "abuser", c.n)
		after := l.Stats()
		if err != nil || d2.Allowed {
			t.Fatalf("%v: again: %+v %v", c.lim, d2, err)
		}
		if after.CacheDenials == before.CacheDenials {
			rst := d1.ResetAfter
			own := resetAfter(l.burstU, l.rateU)
			_, ok := l.cache.dated(l.burstU, rst.Milliseconds())
			t.Errorf("%v: the server denied %v tokens of a key at its full debt (ResetAfter %v, Remaining %v); the same request again at the same ms went to the server (ServerCalls %d -> %d, CacheDenials %d); want it denied by the deny cache (doc.go: \"a key the server denied is denied locally, with no round trip, while its reported debt has not drained\"). Cause: the server's ResetAfter is %v past the capped estimate's own drain %v (the cell holds float32(Burst) rounded up = %v > Burst), so dated reads a lead and refuses (ok=%v)",
				c.lim, c.n, rst, d1.Remaining, before.ServerCalls, after.ServerCalls, after.CacheDenials, rst-own, own, float64(float32ceil(l.burstU)), ok)
		}
	}
}

// TestAudit60FixedDenyCacheEmptiedByFullDebtKey: the same reply (a key
// at its full debt, Burst not a float32) also empties the whole deny
// cache when the cache held that key: another key the cache held (and
// denied locally just before) goes back to the server. With PreCheck the
// admission that brings a held key to its limit does it; without, a
// denial of a held key that another instance brought to its limit.
// Expected: one key's reply never makes the cache forget the others
// (denycache.go empties it for a clock behind the cache's time, or a
// server whose time leads; neither happens here).
func TestAudit60FixedDenyCacheEmptiedByFullDebtKey(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	ctx := context.Background()
	lim := PerSecond(0.3, 30000001)
	for _, pre := range []bool{true, false} {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_000_000)
		l, other := audit60CacheLimiter(t, e, fmt.Sprintf("a60de%v", pre), lim, clk, pre)
		// Key A: debt Burst-50 (below the cap); a denial of 100 is
		// learned and the next one is a cache denial.
		if d, err := l.AllowN(ctx, "A", lim.Burst-50); err != nil || !d.Allowed {
			t.Fatalf("A: %+v %v", d, err)
		}
		for i := range 2 {
			if d, err := l.AllowN(ctx, "A", 100); err != nil || d.Allowed {
				t.Fatalf("A %d: %+v %v", i, d, err)
			}
		}
		if s := l.Stats(); s.CacheDenials < 1 || s.ServerCalls > 2 {
			t.Fatalf("setup: key A not denied by the cache: %+v", s)
		}
		// Key B: held by the cache below its cap, then at its cap.
		if d, err := l.AllowN(ctx, "B", lim.Burst-1001); err != nil || !d.Allowed {
			t.Fatalf("B: %+v %v", d, err)
		}
		if !pre {
			if d, err := l.AllowN(ctx, "B", 2000); err != nil || d.Allowed { // learned: held
				t.Fatalf("B denial: %+v %v", d, err)
			}
			if d, err := other.AllowN(ctx, "B", 1001); err != nil || !d.Allowed { // another instance: to the cap
				t.Fatalf("B other: %+v %v", d, err)
			}
			if d, err := l.AllowN(ctx, "B", 100); err != nil || d.Allowed {
				t.Fatalf("B at cap: %+v %v", d, err)
			}
		} else if d, err := l.AllowN(ctx, "B", 1001); err != nil || !d.Allowed { // this instance: to the cap
			t.Fatalf("B to cap: %+v %v", d, err)
		}
		before := l.Stats()
		if d, err := l.AllowN(ctx, "A", 100); err != nil || d.Allowed {
			t.Fatalf("A after: %+v %v", d, err)
		}
		after := l.Stats()
		if after.CacheDenials == before.CacheDenials {
			t.Errorf("PreCheck %v, %v: key A, denied by the deny cache a moment before, went to the server once key B (held by the cache) reached its full debt: CacheDenials %d -> %d, ServerCalls %d -> %d; doc.go: \"a key the server denied is denied locally, with no round trip, while its reported debt has not drained\"",
				pre, lim, before.CacheDenials, after.CacheDenials, before.ServerCalls, after.ServerCalls)
		}
	}
}

// TestAudit60DenyCacheHoldsFullDebtRepresentableBurst is the control of
// the two findings above: with a Burst a float32 holds (30000002 at
// 0.3/s, 1000.5 at 1e-6/s) the key at its full debt is learned and the
// repeat is a cache denial.
func TestAudit60DenyCacheHoldsFullDebtRepresentableBurst(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	ctx := context.Background()
	for i, c := range []struct {
		lim Limit
		n   float64
	}{{PerSecond(0.3, 30000002), 100}, {PerSecond(1e-6, 1000.5), 1}} {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_000_000)
		l, _ := audit60CacheLimiter(t, e, fmt.Sprintf("a60dh%d", i), c.lim, clk, false)
		if d, err := l.AllowN(ctx, "abuser", c.lim.Burst); err != nil || !d.Allowed {
			t.Fatalf("%v: full burst: %+v %v", c.lim, d, err)
		}
		for range 2 {
			if d, err := l.AllowN(ctx, "abuser", c.n); err != nil || d.Allowed {
				t.Fatalf("%v: %+v %v", c.lim, d, err)
			}
		}
		if s := l.Stats(); s.CacheDenials != 1 || s.ServerCalls != 2 {
			t.Errorf("%v: %+v; want the repeat denied by the cache", c.lim, s)
		}
	}
}

// float32ceil is the float32 at or above x.
func float32ceil(x float64) float32 {
	f := float32(x)
	if float64(f) < x {
		f = math.Nextafter32(f, float32(math.Inf(1)))
	}
	return f
}
