package redis

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// The limits below count tokens, not exact units (doc.go: Rate 5e-4/s
// drains no whole unit per ms within 2^24 units of Burst), so every
// stored debt is a float32 rounded up. Burst 1000.00001 with requests
// of 600 puts the boundary debt (Burst - n = 400.00001) just above the
// float32 400, so a debt rounded up near the boundary lands on the next
// float32 (400.0000305), about 2e-5 tokens (41 ms at 5e-4/s) past it.
const (
	a28Rate  = 5e-4
	a28Burst = 1000.00001
	a28N     = 600.0
)

// a28EarlyBy returns how many ms after t (the clock's reading) a request
// of n is first admitted by allow, stepping 1 ms at a time (denials write
// nothing); -1 if not within limit ms.
func a28EarlyBy(clk *sketchtest.FakeClock, limit int, allow func() bool) int {
	t := clk.NowMillis()
	for ms := 0; ms <= limit; ms++ {
		clk.Set(t + int64(ms))
		if allow() {
			return ms
		}
	}
	return -1
}

// TestAudit28FixedFallbackRetryAfterEarlyAcrossSweep: LocalFallback,
// the server down from the start (one instance, N = 1), fake clock.
// Decision.RetryAfter (limiter.go): "When denied: the exact wait, rounded
// up to the ms, after which the same request fits if nothing else is
// admitted meanwhile (never early)". The fallback admits 999.99 tokens at
// t0, denies 600 at t0+1000 s with a RetryAfter of about 333 h (1.2e9 ms,
// past the local sketch's first horizon sweep at 2^30 ms after its
// creation), and nothing at all happens until t0+1000 s+RetryAfter,
// where the same request is denied again: the retry's own call runs the
// sweep (internal/core/horizon.go: cells older than 2^29 ms are decayed
// to now and re-stamped, rounded up to float32), which raises the key's
// debt above the linear drain RetryAfter was computed from.
func TestAudit28FixedFallbackRetryAfterEarlyAcrossSweep(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_780_000_000_000)
	l := a28FallbackLimiter(t, PerSecond(a28Rate, a28Burst), 1, clk)
	ctx := context.Background()
	if d, err := l.AllowN(ctx, "k", 999.99); !d.Allowed || !errors.Is(err, ErrDegraded) {
		t.Fatalf("setup: fallback AllowN(999.99) = %+v, %v; want a fallback admission", d, err)
	}
	clk.Advance(1000 * time.Second)
	d, _ := l.AllowN(ctx, "k", a28N)
	if d.Allowed || d.RetryAfter <= 0 {
		t.Fatalf("setup: AllowN(600) = %+v; want a denial with a RetryAfter", d)
	}
	clk.Advance(d.RetryAfter)
	var last Decision
	allow := func() bool { last, _ = l.AllowN(ctx, "k", a28N); return last.Allowed }
	if allow() {
		return
	}
	first := last
	by := a28EarlyBy(clk, 10_000, allow)
	t.Errorf("LocalFallback, server down, nothing else admitted: AllowN(600) denied with RetryAfter %v (Remaining %v); "+
		"retried at exactly t+RetryAfter it is denied again (%+v); first admitted %d ms later. Want: admitted at t+RetryAfter "+
		"(limiter.go, Decision.RetryAfter: \"the exact wait ... after which the same request fits if nothing else is admitted meanwhile (never early)\")",
		d.RetryAfter, d.Remaining, first, by)
}

// TestAudit28FixedDenyCacheRetryAfterEarlyAcrossSweep: one instance
// with the deny cache, the server healthy. The server admits 999.99 at
// t0 and denies 600 at t0+1000 s with RetryAfter R (the cache learns the
// debt). Nothing else happens; at t0+1000 s+R the same request is denied
// again, by the cache (no round trip; Stats.CacheDenials), although the
// server, asked directly (Query, read-only), holds room for it: the
// cache's own horizon sweep rounded the key's cells up. The docs:
// "with one instance a local denial's waits are the server's"
// (docs/distributed.md, the deny cache), "a key the server denied is
// denied locally ... while its reported debt has not drained" (doc.go),
// and Decision.RetryAfter's "never early".
func TestAudit28FixedDenyCacheRetryAfterEarlyAcrossSweep(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	clk := sketchtest.NewFakeClock()
	clk.Set(1_780_000_000_000)
	l := e.limiter(t, LimiterConfig{Name: "a28dc", Limit: PerSecond(a28Rate, a28Burst), Clock: clk,
		Levels: 2, CellsPerLevel: 64, DenyCacheCells: 1024})
	ctx := context.Background()
	if d, err := l.AllowN(ctx, "k", 999.99); err != nil || !d.Allowed {
		t.Fatalf("setup: AllowN(999.99) = %+v, %v", d, err)
	}
	clk.Advance(1000 * time.Second)
	d, err := l.AllowN(ctx, "k", a28N)
	if err != nil || d.Allowed || d.RetryAfter <= 0 || l.Stats().CacheDenials != 0 {
		t.Fatalf("setup: AllowN(600) = %+v, %v, stats %+v; want the server's denial", d, err, l.Stats())
	}
	clk.Advance(d.RetryAfter)
	debt, err := l.debtTokens(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if debt+a28N > a28Burst {
		t.Fatalf("setup: the server's debt at t+RetryAfter is %v: no room for %v within %v (the server's own RetryAfter early?)", debt, a28N, a28Burst)
	}
	d2, err := l.AllowN(ctx, "k", a28N)
	if err != nil {
		t.Fatal(err)
	}
	if d2.Allowed {
		return
	}
	st := l.Stats()
	t.Errorf("one instance, deny cache, nothing else admitted: the server denied AllowN(600) with RetryAfter %v; "+
		"at exactly t+RetryAfter the server's debt is %v (room for 600 within %v) but the call is denied %s: %+v. "+
		"Want: admitted (docs/distributed.md: \"with one instance a local denial's waits are the server's\"; Decision.RetryAfter: never early)",
		d.RetryAfter, debt, a28Burst, map[bool]string{true: "by the deny cache (no round trip)", false: "by the server"}[st.CacheDenials > 0], d2)
}

// TestAudit28FixedServerRetryAfterEarlyAcrossRebase: the server's own
// RetryAfter across the generation's epoch rebase (sketch.lua, rebase:
// the first write 2^31 ms after the epoch decays every cell to now and
// rounds it up to float32; production threshold, fake clock). The server
// denies k's request of 600 with RetryAfter R; a write of another key
// (which shares none of k's cells at L=2, M=64: checked) triggers the
// rebase; at t+R the same request of k is denied again. Decision.RetryAfter:
// "the exact wait ... after which the same request fits if nothing else
// is admitted meanwhile (never early)"; the other key's admission does
// not touch k's cells, yet moves k's debt up by the rounding.
func TestAudit28FixedServerRetryAfterEarlyAcrossRebase(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	clk := sketchtest.NewFakeClock()
	const epoch = 1_780_000_000_000
	clk.Set(epoch)
	l := e.limiter(t, LimiterConfig{Name: "a28rb", Limit: PerSecond(a28Rate, a28Burst), Clock: clk, Levels: 2, CellsPerLevel: 64})
	ctx := context.Background()
	// The generation is created at epoch by the first write.
	other := a28Disjoint(t, l, "k")
	if d, err := l.AllowN(ctx, other, 1); err != nil || !d.Allowed {
		t.Fatalf("setup: %+v, %v", d, err)
	}
	// k's debt, a little before the rebase threshold.
	clk.Set(epoch + 1<<31 - 2_000_000)
	if d, err := l.AllowN(ctx, "k", 999.99); err != nil || !d.Allowed {
		t.Fatalf("setup: AllowN(999.99) = %+v, %v", d, err)
	}
	clk.Advance(1000 * time.Second)
	d, err := l.AllowN(ctx, "k", a28N)
	if err != nil || d.Allowed || d.RetryAfter <= 0 {
		t.Fatalf("setup: AllowN(600) = %+v, %v; want a denial", d, err)
	}
	t1 := clk.NowMillis()
	// Another key's write past the threshold: the rebase, at the ms (of
	// the next 4096) where k's decayed debt lies furthest below the
	// float32 above it, which the rebase stores (read-only Query first).
	base := int64(epoch + 1<<31 + 1)
	clk.Set(base)
	v0, err := l.debtTokens(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	best, excess := base, 0.0
	for ms := range int64(4096) {
		v := v0 - a28Rate*float64(ms)/1000
		if x := float64(a28RoundUp32(v)) - v; x > excess {
			best, excess = base+ms, x
		}
	}
	clk.Set(best)
	if clk.NowMillis() >= t1+d.RetryAfter.Milliseconds() {
		t.Fatalf("setup: the rebase write at %d is not before t+RetryAfter %d", clk.NowMillis(), t1+d.RetryAfter.Milliseconds())
	}
	if d, err := l.AllowN(ctx, other, 1); err != nil || !d.Allowed {
		t.Fatalf("setup: %+v, %v", d, err)
	}
	clk.Set(t1 + d.RetryAfter.Milliseconds())
	var last Decision
	allow := func() bool {
		var err error
		last, err = l.AllowN(ctx, "k", a28N)
		if err != nil {
			t.Fatal(err)
		}
		return last.Allowed
	}
	if allow() {
		return
	}
	first := last
	by := a28EarlyBy(clk, 10_000, allow)
	t.Errorf("server: AllowN(k, 600) denied with RetryAfter %v; another key (no shared cell) admitted meanwhile, which rebased the generation; "+
		"at exactly t+RetryAfter the same request is denied again (%+v), first admitted %d ms later. Want: admitted at t+RetryAfter "+
		"(Decision.RetryAfter: \"the exact wait ... (never early)\")", d.RetryAfter, first, by)
}

// a28RoundUp32 is the float32 at or above v (v > 0).
func a28RoundUp32(v float64) float32 {
	f := float32(v)
	if float64(f) < v {
		f = math.Nextafter32(f, float32(math.Inf(1)))
	}
	return f
}

// a28Disjoint returns a key that shares no cell with key in l's sketch.
func a28Disjoint(t *testing.T, l *Limiter, key string) string {
	t.Helper()
	s := l.Sketch()
	cells := func(k string) []string {
		a := scriptArgs(s.cfg, "T", s.hasher.Sum64String(k), 1, 1, s.rebaseAt)
		return a[4:]
	}
	ck := map[string]bool{}
	for i, c := range cells(key) {
		if i%2 == 0 {
			ck[c] = true
		}
	}
	for i := range 1000 {
		o := "other" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		ok := true
		for j, c := range cells(o) {
			if j%2 == 0 && ck[c] {
				ok = false
			}
		}
		if ok {
			return o
		}
	}
	t.Fatal("no disjoint key")
	return ""
}
