package redis

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// audit61Limits are odd limits: float32-unrepresentable Bursts, exact
// units, Every(13ms), huge bursts at slow rates (where a rebase-sized
// jump drains nothing), rates whose quotients round.
var audit61Limits = []Limit{
	PerSecond(0.3, 30000001),           // tokens, Burst not a float32
	PerSecond(10, 5),                   // exact units
	PerSecond(1000.0/13, 7),            // Every(13ms), exact
	PerSecond(1000.0/13, 3e6),          // Every(13ms), huge burst: tokens
	PerSecond(10, 100.0/3),             // tokens, Burst not a float32
	PerSecond(1e-6, 1000.3),            // very slow, Burst not a float32
	PerSecond(math.Pi, 16777217),       // 2^24+1 tokens
	PerSecond(1000*math.E, 1e6+0.1),    // fast, odd
	PerSecond(1000.0/999, 1e9+1),       // huge
	PerSecond(0.123456789, 1<<24+3.25), // odd
	PerSecond(7.0/3, 5.14),             // small, odd
	PerSecond(1000.0/3600, 1000.0/3+1), // per hour
}

// audit61Rig is a limiter with a deny cache (lc), optionally a second
// one on the same Name (lc2), and a plain one (no cache) on the same
// server sketch: the oracle. All share clk.
type audit61Rig struct {
	lc, lc2, plain *Limiter
	clk            *sketchtest.FakeClock
}

func newAudit61Rig(t *testing.T, e *env, name string, lim Limit, pre, two bool) *audit61Rig {
	t.Helper()
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	cfg := LimiterConfig{Name: name, Limit: lim, Clock: clk, Timeout: 5 * time.Second,
		Levels: 4, CellsPerLevel: 64, DenyCacheCells: 1024, PreCheck: pre}
	r := &audit61Rig{clk: clk}
	r.lc = e.limiter(t, cfg)
	if two {
		r.lc2 = e.limiter(t, cfg)
	}
	cfg.DenyCacheCells, cfg.PreCheck = 0, false
	r.plain = e.limiter(t, cfg)
	return r
}

// audit61Random drives one key on a rig: random n, random steps, rebase
// jumps, retries exactly at (and 1 ms after) RetryAfter, peeks at
// ResetAfter, clock steps back. It checks: every cache denial is one the
// server makes at that ms (the plain limiter, asked the same, denies:
// a denial writes nothing); with one instance, a retry exactly at a
// denial's RetryAfter is admitted, and a peek at ResetAfter finds the
// key full.
func audit61Random(t *testing.T, e *env, seed uint64, lim Limit, pre, two, back bool, steps int) (cacheDenials int) {
	t.Helper()
	ctx := context.Background()
	r := newAudit61Rig(t, e, fmt.Sprintf("a61r%d", seed), lim, pre, two)
	l, clk := r.lc, r.clk
	rng := rand.New(rand.NewPCG(seed, 61))
	if err := l.Sketch().Update(ctx, "a61-other", 0); err != nil {
		t.Fatal(err)
	}
	drainMs := lim.Burst / lim.Rate * 1000
	type pending struct {
		n           float64
		retry, rest time.Duration
		at          int64
		fromCache   bool
	}
	var last *pending
	var maxLate time.Duration
	defer func() {
		if !two && !back {
			t.Logf("%v pre=%v: max cache lateness vs the server %v", lim, pre, maxLate)
		}
	}()
	whole := func(x float64) float64 { return math.Max(1, math.Floor(x)) }
	for p := range steps {
		// Time.
		switch k := rng.IntN(12); {
		case k == 0 && drainMs > 3*(1<<30):
			clk.Advance(time.Duration(1<<30+rng.Int64N(1<<20)) * time.Millisecond)
			if err := l.Sketch().Update(ctx, "a61-other", 0); err != nil {
				t.Fatal(err)
			}
		case k == 1 && back:
			clk.Set(clk.NowMillis() - 1 - rng.Int64N(2000))
		case k <= 4 && last != nil && last.retry > 0 && !two:
			// Retry exactly at RetryAfter (or 1 ms after).
			at := last.at + last.retry.Milliseconds() + int64(rng.IntN(2))
			if at >= clk.NowMillis() {
				clk.Set(at)
				d, err := l.AllowN(ctx, "k", last.n)
				if err != nil {
					t.Fatal(err)
				}
				if !d.Allowed && !back {
					t.Errorf("%v pre=%v step %d: n=%v denied at %d (cache %v) with RetryAfter %v; the retry at %d (+%d ms) is denied: %+v (cache denials %d); Decision.RetryAfter: \"never early\"",
						lim, pre, p, last.n, last.at, last.fromCache, last.retry, at, at-last.at-last.retry.Milliseconds(), d, l.Stats().CacheDenials)
				}
				last = nil
				continue
			}
		case k == 5 && last != nil && last.rest > 0 && !two:
			at := last.at + last.rest.Milliseconds()
			if at >= clk.NowMillis() {
				clk.Set(at)
				d, err := r.plain.AllowN(ctx, "k", 0)
				if err != nil {
					t.Fatal(err)
				}
				if d.Remaining != lim.Burst && !back {
					t.Errorf("%v pre=%v step %d: denial at %d (cache %v) said ResetAfter %v; at it the key's Remaining is %v of %v: %+v",
						lim, pre, p, last.at, last.fromCache, last.rest, d.Remaining, lim.Burst, d)
				}
				last = nil
				continue
			}
		default:
			clk.Advance(time.Duration(rng.Float64()*drainMs/float64(1+rng.IntN(40))) * time.Millisecond)
		}
		var n float64
		switch rng.IntN(4) {
		case 0:
			n = whole(rng.Float64() * lim.Burst)
		case 1:
			n = rng.Float64() * lim.Burst / 3
		case 2:
			n = lim.Burst
		default:
			n = whole(rng.Float64() * lim.Burst / 10)
		}
		n = math.Min(n, lim.Burst)
		inst := l
		if two && rng.IntN(2) == 0 {
			inst = r.lc2
		}
		before := inst.Stats().CacheDenials
		now := clk.NowMillis()
		d, err := inst.AllowN(ctx, "k", n)
		if err != nil {
			t.Fatal(err)
		}
		fromCache := inst.Stats().CacheDenials != before
		if fromCache {
			cacheDenials++
			sd, err := r.plain.AllowN(ctx, "k", n)
			if err != nil {
				t.Fatal(err)
			}
			if sd.Allowed {
				t.Errorf("%v pre=%v two=%v step %d: the deny cache denied n=%v at %d (%+v); the server admits it at the same ms (%+v); denycache.go: \"So a request it denies, the server would have denied\"",
					lim, pre, two, p, n, now, d, sd)
				return
			}
			// Lateness against the server's own answer at the same ms
			// (one instance): at most the learn's float32 step, the
			// cap's step, the rebase slack bound and the sweep slack
			// (docs/distributed.md), + 1 ms of rounding.
			if !two && !back && sd.RetryAfter > 0 && d.RetryAfter > 0 {
				c := inst.cache
				w := sd.RetryAfter
				bound := time.Duration(math.Ceil(c.learn/c.rate*1000))*time.Millisecond + c.excess +
					time.Duration(rebaseSlackBound(w.Milliseconds()+c.excess.Milliseconds()+1, c.rebaseAt()))*time.Millisecond + c.slack + time.Millisecond
				if late := d.RetryAfter - w; late > bound {
					t.Errorf("%v pre=%v step %d: n=%v at %d: the cache's RetryAfter %v, the server's %v: late by %v > the documented bound %v (learn %v units, excess %v, sweep %v)",
						lim, pre, p, n, now, d.RetryAfter, w, late, bound, c.learn, c.excess, c.slack)
				}
				if late := d.RetryAfter - w; late > maxLate {
					maxLate = late
				}
			}
		}
		if !d.Allowed && inst == l {
			last = &pending{n: n, retry: d.RetryAfter, rest: d.ResetAfter, at: now, fromCache: fromCache}
		} else if d.Allowed {
			last = nil
		}
	}
	return cacheDenials
}

// TestAudit61DenyCacheRandomOneInstance: one instance with the deny
// cache, PreCheck on and off, odd limits; denials sound, waits never
// early (retried exactly at RetryAfter and 1 ms later).
func TestAudit61DenyCacheRandomOneInstance(t *testing.T) {
	t.Parallel() // its own server (or none), a fake clock: only the longest oracles run side by side
	e := newEnv(t, "rueidis", "standalone")
	total := 0
	for i, lim := range audit61Limits {
		for _, pre := range []bool{false, true} {
			seed := uint64(i*2 + 1)
			if pre {
				seed++
			}
			total += audit61Random(t, e, seed, lim, pre, false, false, 800)
		}
	}
	t.Logf("cache denials: %d", total)
	if total == 0 {
		t.Fatal("no cache denials: the test checks nothing")
	}
}

// TestAudit61DenyCacheRandomTwoInstances: two limiters with deny caches
// on the same Name; every cache denial is one the server makes.
func TestAudit61DenyCacheRandomTwoInstances(t *testing.T) {
	t.Parallel() // its own server (or none), a fake clock: only the longest oracles run side by side
	e := newEnv(t, "rueidis", "standalone")
	total := 0
	for i, lim := range audit61Limits {
		for _, pre := range []bool{false, true} {
			seed := uint64(100 + i*2)
			if pre {
				seed++
			}
			total += audit61Random(t, e, seed, lim, pre, true, false, 500)
		}
	}
	t.Logf("cache denials: %d", total)
}

// TestAudit61DenyCacheRandomClockBack: one instance, the clock stepping
// back at times; every cache denial is one the server makes.
func TestAudit61DenyCacheRandomClockBack(t *testing.T) {
	t.Parallel() // its own server (or none), a fake clock: only the longest oracles run side by side
	e := newEnv(t, "rueidis", "standalone")
	total := 0
	for i, lim := range audit61Limits {
		for _, pre := range []bool{false, true} {
			seed := uint64(200 + i*2)
			if pre {
				seed++
			}
			total += audit61Random(t, e, seed, lim, pre, false, true, 800)
		}
	}
	t.Logf("cache denials: %d", total)
}
