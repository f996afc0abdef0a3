package limit_test

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"github.com/lfgrudge/grudge/sketch"
)

// audit42Fill puts n keys at full debt (their whole burst at one frozen
// instant) and returns how many got their burst.
func audit42Fill(l *limit.Limiter, now time.Time, prefix string, n, burst int) int {
	got := 0
	for i := range n {
		if l.AllowN(now, fmt.Sprintf("%s%d", prefix, i), burst) {
			got++
		}
	}
	return got
}

// audit42Fresh peeks probes fresh keys for one token and returns the share
// denied.
func audit42Fresh(l *limit.Limiter, now time.Time, prefix string, probes int) float64 {
	denied := 0
	for i := range probes {
		if !l.PeekN(now, fmt.Sprintf("%s%d", prefix, i), 1).Allowed {
			denied++
		}
	}
	return float64(denied) / float64(probes)
}

// TestAudit42WithCapacityHolds: a limiter built WithCapacity(N, p) on
// each engine holds N keys at full debt with at most about p of fresh
// keys denied (measured with 100,000 fresh peeks on a frozen fake
// clock), gives at least 1-p of the N keys their burst, states
// Capacity(p) >= N, and reads a Saturation close to the measured rate.
// Promise (limit/engine.go, WithCapacity): "sizes the engine for keys
// keys at their limit at once with at most a share deny of fresh keys
// (keys never seen) denied because of them".
func TestAudit42WithCapacityHolds(t *testing.T) {
	testsize.Serial(t)
	type tc struct {
		name  string
		lim   limit.Limit
		burst int
		keys  int
		deny  float64
		opts  []limit.Option
		eng   limit.Engine
	}
	cases := []tc{
		{"buckets-20k-1%", 10, 20, 20_000, 0.01, nil, limit.Buckets},
		{"buckets-20k-0.1%", 10, 20, 20_000, 0.001, nil, limit.Buckets},
		{"buckets-1k-1%", 1000, 50, 1_000, 0.01, nil, limit.Buckets},
		{"countmin-5k-1%", 10, 20, 5_000, 0.01, []limit.Option{limit.WithEngine(limit.CountMin)}, limit.CountMin},
		{"countmin-3gen-3k-2%", 10, 20, 3_000, 0.02, []limit.Option{limit.WithGenerations(3)}, limit.CountMin},
		// Auto on a slow rate picks the count-min.
		{"auto-slow-3k-1%", 1, 31, 3_000, 0.01, nil, limit.CountMin},
	}
	const probes = 100_000
	for _, c := range cases {
		for seed := uint64(1); seed <= uint64(testsize.Pick(3, 1)); seed++ {
			clk := limittest.NewFakeClock()
			clk.Set(1_700_000_000_000)
			opts := append([]limit.Option{limit.WithClock(clk), limit.WithSeed(seed), limit.WithCapacity(c.keys, c.deny)}, c.opts...)
			l, err := limit.New(c.lim, c.burst, opts...)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if l.Engine() != c.eng {
				t.Fatalf("%s: engine %v, want %v", c.name, l.Engine(), c.eng)
			}
			if cp := l.Capacity(c.deny); cp < c.keys {
				t.Errorf("%s seed %d: built WithCapacity(%d, %v) but Capacity(%v) = %d", c.name, seed, c.keys, c.deny, c.deny, cp)
			}
			now := clk.Now()
			got := audit42Fill(l, now, "held", c.keys, c.burst)
			sat := l.Stats().Saturation
			fresh := audit42Fresh(l, now, "fresh", probes)
			// Allow 3 binomial standard deviations of the 100,000 probes.
			slack := 3 * math.Sqrt(c.deny*(1-c.deny)/probes)
			t.Logf("%s seed %d: %v, %d bytes; got burst %d/%d; fresh denied %.4f%% (target %.2f%%); Saturation %.4f%%",
				c.name, seed, l.Engine(), l.Stats().Bytes, got, c.keys, 100*fresh, 100*c.deny, 100*sat)
			if fresh > c.deny+slack {
				t.Errorf("%s seed %d: fresh keys denied %.4f%%, above the target %.2f%% (+%.4f%% noise)", c.name, seed, 100*fresh, 100*c.deny, 100*slack)
			}
			if float64(got) < (1-c.deny)*float64(c.keys) {
				t.Errorf("%s seed %d: only %d of %d keys got their burst", c.name, seed, got, c.keys)
			}
			if math.Abs(sat-fresh) > 0.25*max(fresh, 0.002) {
				t.Errorf("%s seed %d: Saturation %.4f%% against %.4f%% measured", c.name, seed, 100*sat, 100*fresh)
			}
			// Every held key that got its burst is still denied one token.
			for i := 0; i < c.keys; i += max(1, c.keys/500) {
				if l.PeekN(now, fmt.Sprintf("held%d", i), 1).Allowed {
					t.Fatalf("%s seed %d: held%d at full debt was admitted", c.name, seed, i)
				}
			}
		}
	}
}

// TestAudit42SizingErrors: impossible sizes are refused by New with a
// *sketch.ConfigError naming the field (limit/doc.go, "Input": "New
// returns a *sketch.ConfigError ... for ... an invalid option (...,
// WithCapacity with WithSize); every size is bounded (MaxGenerations,
// WithMaxBytes)"; sizing.go: Suggest's errors have field Capacity).
func TestAudit42SizingErrors(t *testing.T) {
	field := func(err error) string {
		var ce *sketch.ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, sketch.ErrInvalidConfig) {
			return fmt.Sprintf("<not a ConfigError: %v>", err)
		}
		return ce.Field
	}
	cases := []struct {
		name  string
		lim   limit.Limit
		opts  []limit.Option
		field string
	}{
		{"keys 0", 10, []limit.Option{limit.WithCapacity(0, 0.01)}, "Capacity"},
		{"keys -5", 10, []limit.Option{limit.WithCapacity(-5, 0.01)}, "Capacity"},
		{"deny 0", 10, []limit.Option{limit.WithCapacity(100, 0)}, "Capacity"},
		{"deny 1", 10, []limit.Option{limit.WithCapacity(100, 1)}, "Capacity"},
		{"deny NaN", 10, []limit.Option{limit.WithCapacity(100, math.NaN())}, "Capacity"},
		{"deny -Inf", 10, []limit.Option{limit.WithCapacity(100, math.Inf(-1))}, "Capacity"},
		{"deny -0.1 count-min", 1, []limit.Option{limit.WithCapacity(100, -0.1), limit.WithEngine(limit.CountMin)}, "Capacity"},
		{"with size", 10, []limit.Option{limit.WithCapacity(100, 0.01), limit.WithSize(2, 64)}, "Capacity"},
		{"with size, size first", 10, []limit.Option{limit.WithSize(2, 64), limit.WithCapacity(100, 0.01)}, "Capacity"},
		{"buckets above MaxBytes", 10, []limit.Option{limit.WithCapacity(100_000, 0.01), limit.WithMaxBytes(100_000)}, "Size"},
		{"count-min above MaxBytes", 10, []limit.Option{limit.WithEngine(limit.CountMin), limit.WithCapacity(100_000, 0.01), limit.WithMaxBytes(1 << 20)}, "Size"},
		{"buckets huge", 10, []limit.Option{limit.WithCapacity(math.MaxInt, 0.01)}, "Capacity"},
		{"count-min huge", 10, []limit.Option{limit.WithEngine(limit.CountMin), limit.WithCapacity(math.MaxInt/2, 1e-9)}, "Capacity"},
		{"MaxBytes negative buckets", 10, []limit.Option{limit.WithMaxBytes(-1)}, "MaxBytes"},
		{"MaxBytes negative count-min", 10, []limit.Option{limit.WithEngine(limit.CountMin), limit.WithMaxBytes(-1)}, "MaxBytes"},
		{"MaxBytes tiny buckets", 10, []limit.Option{limit.WithMaxBytes(64)}, "Size"},
		{"MaxBytes tiny count-min", 10, []limit.Option{limit.WithSize(1, 8), limit.WithMaxBytes(63)}, "Size"},
		{"generations 17", 10, []limit.Option{limit.WithGenerations(17)}, "Generations"},
	}
	for _, c := range cases {
		_, err := limit.New(c.lim, 20, c.opts...)
		if got := field(err); got != c.field {
			t.Errorf("%s: field %q (%v), want %q", c.name, got, err, c.field)
		}
	}
	for _, a := range []struct {
		keys int
		deny float64
	}{{0, 0.1}, {10, 0}, {10, 1}, {10, math.NaN()}, {math.MaxInt, 0.5}} {
		if _, err := limit.Suggest(a.keys, a.deny); field(err) != "Capacity" {
			t.Errorf("Suggest(%d, %v): %v, want a ConfigError on Capacity", a.keys, a.deny, err)
		}
	}
}

// TestAudit42MaxBytesBoundary: WithMaxBytes compares exactly what
// Suggest's Bytes (count-min: "what WithMaxBytes compares") and the
// documented (Lines + 1) x 64 (Buckets) count: a bound equal to it is
// accepted, one byte less is refused; the built limiter reports Suggest's
// Bytes (Buckets: "the memory the engine holds (Limiter.Sizes().Total)").
func TestAudit42MaxBytesBoundary(t *testing.T) {
	for _, k := range []struct {
		keys int
		deny float64
	}{{1000, 0.01}, {20_000, 0.001}, {77, 0.3}} {
		s, err := limit.Suggest(k.keys, k.deny)
		if err != nil {
			t.Fatal(err)
		}
		bCells := int64(s.Buckets.Lines+1) * 64
		if _, err := limit.New(10, 20, limit.WithCapacity(k.keys, k.deny), limit.WithMaxBytes(bCells)); err != nil {
			t.Errorf("Buckets %v: MaxBytes (Lines+1)*64 = %d refused: %v", k, bCells, err)
		}
		if _, err := limit.New(10, 20, limit.WithCapacity(k.keys, k.deny), limit.WithMaxBytes(bCells-1)); !errors.Is(err, sketch.ErrInvalidConfig) {
			t.Errorf("Buckets %v: MaxBytes %d accepted", k, bCells-1)
		}
		l := limit.MustNew(10, 20, limit.WithCapacity(k.keys, k.deny))
		if l.Sizes().Total != s.Buckets.Bytes || l.Stats().Bytes != s.Buckets.Bytes || l.Sizes().Cells != int(bCells) {
			t.Errorf("Buckets %v: Sizes %+v, Stats.Bytes %d; Suggest Bytes %d, cells %d", k, l.Sizes(), l.Stats().Bytes, s.Buckets.Bytes, bCells)
		}
		cb := int64(s.CountMin.Bytes)
		cm := []limit.Option{limit.WithEngine(limit.CountMin), limit.WithCapacity(k.keys, k.deny)}
		if _, err := limit.New(10, 20, append(cm, limit.WithMaxBytes(cb))...); err != nil {
			t.Errorf("count-min %v: MaxBytes = Suggest's Bytes %d refused: %v", k, cb, err)
		}
		if _, err := limit.New(10, 20, append(cm, limit.WithMaxBytes(cb-1))...); !errors.Is(err, sketch.ErrInvalidConfig) {
			t.Errorf("count-min %v: MaxBytes %d accepted", k, cb-1)
		}
		lc := limit.MustNew(10, 20, cm...)
		// Sizes().Cells is "as allocated (padding and alignment slack
		// included)": a few lines above what MaxBytes compares.
		if c := lc.Sizes().Cells; c < s.CountMin.Bytes || c > s.CountMin.Bytes+1024 {
			t.Errorf("count-min %v: Sizes().Cells %d, Suggest's Bytes %d", k, c, s.CountMin.Bytes)
		} else {
			t.Logf("count-min %v: Sizes().Cells %d, Suggest's Bytes (what MaxBytes compares) %d", k, c, s.CountMin.Bytes)
		}
	}
}

// TestAudit42MemoryAllocated: the memory New allocates is what the
// limiter reports (Stats.Bytes, Sizes().Total), within 64 KiB plus 2%,
// on both engines, and 20,000 keys at full debt allocate nothing in the
// engine ("constant memory", limit/doc.go; Sizes: "constant, whatever the
// number of keys").
func TestAudit42MemoryAllocated(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []limit.Option
	}{
		{"buckets default", nil},
		{"buckets 200k@1%", []limit.Option{limit.WithCapacity(200_000, 0.01)}},
		{"count-min default", []limit.Option{limit.WithEngine(limit.CountMin)}},
		{"count-min 20k@1%", []limit.Option{limit.WithEngine(limit.CountMin), limit.WithCapacity(20_000, 0.01)}},
		{"count-min 3 gens", []limit.Option{limit.WithGenerations(3), limit.WithSize(4, 50_000)}},
	} {
		clk := limittest.NewFakeClock()
		clk.Set(1_700_000_000_000)
		opts := append([]limit.Option{limit.WithClock(clk), limit.WithSeed(7)}, c.opts...)
		var m0, m1, m2 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		l, err := limit.New(10, 20, opts...)
		if err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&m1)
		alloc := int64(m1.TotalAlloc - m0.TotalAlloc)
		rep := int64(l.Stats().Bytes)
		t.Logf("%s: New allocated %d bytes, Stats.Bytes %d, Sizes %+v", c.name, alloc, rep, l.Sizes())
		if alloc > rep+rep/50+64<<10 || alloc < rep-rep/50 {
			t.Errorf("%s: New allocated %d bytes; the limiter reports %d", c.name, alloc, rep)
		}
		now := clk.Now()
		keys := make([]string, 20_000)
		for i := range keys {
			keys[i] = fmt.Sprintf("k%d", i)
		}
		runtime.ReadMemStats(&m1)
		for _, k := range keys {
			l.AllowN(now, k, 20)
		}
		runtime.ReadMemStats(&m2)
		if d := m2.TotalAlloc - m1.TotalAlloc; d > 4096 {
			t.Errorf("%s: 20,000 keys at full debt allocated %d bytes", c.name, d)
		}
		runtime.KeepAlive(l)
	}
}

// audit42SmallSweep builds seeds limiters WithCapacity(keys, deny) on
// engine e, fills each with keys keys at full debt and measures 30,000
// fresh peeks: the mean and worst shares denied, and how many limiters
// denied more than 1.2 x deny (3.5 binomial standard deviations of the
// probes above deny at 1%).
func audit42SmallSweep(e limit.Engine, keys int, deny float64, seeds int) (mean, worst float64, over int) {
	for s := 1; s <= seeds; s++ {
		clk := limittest.NewFakeClock()
		clk.Set(1_700_000_000_000)
		l := limit.MustNew(10, 20, limit.WithClock(clk), limit.WithSeed(uint64(s)*7919), limit.WithCapacity(keys, deny), limit.WithEngine(e))
		now := clk.Now()
		audit42Fill(l, now, "h", keys, 20)
		f := audit42Fresh(l, now, "f", 30_000)
		mean += f / float64(seeds)
		worst = max(worst, f)
		if f > 1.2*deny {
			over++
		}
	}
	return mean, worst, over
}

// TestAudit42FixedCountMinSmallCapacityOverDenies: WithCapacity(50, 1%)
// on the count-min, 50 keys at full debt, 30 seeds of 30,000 fresh keys:
// 1.154% of fresh keys were denied on average, against at most 1%. The
// count-min was sized to the Bloom formula, which ignores double
// hashing's full collisions (core.Index: g = h1 + level*h2; about
// N/(M^2 (L-1)) more, 0.16% here). Fixed: the prediction adds that term
// (bucket.countMinPairs), so a small count-min gets more cells; the mean
// is now at the target. The rate is a mean over hash seeds: a sketch
// this small still varies by seed (about 1 in 5 above 1.2%, as
// docs/capacity.md says), which the target does not bound.
func TestAudit42FixedCountMinSmallCapacityOverDenies(t *testing.T) {
	testsize.Serial(t)
	const seeds = 30
	mean, worst, over := audit42SmallSweep(limit.CountMin, 50, 0.01, seeds)
	t.Logf("count-min WithCapacity(50, 1%%): mean %.4f%%, worst %.4f%%, %d of %d limiters above 1.2%%", 100*mean, 100*worst, over, seeds)
	if mean > 0.0105 {
		t.Errorf("count-min WithCapacity(50, 0.01) with 50 keys at full debt: fresh keys denied %.3f%% on average over %d seeds (worst %.3f%%); want at most 1%% (WithCapacity: \"with at most a share deny of fresh keys ... denied\")",
			100*mean, seeds, 100*worst)
	}
}

// TestAudit42SmallCapacityHolds: where the count-min is larger, and on
// the Buckets engine at every size, WithCapacity's target holds across
// seeds (the count-min at 2000 keys: mean 0.98%, worst 1.13%; Buckets
// at 50, 300 and 2000 keys at 1%: worst 0.07%).
func TestAudit42SmallCapacityHolds(t *testing.T) {
	testsize.Serial(t)
	for i, c := range []struct {
		e    limit.Engine
		keys int
		deny float64
	}{
		{limit.Buckets, 50, 0.01}, {limit.Buckets, 300, 0.01}, {limit.Buckets, 2000, 0.01}, {limit.Buckets, 2000, 0.05},
		{limit.CountMin, 2000, 0.01}, {limit.CountMin, 2000, 0.05},
	} {
		if !testsize.Keep(i, testsize.Sample(1, 2, 4)) {
			continue
		}
		mean, worst, over := audit42SmallSweep(c.e, c.keys, c.deny, 12)
		t.Logf("%v WithCapacity(%d, %v): mean %.4f%%, worst %.4f%%, %d of 12 above 1.2x", c.e, c.keys, c.deny, 100*mean, 100*worst, over)
		if mean > c.deny*1.05 || over > 0 {
			t.Errorf("%v WithCapacity(%d, %v): mean %.4f%%, worst %.4f%%, %d of 12 above 1.2x the target", c.e, c.keys, c.deny, 100*mean, 100*worst, over)
		}
	}
}

// TestAudit42CapacityRoundTripGrid: for limiters built WithCapacity(n,
// deny) on either engine over a grid (n from 1 to 50,000, deny from 1e-4
// to 0.5), Capacity(deny) >= n, and on Buckets Suggest(Capacity(deny),
// deny) fits in the limiter's lines (sizing.go, Capacity: "so that
// Suggest(Capacity(deny), deny) fits in this limiter").
func TestAudit42CapacityRoundTripGrid(t *testing.T) {
	for _, deny := range []float64{0.5, 0.2, 0.05, 0.01, 0.003, 0.001, 1e-4} {
		for j, n := range []int{1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 377, 610, 987, 1597, 2584, 4181, 6765, 10946, 50000} {
			if !testsize.Keep(j, testsize.Sample(1, 3, 7)) && n != 50000 {
				continue
			}
			for _, e := range []limit.Engine{limit.Buckets, limit.CountMin} {
				l, err := limit.New(10, 20, limit.WithCapacity(n, deny), limit.WithEngine(e))
				if err != nil {
					t.Fatalf("%v WithCapacity(%d, %v): %v", e, n, deny, err)
				}
				c := l.Capacity(deny)
				s, err := limit.Suggest(c, deny)
				if err != nil {
					t.Fatalf("Suggest(%d, %v): %v", c, deny, err)
				}
				lines := l.Sizes().Cells/64 - 1
				if c < n || (e == limit.Buckets && s.Buckets.Lines > lines) {
					t.Errorf("%v WithCapacity(%d, %v): Capacity %d; Suggest(Capacity) needs %d lines, the limiter has %d", e, n, deny, c, s.Buckets.Lines, lines)
				}
			}
		}
	}
}

// TestAudit42FixedInfAcceptsImpossibleSizes (fixed: New(Inf) checks these, checkRateless): New(Inf, ...) accepts
// sizing options that New refuses for every finite limit:
// WithCapacity together with WithSize, WithMaxBytes(-1),
// WithEngine(Buckets) with WithSize, WithGenerations(1), WithMaxDebt(-1).
// It does refuse WithEngine(Engine(9)), WithRejectCost(-1) and an empty
// name, so options are validated for Inf, just not these. Promise
// (limit/doc.go, "Input"): "New returns a *sketch.ConfigError ... for
// ... an invalid option (WithEngine(Buckets) where the Buckets engine
// would not be exact, count-min options with it, WithCapacity with
// WithSize); every size is bounded (MaxGenerations, WithMaxBytes)";
// limit/engine.go WithCapacity: "it cannot be combined with WithSize".
// A configuration read as "inf" passes New and fails only once the rate
// is made finite.
func TestAudit42FixedInfAcceptsImpossibleSizes(t *testing.T) {
	for _, c := range []struct {
		name  string
		opts  []limit.Option
		field string
	}{
		{"WithCapacity + WithSize", []limit.Option{limit.WithCapacity(10, 0.1), limit.WithSize(2, 64)}, "Capacity"},
		{"WithMaxBytes(-1)", []limit.Option{limit.WithMaxBytes(-1)}, "MaxBytes"},
		{"WithEngine(Buckets) + WithSize", []limit.Option{limit.WithEngine(limit.Buckets), limit.WithSize(2, 64)}, "Engine"},
		{"WithGenerations(1)", []limit.Option{limit.WithGenerations(1)}, "Generations"},
		{"WithMaxDebt(-1)", []limit.Option{limit.WithMaxDebt(-1)}, "MaxDebt"},
	} {
		_, finite := limit.New(10, 5, c.opts...)
		_, inf := limit.New(limit.Inf, 5, c.opts...)
		var ce *sketch.ConfigError
		if !errors.As(inf, &ce) || ce.Field != c.field {
			t.Errorf("New(Inf, 5, %s) = %v; want a *sketch.ConfigError on %s, as New(10, 5, ...) gives (%v)", c.name, inf, c.field, finite)
		}
	}
}
