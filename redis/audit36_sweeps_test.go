package redis

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// Audit 36: debts that last across several horizon sweeps of a local
// sketch (the LocalFallback and the deny cache). core.SweepKeep is 2^29
// ms; a sketch's first sweep is due 2^30 ms after its creation, each
// later one 2^29 ms after the previous one's time. Each sweep re-stamps a
// cell older than 2^29 ms with its decayed value rounded up to float32,
// stamped back by whole ms (atom.Rules.Rebase): the cell then reads up to
// (not quite) 1 ms of drain above the linear drain, and the next sweep
// starts from that raised value. sweepSlack (denycache.go) was a fixed
// 1 ms. Fixed: sweepSlack is 1 ms per sweep a debt can meet
// (floor(Burst/Rate / 2^29 ms)), the deny cache also allows for the
// float32 rounding of a learned debt (learnSlack), and the server adds
// 1 ms per rebase that can come before a wait ends (sketch.lua's
// rebaseSlack).

// a36SweepExcess returns, for a cell of a Linear(rate) sketch whose value
// reads q at time due-1 (ms), the time T in [due, due+window) at which a
// sweep leaves the most drain (in ms) above the decayed value, and that
// excess: Rules.Rebase stores f = float32 at or above v, stamped back
// floor((f-v)*1000/rate) ms, so what stays is the fraction.
func a36SweepExcess(q, rate float64, due, window int64) (best int64, excess float64) {
	best = due
	for dt := range window {
		v := q - rate*float64(dt+1)/1000
		if !(v > 0) {
			break
		}
		f := float64(a28RoundUp32(v))
		e := (f - v) * 1000 / rate
		x := e - math.Floor(e)
		if x > excess && x < 0.999 { // keep clear of the back-- guard's float edge
			best, excess = due+dt, x
		}
	}
	return best, excess
}

// a36Drive runs sweeps of sk (the fallback's or the deny cache's sketch,
// created at c0) while key's debt lasts: before each sweep it reads the
// key at due-1, picks the sweep instant that leaves the most drain
// behind, and runs the sweep there with poke (a call on the limiter that
// reads the local sketch and is denied). It returns how many sweeps ran
// and the observed drift of key's reading above exact(t) in ms of drain
// after each, stopping before stop (ms).
func a36Drive(t *testing.T, clk *sketchtest.FakeClock, sk func() *sketch.Sketch, key string, rate float64,
	c0, stop int64, exact func(int64) float64, poke func()) (sweeps int, drift []float64) {
	t.Helper()
	due := c0 + 2*core.SweepKeep
	for due+1 < stop {
		clk.Set(due - 1)
		q := sk().QueryString(key)
		if !(q > 0) {
			return
		}
		T, _ := a36SweepExcess(q, rate, due, min(8192, stop-1-due))
		clk.Set(T)
		poke()
		sweeps++
		due = T + core.SweepKeep
		clk.Set(T + 1)
		got := sk().QueryString(key)
		drift = append(drift, (got-exact(T+1))/(rate/1000))
	}
	return
}

// TestAudit36FixedFallbackRetryAfterEarlyAcrossSweeps: LocalFallback,
// the server down from the start, one instance, a limit counting tokens
// whose Burst takes 3 or more sweep intervals (2^29 ms each) to drain.
// The key's debt is set once; the same request is denied with
// RetryAfter R; the client polls it (denied, which writes nothing) at
// instants that happen to run the fallback's horizon sweeps; at exactly
// t+R it is denied again. Decision.RetryAfter (limiter.go): "the exact
// wait, rounded up to the ms, after which the same request fits if
// nothing else is admitted meanwhile (never early) ... A wait the deny
// cache or the LocalFallback answers for a limit counting tokens whose
// Burst takes 2^29 ms (6.2 days) or more to drain may be 1 ms late, so
// that it is never early across the local sketch's horizon sweep";
// docs/distributed.md, "Sweep slack": "add 1 ms to their waits, so they
// are never early". Each sweep leaves up to 1 ms of drain; they add up.
func TestAudit36FixedFallbackRetryAfterEarlyAcrossSweeps(t *testing.T) {
	for _, tc := range []struct {
		rate, burst float64
	}{
		{5e-4, 1000.00001}, // drains in 2.0e9 ms: 3 sweeps
		{5e-4, 3000},       // 6.0e9 ms: 10 sweeps
		{1e-3, 4321.5},     // 4.3e9 ms: 7 sweeps
	} {
		t.Run(fmt.Sprintf("rate%v_burst%v", tc.rate, tc.burst), func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			const c0 = 1_780_000_000_000
			clk.Set(c0)
			l := a28FallbackLimiter(t, PerSecond(tc.rate, tc.burst), 1, clk)
			ctx := context.Background()
			n := tc.burst
			// The debt, set half a sweep interval in, so that the cells
			// are old enough at the first sweep (c0 + 2^30).
			t0 := int64(c0 + core.SweepKeep - 10_000)
			clk.Set(t0)
			if d, err := l.AllowN(ctx, "k", n*0.99999); !d.Allowed || !errors.Is(err, ErrDegraded) {
				t.Fatalf("setup: fallback AllowN = %+v, %v; want a fallback admission", d, err)
			}
			f0 := l.fallback.QueryString("k")
			exact := func(ms int64) float64 { return f0 - tc.rate*float64(ms-t0)/1000 }
			clk.Set(t0 + 1000)
			d, _ := l.AllowN(ctx, "k", n)
			if d.Allowed || d.RetryAfter <= 0 {
				t.Fatalf("setup: AllowN(%v) = %+v; want a denial with a RetryAfter", n, d)
			}
			t1 := clk.NowMillis()
			retryAt := t1 + d.RetryAfter.Milliseconds()
			sweeps, drift := a36Drive(t, clk, func() *sketch.Sketch { return l.fallback }, "k", tc.rate, c0, retryAt, exact,
				func() {
					if d, _ := l.AllowN(ctx, "k", n); d.Allowed {
						t.Fatalf("setup: a poll before t+RetryAfter was admitted: %+v", d)
					}
				})
			clk.Set(retryAt)
			var last Decision
			allow := func() bool { last, _ = l.AllowN(ctx, "k", n); return last.Allowed }
			if allow() {
				return
			}
			first := last
			by := a28EarlyBy(clk, 100, allow)
			t.Errorf("LocalFallback (server down), Limit{%v/s, %v}, one key, nothing admitted after t0: AllowN(%v) denied at t1 with RetryAfter %v "+
				"(includes the 1 ms sweep slack); the polls meanwhile ran %d horizon sweeps, after which the key read above the exact linear drain by %.3v ms of drain; "+
				"at exactly t1+RetryAfter the same request is denied again (%+v) and first admitted %d ms later. Want: admitted at t1+RetryAfter "+
				"(limiter.go Decision.RetryAfter: \"never early ... may be 1 ms late, so that it is never early across the local sketch's horizon sweep\"; "+
				"docs/distributed.md \"Sweep slack\")", tc.rate, tc.burst, n, d.RetryAfter, sweeps, drift, first, by)
		})
	}
}

// TestAudit36FixedDenyCacheDeniesAtServerRetryAfterAcrossSweeps: one
// instance with the deny cache, the server healthy, Limit{5e-4/s,
// 1000.00001} (tokens; a full bucket drains in 2e9 ms, so the cache's
// slack is 1 ms). The server admits 999.99 at t0, denies 1000.00001 at
// t0+1000 s with its exact RetryAfter R (the cache learns the debt; the
// server's generation is not rebased before t0+2^31 ms, after R). The
// client polls meanwhile; the polls are denied by the cache (no round
// trip) and run the cache's horizon sweeps (3 of them). At exactly
// t1+R the server holds room for the request (read-only Query), but the
// call is denied by the cache, with no round trip. docs/distributed.md,
// "Sweep slack": "have the deny cache take that much drain off a debt
// before it is certain of a denial, so with one instance a retry at the
// server's RetryAfter reaches the server"; "with one instance a local
// denial's waits are the server's"; denycache.go: "a request it denies,
// the server would have denied". The slack is 1 ms; the cache's debt is
// up to 1 ms of drain higher per sweep.
func TestAudit36FixedDenyCacheDeniesAtServerRetryAfterAcrossSweeps(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	clk := sketchtest.NewFakeClock()
	const c0 = 1_780_000_000_000
	clk.Set(c0)
	lim := PerSecond(a28Rate, a28Burst)
	l := e.limiter(t, LimiterConfig{Name: "a36dc", Limit: lim, Clock: clk, Levels: 2, CellsPerLevel: 64, DenyCacheCells: 1024})
	if l.cache == nil || l.cache.slack < time.Millisecond || l.unit != 1 {
		t.Fatalf("setup: want a deny cache counting tokens with a sweep slack; got unit %v", l.unit)
	}
	ctx := context.Background()
	n := lim.Burst
	t0 := int64(c0 + core.SweepKeep - 2_000_000) // the learned cells are older than 2^29 ms at the first sweep
	clk.Set(t0)
	if d, err := l.AllowN(ctx, "k", 999.99); err != nil || !d.Allowed {
		t.Fatalf("setup: AllowN(999.99) = %+v, %v", d, err)
	}
	f0, err := l.debtTokens(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	exact := func(ms int64) float64 { return f0 - lim.Rate*float64(ms-t0)/1000 }
	clk.Set(t0 + 1_000_000)
	d, err := l.AllowN(ctx, "k", n)
	if err != nil || d.Allowed || d.RetryAfter <= 0 || l.Stats().CacheDenials != 0 {
		t.Fatalf("setup: AllowN(%v) = %+v, %v, stats %+v; want the server's denial", n, d, err, l.Stats())
	}
	t1 := clk.NowMillis()
	retryAt := t1 + d.RetryAfter.Milliseconds()
	if q := l.cache.sk.Load().QueryString("k"); q != exact(t1) {
		t.Logf("note: the cache learned %v, the exact drain from t0 is %v", q, exact(t1))
	}
	polls := l.Stats().CacheDenials
	sweeps, drift := a36Drive(t, clk, func() *sketch.Sketch { return l.cache.sk.Load() }, "k", lim.Rate, c0, retryAt, exact,
		func() {
			if d, err := l.AllowN(ctx, "k", n); err != nil || d.Allowed {
				t.Fatalf("setup: a poll before t+RetryAfter = %+v, %v; want denied", d, err)
			}
		})
	if l.Stats().CacheDenials-polls != int64(sweeps) {
		t.Logf("note: %d of the %d polls were denied by the cache", l.Stats().CacheDenials-polls, sweeps)
	}
	clk.Set(retryAt)
	debt, err := l.debtTokens(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if debt+n > lim.Burst {
		t.Fatalf("setup: the server's debt at t1+RetryAfter is %v: no room for %v within %v (the server's own RetryAfter early?)", debt, n, lim.Burst)
	}
	cached := l.cache.sk.Load().QueryString("k")
	before := l.Stats()
	d2, err := l.AllowN(ctx, "k", n)
	if err != nil {
		t.Fatal(err)
	}
	if d2.Allowed {
		return
	}
	byCache := l.Stats().CacheDenials > before.CacheDenials
	t.Errorf("one instance, deny cache, Limit{%v/s, %v}: the server denied AllowN(%v) at t1 with RetryAfter %v; the client's polls meanwhile ran %d horizon sweeps "+
		"of the cache (its debt then read above the exact drain by %.3v ms of drain); at exactly t1+RetryAfter the server's debt is %v (room for the request) "+
		"but the cache reads %v (%.3v ms of drain above it, slack 1 ms) and the call is denied %s: %+v. Want: the call reaches the server and is admitted "+
		"(docs/distributed.md \"Sweep slack\": \"so with one instance a retry at the server's RetryAfter reaches the server\"; "+
		"denycache.go: \"a request it denies, the server would have denied\")",
		lim.Rate, lim.Burst, n, d.RetryAfter, sweeps, drift, debt, cached, (cached-debt)/(lim.Rate/1000),
		map[bool]string{true: "by the deny cache (no round trip)", false: "by the server"}[byCache], d2)
}

// TestAudit36FixedDenyCacheLearnRoundingNoSweep: one instance with the
// deny cache, limits counting tokens, no horizon sweep at all. The server
// admits a burst, then denies a request with its exact RetryAfter R; the
// cache learns the server's estimate, a float64 (a float32 cell decayed
// for some ms) that a float32 cell does not hold, and stores it rounded
// up (sketch.Update): up to one float32 step above the server's debt
// (2^-14 tokens near 1000: 122 ms of drain at 5e-4/s; 2^-19 near 50: 1.4
// ms at e x 1e-3/s), which neither the 1 ms slack (long drains) nor the
// 0 slack (shorter ones) covers. At exactly t1+R the server has room
// (read-only Query) but the call is denied by the cache, with no round
// trip. docs/distributed.md, "Sweep slack": "so with one instance a
// retry at the server's RetryAfter reaches the server"; "with one
// instance a local denial's waits are the server's"; the staleness
// sources it lists (latency, collisions, racing feeds) are all 0 here
// (a fake clock, one key per sketch cell set, one caller).
func TestAudit36FixedDenyCacheLearnRoundingNoSweep(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	var msgs []string
	for ci, tc := range []struct {
		lim   Limit
		n     float64
		dtMax int64
	}{
		{PerSecond(a28Rate, a28Burst), 1, 1_000_000},  // waits of 1 to 2e6 ms
		{PerSecond(math.E*1e-3, 50), 37.5, 3_700_000}, // waits of 3.8 h
	} {
		lim, n := tc.lim, tc.n
		clk := sketchtest.NewFakeClock()
		const c0 = 1_780_000_000_000
		clk.Set(c0)
		l := e.limiter(t, LimiterConfig{Name: fmt.Sprint("a36lr", ci), Limit: lim, Clock: clk, Levels: 2, CellsPerLevel: 1024, DenyCacheCells: 1 << 16})
		if l.unit != 1 {
			t.Fatalf("setup: %v counts units %v, want tokens", lim, l.unit)
		}
		ctx := context.Background()
		bad, worst, worstAbove := 0, int64(0), 0.0
		var example string
		const trials = 40
		for i := range int64(trials) {
			key := fmt.Sprint("k", i)
			if d, err := l.AllowN(ctx, key, lim.Burst); err != nil || !d.Allowed {
				t.Fatalf("setup: %+v, %v", d, err)
			}
			dt := 1 + (i*7919)%tc.dtMax
			clk.Advance(time.Duration(dt) * time.Millisecond)
			d, err := l.AllowN(ctx, key, n)
			if err != nil || d.Allowed || d.RetryAfter <= 0 {
				t.Fatalf("setup: %+v, %v", d, err)
			}
			server, _ := l.debtTokens(ctx, key)
			learned := l.cache.sk.Load().QueryString(key)
			clk.Advance(d.RetryAfter)
			debt, _ := l.debtTokens(ctx, key)
			if debt+n > lim.Burst {
				t.Fatalf("setup: no room on the server at t1+RetryAfter: %v", debt)
			}
			before := l.Stats().CacheDenials
			allow := func() bool { x, _ := l.AllowN(ctx, key, n); return x.Allowed }
			if !allow() && l.Stats().CacheDenials > before {
				bad++
				at := clk.NowMillis()
				by := int64(0)
				for !allow() {
					by++
					clk.Set(at + by)
				}
				if by > worst {
					worst, worstAbove = by, (learned-server)/(lim.Rate/1000)
					example = fmt.Sprintf("key %s: server debt at t1 %.10g, cache learned %.10g (%.3g ms of drain above); server RetryAfter %v; at t1+RetryAfter "+
						"the server's debt is %.10g (room for %v) but the deny cache denies it (no round trip); first admitted %d ms later", key, server, learned,
						worstAbove, d.RetryAfter, debt, n, by)
				}
			}
		}
		if clk.NowMillis()-c0 >= 2*core.SweepKeep {
			t.Fatalf("setup: %d ms after the cache's creation: past its first horizon sweep", clk.NowMillis()-c0)
		}
		if bad > 0 {
			msgs = append(msgs, fmt.Sprintf("Limit{%v/s, %v} (slack %v): %d of %d retries at the server's RetryAfter denied by the deny cache; worst: %s",
				lim.Rate, lim.Burst, l.cache.slack, bad, trials, example))
		}
	}
	if len(msgs) > 0 {
		t.Errorf("one instance, deny cache, no horizon sweep:\n%s\nWant: the retry reaches the server and is admitted (docs/distributed.md, \"Sweep slack\": "+
			"\"so with one instance a retry at the server's RetryAfter reaches the server\"; \"with one instance a local denial's waits are the server's\")",
			strings.Join(msgs, "\n"))
	}
}

// TestAudit36FixedServerRetryAfterEarlyAcrossRebases: the server
// function's own RetryAfter across several epoch rebases (sketch.lua,
// rebase: a write 2^31 ms or more after a generation's epoch decays every
// cell to now, rounds it up to float32 and stamps it back by whole ms,
// leaving up to 1 ms of drain; here the threshold is lowered with
// setRebaseAt, as sketch.lua's header allows for tests, to 2^26 ms so
// that a 23-day drain crosses many rebases; the production threshold
// gives one rebase per 24.8 days of drain). The server denies k's
// request with RetryAfter R; another key (no shared cell) is admitted
// now and then, each write rebasing the generation; at exactly t1+R
// k's request is denied again. Decision.RetryAfter (limiter.go): "the
// exact wait, rounded up to the ms, after which the same request fits
// if nothing else is admitted meanwhile (never early)".
func TestAudit36FixedServerRetryAfterEarlyAcrossRebases(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	for i, tc := range []struct {
		rebaseAt, pre int64
		lim           Limit
	}{
		{1 << 26, 0, PerSecond(a28Rate, a28Burst)},
		{defaultRebaseAt, 0, PerSecond(a28Rate, 3000)}, // production: 69 days of drain, 2 rebases
		// production, one rebase: the generation made 10 days before
		// k's debt of 23 days
		{defaultRebaseAt, 864_000_000, PerSecond(a28Rate, a28Burst)},
	} {
		t.Run(fmt.Sprintf("rebaseAt%d_burst%v_pre%d", tc.rebaseAt, tc.lim.Burst, tc.pre), func(t *testing.T) {
			a36ServerRebases(t, e, fmt.Sprintf("a36rb%d", i), tc.rebaseAt, tc.pre, tc.lim)
		})
	}
}

// a36ServerRebases: the generation is made by a write of another key at
// t0-pre, k's debt is set at t0.
func a36ServerRebases(t *testing.T, e *env, name string, rebaseAt, pre int64, lim Limit) {
	clk := sketchtest.NewFakeClock()
	const t0 = 1_780_000_000_000
	clk.Set(t0 - pre)
	l := e.limiter(t, LimiterConfig{Name: name, Limit: lim, Clock: clk, Levels: 2, CellsPerLevel: 64})
	l.Sketch().setRebaseAt(rebaseAt)
	ctx := context.Background()
	other := a28Disjoint(t, l, "k")
	if d, err := l.AllowN(ctx, other, 1e-6); err != nil || !d.Allowed {
		t.Fatalf("setup: %+v, %v", d, err)
	}
	clk.Set(t0)
	if d, err := l.AllowN(ctx, "k", lim.Burst*0.99999); err != nil || !d.Allowed {
		t.Fatalf("setup: AllowN = %+v, %v", d, err)
	}
	f0, _ := l.debtTokens(ctx, "k")
	exact := func(ms int64) float64 { return f0 - lim.Rate*float64(ms-t0)/1000 }
	clk.Set(t0 + 1_000_000)
	n := lim.Burst
	d, err := l.AllowN(ctx, "k", n)
	if err != nil || d.Allowed || d.RetryAfter <= 0 {
		t.Fatalf("setup: AllowN(%v) = %+v, %v; want a denial", n, d, err)
	}
	t1 := clk.NowMillis()
	retryAt := t1 + d.RetryAfter.Milliseconds()
	var drift []float64
	for at := t0 - pre + rebaseAt + 10_000; at+8192 < retryAt; at = at + rebaseAt + 10_000 {
		clk.Set(at - 1)
		q, err := l.debtTokens(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		T, _ := a36SweepExcess(q, lim.Rate, at, 8192)
		clk.Set(T)
		if d, err := l.AllowN(ctx, other, 1e-6); err != nil || !d.Allowed {
			t.Fatalf("setup: %+v, %v", d, err)
		}
		clk.Set(T + 1)
		q, _ = l.debtTokens(ctx, "k")
		drift = append(drift, (q-exact(T+1))/(lim.Rate/1000))
	}
	clk.Set(retryAt)
	var last Decision
	allow := func() bool {
		var err error
		last, err = l.AllowN(ctx, "k", n)
		if err != nil {
			t.Fatal(err)
		}
		return last.Allowed
	}
	if allow() {
		return
	}
	first := last
	by := a28EarlyBy(clk, 1000, allow)
	t.Errorf("server (rebase threshold %d ms), Limit{%v/s, %v}: AllowN(k, %v) denied at t1 with RetryAfter %v; another key (no shared cell) admitted %d times meanwhile, "+
		"each rebasing the generation, after which k read above the exact linear drain by %.3v ms of drain; at exactly t1+RetryAfter the same request is denied again (%+v), "+
		"first admitted %d ms later. Want: admitted at t1+RetryAfter (Decision.RetryAfter: \"the exact wait ... (never early)\")",
		rebaseAt, lim.Rate, lim.Burst, n, d.RetryAfter, len(drift), drift, first, by)
}

// TestAudit36FixedServerRetryAfterEarlyOneRebaseUnchosen: the server,
// the production rebase threshold (2^31 ms), no chosen instants. For 64
// variants (k's denial at t0+1000 s+off x 7919 ms, another key's write
// that rebases the generation at epoch+2^31 ms+10 s+off x 104729 ms),
// k's debt of 999.99 tokens at 5e-4/s (23 days) crosses one rebase; the
// retry at exactly t1+RetryAfter is denied in about half of them.
// Decision.RetryAfter: "the exact wait ... (never early)"; sketch.lua's
// rebase comment: "it reads v at tm and after, never less, and above v -
// drain by less than 1 ms of drain" (less than 1 ms, but the server's
// RetryAfter has no slack for it).
func TestAudit36FixedServerRetryAfterEarlyOneRebaseUnchosen(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	var bad []string
	for off := range int64(64) {
		clk := sketchtest.NewFakeClock()
		const t0 = 1_780_000_000_000
		const pre = 864_000_000 // the generation is made 10 days before k's debt
		clk.Set(t0 - pre)
		lim := PerSecond(a28Rate, a28Burst)
		l := e.limiter(t, LimiterConfig{Name: fmt.Sprint("a36r1", off), Limit: lim, Clock: clk, Levels: 2, CellsPerLevel: 64})
		ctx := context.Background()
		other := a28Disjoint(t, l, "k")
		if d, err := l.AllowN(ctx, other, 1e-6); err != nil || !d.Allowed {
			t.Fatalf("setup: %+v, %v", d, err)
		}
		clk.Set(t0)
		if d, err := l.AllowN(ctx, "k", lim.Burst*0.99999); err != nil || !d.Allowed {
			t.Fatalf("setup: %+v, %v", d, err)
		}
		clk.Set(t0 + 1_000_000 + off*7919)
		d, err := l.AllowN(ctx, "k", lim.Burst)
		if err != nil || d.Allowed || d.RetryAfter <= 0 {
			t.Fatalf("setup: %+v, %v", d, err)
		}
		t1 := clk.NowMillis()
		rb := t0 - pre + defaultRebaseAt + 10_000 + off*104729
		if rb >= t1+d.RetryAfter.Milliseconds() {
			t.Fatalf("setup: the rebase at %d is not before t1+RetryAfter", rb)
		}
		clk.Set(rb)
		if d, err := l.AllowN(ctx, other, 1e-6); err != nil || !d.Allowed {
			t.Fatalf("setup: %+v, %v", d, err)
		}
		clk.Set(t1 + d.RetryAfter.Milliseconds())
		var last Decision
		allow := func() bool { last, _ = l.AllowN(ctx, "k", lim.Burst); return last.Allowed }
		if !allow() {
			first := last
			bad = append(bad, fmt.Sprintf("off %d: RetryAfter %v, denied at t1+RetryAfter (%v more), first admitted %d ms later",
				off, d.RetryAfter, first.RetryAfter, a28EarlyBy(clk, 100, allow)))
		}
	}
	if len(bad) > 0 {
		t.Errorf("server, production rebase threshold, Limit{5e-4/s, 1000.00001}, one rebase (another key's write) during k's wait: %d of 64 retries at exactly t1+RetryAfter denied "+
			"(Decision.RetryAfter: \"the exact wait ... (never early)\"):\n%s", len(bad), strings.Join(bad, "\n"))
	}
}

// TestAudit36FixedFallbackRetryAfterEarlyPolling: the LocalFallback
// case with no chosen instants: a client polling the denied key every
// 6 h + off ms (denied polls write nothing; they run the horizon sweeps
// when due). 64 variants each for a 23-day debt (3 sweeps) and a 69-day
// one (10 sweeps). Decision.RetryAfter: "never early ... may be 1 ms
// late, so that it is never early across the local sketch's horizon
// sweep".
func TestAudit36FixedFallbackRetryAfterEarlyPolling(t *testing.T) {
	var msgs []string
	for _, burst := range []float64{1000.00001, 3000} {
		early, worst := 0, 0
		for off := range int64(64) {
			clk := sketchtest.NewFakeClock()
			const c0 = 1_780_000_000_000
			clk.Set(c0)
			l := a28FallbackLimiter(t, PerSecond(5e-4, burst), 1, clk)
			ctx := context.Background()
			t0 := int64(c0 + core.SweepKeep - 10_000)
			clk.Set(t0)
			if d, err := l.AllowN(ctx, "k", burst*0.99999); !d.Allowed || !errors.Is(err, ErrDegraded) {
				t.Fatalf("setup: %+v, %v", d, err)
			}
			clk.Set(t0 + 1000 + off*7919)
			d, _ := l.AllowN(ctx, "k", burst)
			if d.Allowed || d.RetryAfter <= 0 {
				t.Fatalf("setup: %+v", d)
			}
			t1 := clk.NowMillis()
			retryAt := t1 + d.RetryAfter.Milliseconds()
			for ts := t1 + 6*3600*1000 + off; ts < retryAt; ts += 6 * 3600 * 1000 {
				clk.Set(ts)
				if p, _ := l.AllowN(ctx, "k", burst); p.Allowed {
					t.Fatalf("setup: a poll before t1+RetryAfter admitted: %+v", p)
				}
			}
			clk.Set(retryAt)
			allow := func() bool { x, _ := l.AllowN(ctx, "k", burst); return x.Allowed }
			if !allow() {
				early++
				worst = max(worst, a28EarlyBy(clk, 100, allow))
			}
		}
		if early > 0 {
			msgs = append(msgs, fmt.Sprintf("Limit{5e-4/s, %v}: %d of 64 retries at t1+RetryAfter denied, the worst first admitted %d ms later", burst, early, worst))
		}
	}
	if len(msgs) > 0 {
		t.Errorf("LocalFallback (server down), a client polling every 6 h: %s. Want: admitted at t1+RetryAfter "+
			"(Decision.RetryAfter: \"never early ... may be 1 ms late, so that it is never early across the local sketch's horizon sweep\")", strings.Join(msgs, "; "))
	}
}

// TestAudit36FixedDenyCacheDeniesAtServerRetryAfterPolling: the deny
// cache case with no chosen instants: one instance, Limit{5e-4/s,
// 1000.00001}, the server denies 1000.00001 at t1 with RetryAfter R (the
// cache learns the debt exactly: 0.5 tokens drained since a float32
// write); the client polls every 6 h + off x 7919 ms (the cache denies,
// and its horizon sweeps run when due); at exactly t1+R the server has
// room but the cache denies, in about 19 of 32 variants. Same promises
// as TestAudit36FixedDenyCacheDeniesAtServerRetryAfterAcrossSweeps.
func TestAudit36FixedDenyCacheDeniesAtServerRetryAfterPolling(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	var bad []string
	for off := range int64(32) {
		clk := sketchtest.NewFakeClock()
		const c0 = 1_780_000_000_000
		clk.Set(c0)
		lim := PerSecond(a28Rate, a28Burst)
		l := e.limiter(t, LimiterConfig{Name: fmt.Sprint("a36dcp", off), Limit: lim, Clock: clk, Levels: 2, CellsPerLevel: 64, DenyCacheCells: 1024})
		ctx := context.Background()
		t0 := int64(c0 + core.SweepKeep - 2_000_000)
		clk.Set(t0)
		if d, err := l.AllowN(ctx, "k", 999.99); err != nil || !d.Allowed {
			t.Fatalf("setup: %+v, %v", d, err)
		}
		clk.Set(t0 + 1_000_000)
		d, err := l.AllowN(ctx, "k", lim.Burst)
		if err != nil || d.Allowed || d.RetryAfter <= 0 {
			t.Fatalf("setup: %+v, %v", d, err)
		}
		t1 := clk.NowMillis()
		retryAt := t1 + d.RetryAfter.Milliseconds()
		for ts := t1 + 6*3600*1000 + off*7919; ts < retryAt; ts += 6 * 3600 * 1000 {
			clk.Set(ts)
			if p, err := l.AllowN(ctx, "k", lim.Burst); err != nil || p.Allowed {
				t.Fatalf("setup: a poll before t1+RetryAfter: %+v, %v", p, err)
			}
		}
		clk.Set(retryAt)
		if debt, err := l.debtTokens(ctx, "k"); err != nil || debt+lim.Burst > lim.Burst {
			t.Fatalf("setup: the server's debt at t1+RetryAfter is %v, %v", debt, err)
		}
		before := l.Stats().CacheDenials
		if x, err := l.AllowN(ctx, "k", lim.Burst); err == nil && !x.Allowed {
			bad = append(bad, fmt.Sprintf("off %d: cache reads %.4g tokens (server 0), denied %s, RetryAfter %v", off, l.cache.sk.Load().QueryString("k"),
				map[bool]string{true: "by the deny cache", false: "by the server"}[l.Stats().CacheDenials > before], x.RetryAfter))
		}
	}
	if len(bad) > 0 {
		t.Errorf("one instance, deny cache, a client polling every 6 h across the cache's horizon sweeps: %d of 32 retries at the server's RetryAfter (server debt 0) denied:\n%s\n"+
			"Want: they reach the server and are admitted (docs/distributed.md \"Sweep slack\": \"so with one instance a retry at the server's RetryAfter reaches the server\")",
			len(bad), strings.Join(bad, "\n"))
	}
}
