package redis

// Audit 98: DecideContext's NextAfter (decide.go: "the time until
// Remaining grows by one, rounded up to the millisecond, and 0 when
// Remaining equals Burst (with a fractional Burst, the last fraction of
// a token brings no whole one)"; limit.Decision: "On a denial it is at
// most RetryAfter") on seeded walks of one key: the server path (exact
// units, whole and fractional Bursts, a Burst of a fraction of a unit,
// and limits counting tokens), with the deny cache (its local denials'
// Decisions), and the LocalFallback. After a Decision with NextAfter > 0
// the walk peeks (AllowN of 0: reads only) at +NextAfter: Remaining has
// grown by one whole token (never early); for exact units, 1 ms before
// it has not (rounded up to the ms, not later), unless NextAfter was cut
// to RetryAfter. For exact units every field is also the rational
// bucket's (audit86Bucket).

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/units"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// audit98Walk drives key through steps seeded DecideContext calls and
// checks each Decision's NextAfter. ctx is cancelled for the
// LocalFallback's walk (fb is then its Rate/N, Burst/N).
func audit98Walk(t *testing.T, l *Limiter, clk *sketchtest.FakeClock, ctx context.Context, key string, seed uint64, steps int, fb *Limit) {
	t.Helper()
	lim := l.Limit()
	if fb != nil {
		lim = *fb
	}
	unit, _, exact, _ := units.Units(lim.Rate, lim.Burst)
	oracle := fb == nil && exact
	var b *audit86Bucket
	if oracle {
		b = audit86NewBucket(lim, clk.NowMillis())
		if bu := lim.Burst * unit; bu == math.Floor(bu) {
			// Burst as the limiter holds it: whole units (7.3 is 730
			// hundredths, not the float64 just below 7.3)
			b.burst = big.NewRat(int64(bu), int64(unit))
		}
	}
	rng := rand.New(rand.NewPCG(seed, 98))
	full := 1000 * lim.Burst / lim.Rate
	whole := int(math.Floor(lim.Burst))
	peek := func() float64 {
		d, err := l.AllowN(ctx, key, 0)
		if (fb == nil) != (err == nil) || !d.Allowed {
			t.Fatalf("peek: %+v, %v", d, err)
		}
		if oracle {
			b.step(clk.NowMillis(), 0)
		}
		return d.Remaining
	}
	for i := range steps {
		switch rng.IntN(4) {
		case 0:
		case 1:
			clk.Advance(time.Duration(1+rng.IntN(3)) * time.Millisecond)
		default:
			clk.Advance(time.Duration(rng.Float64()*full*0.6) * time.Millisecond)
		}
		var n int
		switch rng.IntN(6) {
		case 0:
			n = max(whole, 1)
		case 1:
			n = whole + 1 // above a whole Burst; within a fractional one's ceiling only if Burst < n
		default:
			n = 1 + rng.IntN(max(whole, 1))
		}
		where := fmt.Sprintf("step %d t+%dms n=%d", i, clk.NowMillis()%1_000_000, n)
		d, err := l.DecideContext(ctx, key, n)
		if (fb == nil) != (err == nil) || (fb != nil && !errors.Is(err, ErrDegraded)) {
			t.Fatalf("%s: %+v, %v", where, d, err)
		}
		if fb != nil && float64(n) > fb.Burst && float64(n) <= l.Limit().Burst {
			// blind: no decision, the limiter's Limit and Burst
			want := limit.Decision{Limit: limit.Limit(l.Limit().Rate), Burst: int(math.Floor(l.Limit().Burst)), Policy: d.Policy}
			if d != want {
				t.Fatalf("%s: %+v; want %+v (no decision)", where, d, want)
			}
			continue
		}
		if d.Burst != whole || d.Remaining > d.Burst || d.Never != (float64(n) > lim.Burst) {
			t.Fatalf("%s: %+v; Burst %d, Never iff n > %v", where, d, whole, lim.Burst)
		}
		if d.Never && d.RetryAfter != limit.InfDuration || !d.Allowed && !d.Never && d.RetryAfter <= 0 {
			t.Fatalf("%s: %+v: a denial's RetryAfter", where, d)
		}
		if !d.Allowed && d.NextAfter > d.RetryAfter {
			t.Fatalf("%s: %+v: NextAfter after RetryAfter (limit.Decision: on a denial at most RetryAfter)", where, d)
		}
		if (d.NextAfter == 0) != (d.Remaining == d.Burst) {
			t.Fatalf("%s: %+v: NextAfter 0 iff Remaining == Burst (decide.go)", where, d)
		}
		if oracle {
			w := b.step(clk.NowMillis(), float64(n))
			if d.Allowed != w.allowed || int64(d.Remaining) != int64(math.Floor(ratFloat(w.remaining))) ||
				d.NextAfter != time.Duration(w.nextMs)*time.Millisecond {
				t.Fatalf("%s: %+v; oracle allowed %v remaining %s next %d ms", where, d, w.allowed, w.remaining.FloatString(6), w.nextMs)
			}
			if !d.Allowed && !d.Never && d.RetryAfter != time.Duration(w.retryMs)*time.Millisecond {
				t.Fatalf("%s: %+v; oracle RetryAfter %d ms", where, d, w.retryMs)
			}
		}
		if d.NextAfter == 0 || rng.IntN(3) == 0 {
			continue
		}
		cut := !d.Allowed && d.NextAfter == d.RetryAfter
		clk.Advance(d.NextAfter - time.Millisecond)
		if r := peek(); oracle && !cut && int(math.Floor(r)) != d.Remaining {
			t.Fatalf("%s: %+v: 1 ms before NextAfter Remaining is already %v (rounded up to the ms: not later)", where, d, r)
		}
		clk.Advance(time.Millisecond)
		if r := peek(); int(math.Floor(r)) < d.Remaining+1 {
			t.Fatalf("%s: %+v: at +NextAfter Remaining is %v; want >= %d (never early)", where, d, r, d.Remaining+1)
		}
	}
}

func ratFloat(r interface{ Float64() (float64, bool) }) float64 { f, _ := r.Float64(); return f }

// audit98WalkLimits: exact units with whole and fractional Bursts (in
// units whole: 2500, 730, 5400, 250; a fraction of a unit: 22.75), and
// limits counting tokens (inexact rates).
var audit98WalkLimits = []Limit{
	PerSecond(10, 5), PerSecond(3, 2.5), PerSecond(10, 7.3), PerSecond(1000.0/3600, 1.5), PerSecond(10, 2.5),
	PerSecond(1000.0/7, 3.25), PerSecond(math.Pi, 2.5), PerSecond(math.E, 4.75), PerSecond(0.7, 1.5),
}

func TestAudit98RedisNextAfterWalkServer(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	for li, lim := range audit98WalkLimits {
		for cache := range 3 { // none, the deny cache, with PreCheck
			t.Run(fmt.Sprintf("%v/%v/cache=%d", lim.Rate, lim.Burst, cache), func(t *testing.T) {
				clk := sketchtest.NewFakeClock()
				clk.Set(1_700_000_000_000)
				cfg := LimiterConfig{Name: fmt.Sprintf("a98w%d-%d", li, cache), Limit: lim, Clock: clk, CellsPerLevel: 64}
				if cache > 0 {
					cfg.DenyCacheCells, cfg.PreCheck = 64, cache == 2
				}
				l := e.limiter(t, cfg)
				audit98Walk(t, l, clk, context.Background(), "k", uint64(10*li+cache), 150, nil)
				if cache > 0 && l.Stats().CacheDenials == 0 {
					t.Fatalf("no local denial: %+v", l.Stats())
				}
			})
		}
	}
}

func TestAudit98RedisNextAfterWalkFallback(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	down, cancel := context.WithCancel(context.Background())
	cancel()
	for li, lim := range audit98WalkLimits {
		for _, n := range []uint32{1, 2} {
			t.Run(fmt.Sprintf("%v/%v/N=%d", lim.Rate, lim.Burst, n), func(t *testing.T) {
				clk := sketchtest.NewFakeClock()
				clk.Set(1_700_000_000_000)
				l := e.limiter(t, LimiterConfig{Name: "a98wfb", Limit: lim, Clock: clk, Policy: LocalFallback, Instances: n})
				fb := Limit{Rate: lim.Rate / float64(n), Burst: lim.Burst / float64(n)}
				if fb.Burst < 1 {
					return // Burst/N below one token: nothing to walk
				}
				audit98Walk(t, l, clk, down, "k", uint64(10+li), 150, &fb)
			})
		}
	}
}
