package redis

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestDenyCacheEmptiedInFlight: a denial's reply that arrives after the
// cache was emptied (the clock stepped back while the call was in flight)
// is not learned: meanwhile an admission, not learned while the clock was
// behind, raised the key's debt, and the older reply would date the lower
// debt (5, not 10) in the fresh cache, whose next local denial would then
// answer RetryAfter 100 ms where the server answers 600 ms. The race is
// forced with audit19's trapClock (a clock read inside observe held until
// released).
func TestDenyCacheEmptiedInFlight(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	clk := newTrapClock(10_000)
	l := e.limiter(t, LimiterConfig{Name: "dcinflight", Limit: PerSecond(10, 10), Clock: clk, DenyCacheCells: 1024})
	ctx := context.Background()
	mustAllow := func(key string, n float64, want bool) Decision {
		t.Helper()
		d, err := l.AllowN(ctx, key, n)
		if err != nil || d.Allowed != want {
			t.Fatalf("AllowN(%s, %v) at %d ms = %+v, %v; want Allowed %v", key, n, clk.NowMillis(), d, err, want)
		}
		return d
	}
	mustAllow("y", 10, true)
	mustAllow("y", 1, false) // the cache learns y: it has something to empty
	mustAllow("k", 5, true)

	clk.arm("(*denyCache).observe")
	var wg sync.WaitGroup
	wg.Add(1)
	var d1 Decision
	var err1 error
	go func() {
		defer wg.Done()
		d1, err1 = l.AllowN(ctx, "k", 6) // denied by the server at debt 5
	}()
	<-clk.trapped // the reply is back, not yet learned
	clk.Set(9_500)
	mustAllow("k", 5, true) // behind: the cache empties; the server admits (debt 10)
	clk.Set(10_000)
	close(clk.release)
	wg.Wait()
	if err1 != nil || d1.Allowed {
		t.Fatalf("AllowN(k, 6) at debt 5 = %+v, %v; want denied", d1, err1)
	}
	d := mustAllow("k", 6, false)
	if d.RetryAfter != 600*time.Millisecond || d.Remaining != 0 {
		t.Errorf("AllowN(k, 6) at debt 10 = %+v (cache denials %d); want the server's RetryAfter 600ms, Remaining 0",
			d, l.Stats().CacheDenials)
	}
}
