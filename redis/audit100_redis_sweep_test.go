package redis

// Audit 100: seeded sweeps of DecideContext's NextAfter (decide.go:
// "rounded up to the millisecond (exact for a limit in exact units; for
// one counting tokens up to 1 ms late, and in the LocalFallback by its
// waits' slack ...: never early)") on the server, with the deny cache
// (and PreCheck), and in the LocalFallback over 1 to 3 instances:
// decimal and irrational rates, fractional Bursts, requests of
// floor(Remaining)+1 right after an admission. And core's
// Outlook.RemainsIn, the LocalFallback's search.

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/internal/units"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit100RedisNextAfterSweep: after each Decision with NextAfter >
// 0, peeks at +NextAfter-2ms, -1ms and +NextAfter: grown by one whole
// token at +NextAfter (never early); not grown at -2ms (at most 1 ms
// late on the token path); not grown at -1ms for the LocalFallback (no
// sweep slack or lag here: exact on its cells) and for a server's
// decision in exact units of a whole Burst. A denial whose NextAfter was
// cut to RetryAfter is checked for neither lateness nor, in the
// LocalFallback, earliness (TestAudit100RedisNextAfterFindingFallbackCutEarly).
func TestAudit100RedisNextAfterSweep(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	down, cancel := context.WithCancel(context.Background())
	cancel()
	cfgRng := rand.New(rand.NewPCG(100, 1))
	rates := []float64{math.Pi, math.E, 0.7, 1.3, 3.7, 10.0 / 3, 0.3, 7.1, 1000.0 / 7, math.Sqrt2, 0.6, 13.3, 10, 3, 1000.0 / 3600}
	checked, exactChecked, fbChecked := 0, 0, 0
	for ci := range 110 {
		rate := rates[cfgRng.IntN(len(rates))]
		if cfgRng.IntN(2) == 0 {
			rate = 0.1 + cfgRng.Float64()*20
		}
		burst := math.Round((1+cfgRng.Float64()*30)*10) / 10
		if cfgRng.IntN(3) == 0 {
			burst = 1 + cfgRng.Float64()*30
		}
		mode := cfgRng.IntN(6) // 0 server, 1 deny cache, 2 with PreCheck, 3..5 LocalFallback over 1..3
		lim := PerSecond(rate, burst)
		cfg := LimiterConfig{Name: fmt.Sprintf("a100sw%d", ci), Limit: lim, CellsPerLevel: 64}
		ctx, fb := context.Background(), lim
		switch {
		case mode == 1 || mode == 2:
			cfg.DenyCacheCells, cfg.PreCheck = 64, mode == 2
		case mode >= 3:
			n := float64(mode - 2)
			cfg.Policy, cfg.Instances = LocalFallback, uint32(mode-2)
			ctx, fb = down, PerSecond(rate/n, burst/n)
		}
		if fb.Burst < 1 {
			continue
		}
		u, _, ex, _ := units.Units(rate, burst)
		exact := mode < 3 && ex && burst*u == math.Floor(burst*u)
		clk := sketchtest.NewFakeClock()
		clk.Set(1_700_000_000_000)
		cfg.Clock = clk
		l := e.limiter(t, cfg)
		rng := rand.New(rand.NewPCG(uint64(ci), 100))
		whole := int(fb.Burst)
		full := 1000 * fb.Burst / fb.Rate
		peek := func() float64 { return math.Floor(audit100Peek(t, l, ctx, "k")) }
		for i := range 40 {
			if rng.IntN(3) > 0 {
				clk.Advance(time.Duration(rng.Float64()*full*0.5) * time.Millisecond)
			}
			n := 1 + rng.IntN(whole+1)
			d, _ := l.DecideContext(ctx, "k", n)
			if d.Allowed && d.Remaining < d.Burst && rng.IntN(2) == 0 {
				n = d.Remaining + 1
				d, _ = l.DecideContext(ctx, "k", n)
			}
			if d.NextAfter == 0 {
				if d.Remaining != d.Burst && !(mode < 3 && d.Never) && !(mode >= 3 && float64(n) > fb.Burst && float64(n) <= burst) {
					t.Fatalf("%v/s x %v mode %d step %d n=%d: %+v: NextAfter 0 below Burst", rate, burst, mode, i, n, d)
				}
				continue
			}
			if !d.Allowed && d.NextAfter > d.RetryAfter {
				t.Fatalf("%v/s x %v mode %d step %d n=%d: %+v: NextAfter after RetryAfter", rate, burst, mode, i, n, d)
			}
			cut := !d.Allowed && d.NextAfter == d.RetryAfter
			checked++
			clk.Advance(d.NextAfter - 2*time.Millisecond)
			r2 := peek()
			clk.Advance(time.Millisecond)
			r1 := peek()
			clk.Advance(time.Millisecond)
			r0 := peek()
			where := fmt.Sprintf("%v/s x %v mode %d step %d n=%d: %+v; whole Remaining at -2ms %v, -1ms %v, +NextAfter %v", rate, burst, mode, i, n, d, r2, r1, r0)
			if r0 < float64(d.Remaining+1) && !(cut && mode >= 3) {
				t.Fatalf("%s: early", where)
			}
			if cut {
				continue
			}
			if r2 > float64(d.Remaining) {
				t.Fatalf("%s: more than 1 ms late", where)
			}
			if (mode >= 3 || exact) && r1 > float64(d.Remaining) {
				t.Fatalf("%s: late (exact: the LocalFallback on its cells, or exact units)", where)
			}
			if mode >= 3 {
				fbChecked++
			} else if exact {
				exactChecked++
			}
		}
	}
	if checked < 1500 || exactChecked < 100 || fbChecked < 300 {
		t.Fatalf("checked %d NextAfters (%d exact units, %d LocalFallback)", checked, exactChecked, fbChecked)
	}
}

// TestAudit100RedisFallbackLagAndCapSweep: the LocalFallback over 1 to 3
// instances with LimiterConfig.Clock stepped back (a lag of up to 3 s)
// before decisions on keys at the cap (AllowN of Burst/N): NextAfter is
// the 100 ms-order wait on the cells plus the lag, exact (grown at
// +NextAfter, not at -1 ms), unless cut to RetryAfter.
func TestAudit100RedisFallbackLagAndCapSweep(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	down, cancel := context.WithCancel(context.Background())
	cancel()
	rng := rand.New(rand.NewPCG(100, 2))
	checked := 0
	for ci := range 24 {
		rate := 0.2 + rng.Float64()*15
		burst := 2 + math.Round(rng.Float64()*300)/10
		n := uint32(1 + ci%3)
		clk := sketchtest.NewFakeClock()
		clk.Set(1_700_000_000_000)
		l := e.limiter(t, LimiterConfig{Name: fmt.Sprintf("a100lag%d", ci), Limit: PerSecond(rate, burst), Clock: clk, Policy: LocalFallback, Instances: n})
		fbBurst := divDown(burst, n) // the fallback's, rounded down (audit 149)
		if fbBurst < 1 {
			continue
		}
		for j := range 6 {
			key := fmt.Sprint("k", j)
			if d, _ := l.AllowN(down, key, fbBurst); !d.Allowed || d.Remaining != 0 {
				t.Fatalf("AllowN(Burst/N) of a fresh key: %+v", d)
			}
			lag := time.Duration(rng.IntN(3000)) * time.Millisecond
			clk.Set(clk.NowMillis() - lag.Milliseconds())
			want := 1 + rng.IntN(int(fbBurst))
			d, _ := l.DecideContext(down, key, want)
			if d.Allowed || d.Remaining != 0 || d.NextAfter <= lag || d.NextAfter > d.RetryAfter {
				t.Fatalf("%v/s x %v / %d, %v behind, DecideContext(%d) at the cap: %+v", rate, burst, n, lag, want, d)
			}
			if d.NextAfter == d.RetryAfter && want > 1 {
				t.Fatalf("%+v: cut for a request of %d", d, want)
			}
			clk.Advance(d.NextAfter - time.Millisecond)
			if r := math.Floor(audit100Peek(t, l, down, key)); r != 0 {
				t.Fatalf("%v/s x %v / %d, %v behind, %+v: at -1ms Remaining %v (late)", rate, burst, n, lag, d, r)
			}
			clk.Advance(time.Millisecond)
			if r := math.Floor(audit100Peek(t, l, down, key)); r < 1 {
				t.Fatalf("%v/s x %v / %d, %v behind, %+v: at +NextAfter Remaining %v (early)", rate, burst, n, lag, d, r)
			}
			checked++
		}
	}
	if checked < 100 {
		t.Fatalf("checked %d", checked)
	}
}

// TestAudit100RedisRemainsIn: core.Outlook.RemainsIn ("the least whole
// number of ms x >= 0 after the load at which limit less the estimate x
// ms later is at least n ... -1 when no x up to 2^62 ms does"; a guess
// only saves steps) on a LocalFallback-shaped sketch (Linear, [0,
// Burst], Min): the same answer for every guess (negative, 0, around
// the answer, 2^40, 2^62, past it), limit less the estimate read at the
// sketch's clock +x is at least n and at +x-1 is not, and -1 for n
// above the limit.
func TestAudit100RedisRemainsIn(t *testing.T) {
	rng := rand.New(rand.NewPCG(100, 3))
	for ci := range 40 {
		rate := 0.1 + rng.Float64()*20
		burst := 1 + math.Round(rng.Float64()*400)/10
		clk := sketchtest.NewFakeClock()
		clk.Set(1_700_000_000_000)
		sk, err := sketch.New(sketch.Config{Levels: 4, CellsPerLevel: 64, Decay: decay.Linear(rate), Lo: 0, Hi: burst, Aggregator: sketch.Min, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		eng := core.SketchOf(sk)
		key := fmt.Sprint("k", ci)
		sk.UpdateString(key, burst*rng.Float64())
		clk.Advance(time.Duration(rng.IntN(500)) * time.Millisecond)
		o := eng.OutlookString(key)
		rem := burst - o.Value()
		type probe struct {
			ms   int64
			n    float64
			fits bool
		}
		var probes []probe
		for _, n := range []float64{math.Floor(rem) + 1, math.Floor(burst), burst, rem + 0.5} {
			if n > burst {
				continue
			}
			x := o.RemainsIn(n, burst, 0)
			for _, g := range []int64{-5, 1, x - 1, x, x + 1, x + 1000, 1 << 40, 1 << 62, math.MaxInt64} {
				if y := o.RemainsIn(n, burst, g); y != x {
					t.Fatalf("%v/s x %v, n %v: RemainsIn guess 0 %d, guess %d %d", rate, burst, n, x, g, y)
				}
			}
			if x < 0 {
				t.Fatalf("%v/s x %v, n %v <= burst: RemainsIn -1", rate, burst, n)
			}
			probes = append(probes, probe{x, n, true})
			if x > 0 {
				probes = append(probes, probe{x - 1, n, false})
			}
		}
		// The sketch's time only moves forward: probe in order.
		slices.SortFunc(probes, func(a, b probe) int { return cmp.Compare(a.ms, b.ms) })
		t0 := clk.NowMillis()
		for _, p := range probes {
			clk.Set(t0 + p.ms)
			if r := burst - sk.QueryString(key); (r >= p.n) != p.fits {
				t.Fatalf("%v/s x %v, n %v: Remaining at +%d ms %v; RemainsIn says fits %v there", rate, burst, p.n, p.ms, r, p.fits)
			}
		}
		for _, n := range []float64{math.Nextafter(burst, math.Inf(1)), burst + 1} {
			if x := o.RemainsIn(n, burst, 7); x != -1 {
				t.Fatalf("%v/s x %v: RemainsIn(%v) %d; want -1", rate, burst, n, x)
			}
		}
	}
}
