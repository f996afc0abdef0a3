package redis

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit39FixedDenyCacheDeniesRoomAfterRebaseSlack: one instance,
// the deny cache, a limit counting tokens (Limit{1000 x pi/s, 1e6}: a
// drain of 3.14 tokens a ms, not whole, so the server's rebaseSlack
// applies). The server's generation is made at c0; k's debt is set 10 s
// before the generation's first rebase can come (c0 + 2^31 ms), so the
// server's denial of a full Burst adds 1 ms to its ResetAfter (a rebase
// can come before it). The deny cache's dated() reads a ResetAfter above
// the debt's own drain time as "the server's time is ahead" and learns
// the linear debt that drains to 0 then: 1 ms of drain (3.14 tokens) plus
// the ceil above the server's debt, far above learnSlack (one float32
// step of 1e6: 0.0625) with sweepSlack 0 (the bucket drains in 318 s).
// A request of (Burst - debt - 0.5) tokens, room the server holds, is then
// denied by the cache with no round trip. denycache.go: "a request it
// denies, the server would have denied"; docs/distributed.md, "Sweep
// slack": "so with one instance a retry at the server's RetryAfter
// reaches the server".
func TestAudit39FixedDenyCacheDeniesRoomAfterRebaseSlack(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	clk := sketchtest.NewFakeClock()
	const c0 = 1_780_000_000_000
	clk.Set(c0)
	lim := PerSecond(1000*math.Pi, 1e6)
	l := e.limiter(t, LimiterConfig{Name: "a39dc", Limit: lim, Clock: clk, Levels: 2, CellsPerLevel: 64, DenyCacheCells: 1024})
	if l.cache == nil || l.cache.slack != 0 || l.unit != 1 {
		t.Fatalf("setup: want a deny cache counting tokens, no sweep slack; got unit %v", l.unit)
	}
	ctx := context.Background()
	other := a28Disjoint(t, l, "k")
	if d, err := l.AllowN(ctx, other, 1e-6); err != nil || !d.Allowed {
		t.Fatalf("setup: %+v, %v", d, err)
	}
	T := int64(c0 + defaultRebaseAt - 10_000)
	clk.Set(T)
	if d, err := l.AllowN(ctx, "k", 5e5); err != nil || !d.Allowed {
		t.Fatalf("setup: AllowN(5e5) = %+v, %v", d, err)
	}
	clk.Set(T + 1000)
	d, err := l.AllowN(ctx, "k", lim.Burst)
	if err != nil || d.Allowed || l.Stats().CacheDenials != 0 {
		t.Fatalf("setup: AllowN(Burst) = %+v, %v; want the server's denial", d, err)
	}
	debt, err := l.debtTokens(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	own := time.Duration(math.Ceil(debt/lim.Rate*1000)) * time.Millisecond
	learned := l.cache.sk.Load().QueryString("k")
	t.Logf("server debt %v tokens, ResetAfter %v (the debt's own drain %v); the cache learned %v (+%v tokens, %.3v ms of drain); learnSlack %v",
		debt, d.ResetAfter, own, learned, learned-debt, (learned-debt)/(lim.Rate/1000), l.cache.learn)
	n := lim.Burst - debt - 0.5
	before := l.Stats()
	d2, err := l.AllowN(ctx, "k", n)
	if err != nil {
		t.Fatal(err)
	}
	if d2.Allowed {
		return
	}
	byCache := l.Stats().CacheDenials > before.CacheDenials
	t.Errorf("one instance, deny cache, Limit{%v/s, %v}: the server's debt for k is %v tokens, room for AllowN(%v) (%v + %v = %v <= Burst), "+
		"but the call is denied (by the cache: %v): %+v. The server's ResetAfter %v is 1 ms above the debt's own drain %v (rebaseSlack: a rebase is due in 9 s), "+
		"which the cache's dated() takes for a server clock ahead, learning %v tokens (%.3v above the server's, learnSlack %v). "+
		"Want: admitted (denycache.go: \"a request it denies, the server would have denied\"; docs/distributed.md \"Sweep slack\": \"with one instance a retry at the server's RetryAfter reaches the server\")",
		lim.Rate, lim.Burst, debt, n, debt, n, debt+n, byCache, d2, d.ResetAfter, own, learned, learned-debt, l.cache.learn)
}

// TestAudit39DenyCacheRoomNoRebaseNear: the control of the finding above:
// the same limit and requests with the generation's first rebase 24 days
// away; the server adds nothing to its ResetAfter, the cache learns the
// debt within learnSlack, and the request of the room is admitted.
func TestAudit39DenyCacheRoomNoRebaseNear(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	clk := sketchtest.NewFakeClock()
	const c0 = 1_780_000_000_000
	clk.Set(c0)
	lim := PerSecond(1000*math.Pi, 1e6)
	l := e.limiter(t, LimiterConfig{Name: "a39dc0", Limit: lim, Clock: clk, Levels: 2, CellsPerLevel: 64, DenyCacheCells: 1024})
	ctx := context.Background()
	other := a28Disjoint(t, l, "k")
	if d, err := l.AllowN(ctx, other, 1e-6); err != nil || !d.Allowed {
		t.Fatalf("setup: %+v, %v", d, err)
	}
	T := int64(c0 + 10_000)
	clk.Set(T)
	if d, err := l.AllowN(ctx, "k", 5e5); err != nil || !d.Allowed {
		t.Fatalf("setup: AllowN(5e5) = %+v, %v", d, err)
	}
	clk.Set(T + 1000)
	d, err := l.AllowN(ctx, "k", lim.Burst)
	if err != nil || d.Allowed {
		t.Fatalf("setup: AllowN(Burst) = %+v, %v; want the server's denial", d, err)
	}
	debt, _ := l.debtTokens(ctx, "k")
	own := time.Duration(math.Ceil(debt/lim.Rate*1000)) * time.Millisecond
	if d.ResetAfter != own {
		t.Errorf("ResetAfter %v, want the debt's own drain %v (no rebase near)", d.ResetAfter, own)
	}
	if d2, err := l.AllowN(ctx, "k", lim.Burst-debt-0.5); err != nil || !d2.Allowed {
		t.Errorf("AllowN(room) = %+v, %v; want admitted", d2, err)
	}
}

// TestAudit39ServerWaitsExactNearRebase: the server's RetryAfter with a
// rebase due 10 s after the denial (the generation made 2^31 ms - 10 s
// before): for exact units (10/s, Burst 100; 3/s, Burst 7) no slack is
// added at all: 1 ms before RetryAfter the request is denied, at it
// admitted; a lossy limit (pi x 1000/s) whose wait ends before the rebase
// gets none either; one whose wait crosses it is late by exactly 1 ms.
// No writes happen between the denial and the retries except the
// retries themselves (a denial writes nothing), so no rebase runs.
func TestAudit39ServerWaitsExactNearRebase(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	for i, tc := range []struct {
		lim      Limit
		debt, n  float64
		extraMax int64 // ms the RetryAfter may be late
	}{
		{PerSecond(10, 100), 100, 100, 0},           // exact units, wait 10 s crossing the rebase
		{PerSecond(3, 7), 7, 7, 0},                  // exact units (unit 1000, drain 3)
		{PerSecond(1000*math.Pi, 1e6), 1e6, 5, 0},   // lossy, wait 1 ms, before the rebase
		{PerSecond(1000*math.Pi, 1e6), 1e6, 1e4, 0}, // lossy, wait 3.2 s, before the rebase
		{PerSecond(1000*math.Pi, 1e6), 1e6, 1e5, 1}, // lossy, wait 31.8 s, crosses it
	} {
		clk := sketchtest.NewFakeClock()
		const c0 = 1_780_000_000_000
		clk.Set(c0)
		l := e.limiter(t, LimiterConfig{Name: "a39ex" + string(rune('a'+i)), Limit: tc.lim, Clock: clk, Levels: 2, CellsPerLevel: 64})
		ctx := context.Background()
		other := a28Disjoint(t, l, "k")
		if d, err := l.AllowN(ctx, other, 1); err != nil || !d.Allowed {
			t.Fatalf("setup: %+v, %v", d, err)
		}
		T := int64(c0 + defaultRebaseAt - 10_000)
		clk.Set(T)
		if d, err := l.AllowN(ctx, "k", tc.debt); err != nil || !d.Allowed {
			t.Fatalf("case %d setup: AllowN(%v) = %+v, %v", i, tc.debt, d, err)
		}
		clk.Set(T + 1)
		d, err := l.AllowN(ctx, "k", tc.n)
		if err != nil || d.Allowed || d.RetryAfter <= 0 {
			t.Fatalf("case %d setup: AllowN(%v) = %+v, %v; want a denial", i, tc.n, d, err)
		}
		debt, _ := l.debtTokens(ctx, "k")
		exact := time.Duration(math.Ceil((debt+tc.n-tc.lim.Burst)/tc.lim.Rate*1000)) * time.Millisecond
		late := d.RetryAfter - exact
		t.Logf("case %d %+v: RetryAfter %v, exact ceil %v", i, tc.lim, d.RetryAfter, exact)
		if late < 0 || late > time.Duration(tc.extraMax)*time.Millisecond {
			t.Errorf("case %d %+v n=%v: RetryAfter %v, the exact wait %v: late by %v, want 0..%d ms", i, tc.lim, tc.n, d.RetryAfter, exact, late, tc.extraMax)
		}
		t1 := clk.NowMillis()
		clk.Set(t1 + d.RetryAfter.Milliseconds() - 1)
		if late > 0 { // the ms before may fit: probe read-only
			if q, _ := l.debtTokens(ctx, "k"); q+tc.n > tc.lim.Burst && late > 0 {
				t.Logf("case %d: 1 ms before the late RetryAfter the request does not fit yet (debt %v)", i, q)
			}
		} else if d2, _ := l.AllowN(ctx, "k", tc.n); d2.Allowed {
			t.Errorf("case %d %+v: admitted 1 ms before RetryAfter %v: %+v", i, tc.lim, d.RetryAfter, d2)
		}
		clk.Set(t1 + d.RetryAfter.Milliseconds())
		if d2, _ := l.AllowN(ctx, "k", tc.n); !d2.Allowed {
			t.Errorf("case %d %+v: denied at RetryAfter %v: %+v", i, tc.lim, d.RetryAfter, d2)
		}
	}
}

// TestAudit39FixedDenyCacheDeniesAtServerRetryAfterNearRebase: the
// finding above in the docs' own terms: one instance, the deny cache,
// Limit{1000 x pi/s, 1e6}, the generation's first rebase due 9 s after
// the server denies AllowN(k, n) with RetryAfter R (1 ms late by
// rebaseSlack). At exactly t1+R the server holds room for n (read-only
// Query), but the retry is denied by the cache with no round trip.
// docs/distributed.md, "Sweep slack": "so with one instance a retry at
// the server's RetryAfter reaches the server".
func TestAudit39FixedDenyCacheDeniesAtServerRetryAfterNearRebase(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	var fails []string
	for i, n := range []float64{9e5, 6e5, 1e6} {
		clk := sketchtest.NewFakeClock()
		const c0 = 1_780_000_000_000
		clk.Set(c0)
		lim := PerSecond(1000*math.Pi, 1e6)
		l := e.limiter(t, LimiterConfig{Name: "a39dr" + string(rune('a'+i)), Limit: lim, Clock: clk, Levels: 2, CellsPerLevel: 64, DenyCacheCells: 1024})
		ctx := context.Background()
		other := a28Disjoint(t, l, "k")
		if d, err := l.AllowN(ctx, other, 1e-6); err != nil || !d.Allowed {
			t.Fatalf("setup: %+v, %v", d, err)
		}
		T := int64(c0 + defaultRebaseAt - 10_000)
		clk.Set(T)
		if d, err := l.AllowN(ctx, "k", 5e5); err != nil || !d.Allowed {
			t.Fatalf("setup: AllowN(5e5) = %+v, %v", d, err)
		}
		clk.Set(T + 1000)
		d, err := l.AllowN(ctx, "k", n)
		if err != nil || d.Allowed || d.RetryAfter <= 0 || l.Stats().CacheDenials != 0 {
			t.Fatalf("setup: AllowN(%v) = %+v, %v; want the server's denial", n, d, err)
		}
		t1 := clk.NowMillis()
		clk.Set(t1 + d.RetryAfter.Milliseconds())
		debt, _ := l.debtTokens(ctx, "k")
		if debt+n > lim.Burst {
			t.Fatalf("setup: no room at t1+RetryAfter (server debt %v)", debt)
		}
		before := l.Stats()
		d2, err := l.AllowN(ctx, "k", n)
		if err != nil {
			t.Fatal(err)
		}
		if !d2.Allowed {
			fails = append(fails, fmt.Sprintf("n=%v: RetryAfter %v; at t1+RetryAfter the server's debt is %v (room: %v <= %v) but the retry is denied (by the cache: %v): %+v",
				n, d.RetryAfter, debt, debt+n, lim.Burst, l.Stats().CacheDenials > before.CacheDenials, d2))
		}
	}
	if len(fails) > 0 {
		t.Errorf("one instance, deny cache, Limit{1000 x pi/s, 1e6}, a server rebase due 9 s after the denial (rebaseSlack makes the server's waits 1 ms late; the cache's dated() learns that 1 ms as debt): %d of 3 retries at the server's RetryAfter denied:\n%s\n"+
			"Want: admitted (docs/distributed.md \"Sweep slack\": \"so with one instance a retry at the server's RetryAfter reaches the server\")", len(fails), strings.Join(fails, "\n"))
	}
}
