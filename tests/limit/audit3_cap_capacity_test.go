package limit_test

// Audit 3, capacity: the capacity claims of package limit, measured
// through the public API on a frozen fake clock (docs/capacity.md's
// protocol: N keys take their whole burst, then fresh keys ask for one
// token).
//
//   - limit/doc.go, "Engines": "A key at its limit takes about 5 bytes:
//     the default 6.1 MiB holds a million keys at full debt while denying
//     0.03% of fresh keys (docs/capacity.md)."
//   - Limiter.Capacity: "how many keys at their limit at once the
//     limiter's memory holds with at most a share deny of fresh keys
//     denied because of them".
//   - Stats.Saturation: "the estimated probability that a fresh key (one
//     the limiter has never seen) asking for one token now is denied".

import (
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a3capFill asks AllowN(tm, prefix-i, burst) for i in [from, to), on
// workers goroutines, and returns how many were admitted.
func a3capFill(l *limit.Limiter, tm time.Time, prefix string, from, to, burst, workers int) int {
	var got atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			buf := make([]byte, 0, 32)
			n := 0
			for i := from + w; i < to; i += workers {
				buf = strconv.AppendInt(append(buf[:0], prefix...), int64(i), 10)
				if l.AllowN(tm, string(buf), burst) {
					n++
				}
			}
			got.Add(int64(n))
		})
	}
	wg.Wait()
	return int(got.Load())
}

// a3capProbe returns how many of n fresh keys prefix-i would be denied
// one token (PeekN: nothing written).
func a3capProbe(l *limit.Limiter, tm time.Time, prefix string, n int) int {
	buf := make([]byte, 0, 32)
	denied := 0
	for i := range n {
		buf = strconv.AppendInt(append(buf[:0], prefix...), int64(i), 10)
		if !l.PeekN(tm, string(buf), 1).Allowed {
			denied++
		}
	}
	return denied
}

// a3capMillion is docs/capacity.md's protocol for the default limiter's
// claim, on an engine of lines lines: K = 1M x lines/(the default's
// lines: 99,929) keys take their burst (the claim's keys per line), then
// fresh keys peek. The fingerprint-collision rate that makes the claim
// depends on the keys per slot only, so a smaller engine must meet it
// too. It then fills the engine to Capacity(0.01) (if extend) and checks that this many keys
// are held at 1% (docs/capacity.md: the default "holds 1,249,306 keys at
// 1%").
func a3capMillion(t *testing.T, l *limit.Limiter, clk *sketchtest.FakeClock, lines, probes, workers int, extend bool) {
	defaultLines := limit.MustNew(10, 20).Sizes().Cells/64 - 1 // 99,929 (docs/capacity.md)
	keys := int(math.Round(1e6 * float64(lines) / float64(defaultLines)))
	tm := clk.Now() // frozen: nothing drains
	got := a3capFill(l, tm, "user-", 0, keys, 20, workers)
	if miss := keys - got; float64(miss) > a3capBinom(keys, 0.0003) {
		t.Errorf("%d keys at full debt (the claim's million, scaled to %d lines): %d did not get their burst (%s); docs/capacity.md measures 0.016%%", keys, lines, miss, a3capPct(float64(miss)/float64(keys)))
	}
	denied := a3capProbe(l, tm, "fresh-", probes)
	rate := float64(denied) / float64(probes)
	sat := l.Stats().Saturation
	t.Logf("%d lines, %d keys at full debt: %d got their burst, %s of %d fresh keys denied, Saturation %s", lines, keys, got, a3capPct(rate), probes, a3capPct(sat))
	// The claim: 0.03% of fresh keys denied (measured 0.0325%).
	if float64(denied) > a3capBinom(probes, 0.0003) {
		t.Errorf("%s of fresh keys denied with %d keys at full debt in %d lines; the doc claims 0.03%% (a million in the default's lines)", a3capPct(rate), keys, lines)
	}
	if sat > 0.0006 || sat < 0.00015 {
		t.Errorf("Saturation %s with %s measured (docs/capacity.md: 0.0306%%)", a3capPct(sat), a3capPct(rate))
	}

	if !extend {
		return
	}
	// Up to Capacity(0.01): still at most 1% of fresh keys denied, and the
	// keys that arrived got their burst (each arrival met a denial rate
	// of at most 1%).
	c := l.Capacity(0.01)
	more := a3capFill(l, tm, "user-", keys, c, 20, workers)
	denied = a3capProbe(l, tm, "fresh2-", probes/4)
	rate = float64(denied) / float64(probes/4)
	t.Logf("Capacity(0.01) = %d keys: %d of the %d more got their burst, %s of fresh keys denied, Saturation %s", c, more, c-keys, a3capPct(rate), a3capPct(l.Stats().Saturation))
	if float64(denied) > a3capBinom(probes/4, 0.01) {
		t.Errorf("at Capacity(0.01) = %d keys, %s of fresh keys denied: above 1%%", c, a3capPct(rate))
	}
	if miss := c - got - more; float64(miss) > a3capBinom(c, 0.01) {
		t.Errorf("at Capacity(0.01) = %d keys, %d did not get their burst", c, miss)
	}
}

// TestAudit3CapMillionScaled: the default's claim (a million keys at full
// debt in its 99,929 lines, 0.03% of fresh keys denied), at a twentieth of
// the lines and of the keys: the same keys per slot; then the engine
// holds Capacity(0.01) keys at 1%.
func TestAudit3CapMillionScaled(t *testing.T) {
	// WithCapacity's sizing is Suggest's; pick the keys that give a
	// twentieth of the default's lines.
	lo, hi := 1, 1_000_000
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		s, err := limit.Suggest(mid, 0.01)
		if err != nil {
			t.Fatal(err)
		}
		if s.Buckets.Lines <= 4_997 {
			lo = mid
		} else {
			hi = mid
		}
	}
	clk := sketchtest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	l, err := limit.New(10, 20, limit.WithClock(clk), limit.WithSeed(1), limit.WithCapacity(lo, 0.01))
	if err != nil {
		t.Fatal(err)
	}
	lines := l.Sizes().Cells/64 - 1
	if l.Engine() != limit.Buckets || lines < 4_950 || lines > 4_997 {
		t.Fatalf("engine %v with %d lines", l.Engine(), lines)
	}
	a3capMillion(t, l, clk, lines, 100_000, 1, true)
}

// TestAudit3CapMillionDefault: the claim itself, on limit.New(10, 20)'s
// default memory (6.1 MiB) with a million keys (a million AllowN calls,
// about 10 s under -race: skipped in -short mode only;
// TestAudit3CapMillionScaled asserts the same claim at a twentieth of the
// size in every mode).
func TestAudit3CapMillionDefault(t *testing.T) {
	if testsize.Small() {
		return
	}
	clk := sketchtest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	l, err := limit.New(10, 20, limit.WithClock(clk), limit.WithSeed(1))
	if err != nil {
		t.Fatal(err)
	}
	if l.Engine() != limit.Buckets {
		t.Fatalf("limit.New(10, 20) runs on %v", l.Engine())
	}
	if mib := float64(l.Sizes().Total) / (1 << 20); mib < 6.05 || mib > 6.15 {
		t.Fatalf("default memory %.3f MiB, the doc says 6.1 MiB", mib)
	}
	a3capMillion(t, l, clk, l.Sizes().Cells/64-1, 100_000, 1, false)
}

// TestAudit3CapCapacityHolds: a limiter built WithCapacity(keys, deny)
// reports Capacity(deny) >= keys, and holds Capacity(deny) keys at full
// debt with at most deny of fresh keys denied, the keys that arrived
// having got their burst (each met a rate of at most deny); at 2x and 4x
// Capacity the measured rate rises above deny (the engine is full).
func TestAudit3CapCapacityHolds(t *testing.T) {
	for _, tc := range []struct {
		keys int
		deny float64
	}{{3000, 0.1}, {5000, 0.01}, {8000, 0.001}} {
		t.Run(fmt.Sprintf("%d@%v", tc.keys, tc.deny), func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			clk.Set(1_700_000_000_000)
			l, err := limit.New(10, 20, limit.WithClock(clk), limit.WithSeed(7), limit.WithCapacity(tc.keys, tc.deny))
			if err != nil {
				t.Fatal(err)
			}
			c := l.Capacity(tc.deny)
			if c < tc.keys {
				t.Fatalf("Capacity(%v) = %d < the %d keys WithCapacity asked for", tc.deny, c, tc.keys)
			}
			tm := clk.Now()
			const probes = 20_000
			got := a3capFill(l, tm, "k-", 0, c, 20, 1)
			denied := a3capProbe(l, tm, "fresh-", probes)
			t.Logf("Capacity %d: %d got their burst; %s of fresh keys denied; Saturation %s", c, got, a3capPct(float64(denied)/probes), a3capPct(l.Stats().Saturation))
			if float64(denied) > a3capBinom(probes, tc.deny) {
				t.Errorf("at Capacity(%v) = %d keys: %s of fresh keys denied, above %v", tc.deny, c, a3capPct(float64(denied)/probes), tc.deny)
			}
			if miss := c - got; float64(miss) > a3capBinom(c, tc.deny) {
				t.Errorf("at Capacity(%v) = %d keys: %d did not get their burst", tc.deny, c, miss)
			}
			prev := float64(denied) / probes
			for _, mult := range []int{2, 4} {
				a3capFill(l, tm, "k-", (mult/2)*c, mult*c, 20, 1)
				r := float64(a3capProbe(l, tm, fmt.Sprint("fresh", mult, "-"), probes)) / probes
				t.Logf("%dx Capacity: %s of fresh keys denied; Saturation %s", mult, a3capPct(r), a3capPct(l.Stats().Saturation))
				if r < prev || r < tc.deny {
					t.Errorf("at %dx Capacity(%v): %s denied, not above the target nor rising (%s before)", mult, tc.deny, a3capPct(r), a3capPct(prev))
				}
				prev = r
			}
		})
	}
}

// TestAudit3CapCapacityPerSeed: Limiter.Capacity is "how many keys at
// their limit at once the limiter's memory holds with at most a share
// deny of fresh keys denied because of them", and WithCapacity "sizes the
// engine for keys keys at their limit at once with at most a share deny
// of fresh keys (keys never seen) denied because of them". The hash seed
// is crypto/rand's by default, so every seed is a limiter a user may get:
// each must hold Capacity(deny) keys at full debt with at most deny of
// fresh keys denied (here with a 1.5x margin over the probes' noise).
// Sizes of docs/capacity.md's own "Sizing" table's magnitude: 1,000 keys
// at 1% (80 lines) and 20,000 at 0.1% (1,668 lines).
func TestAudit3CapCapacityPerSeed(t *testing.T) {
	for _, tc := range []struct {
		keys   int
		deny   float64
		seeds  int
		probes int
	}{{1000, 0.01, 10, 10_000}, {20_000, 0.001, 3, 20_000}} {
		for seed := uint64(1); seed <= uint64(tc.seeds); seed++ {
			t.Run(fmt.Sprintf("%d@%v/seed%d", tc.keys, tc.deny, seed), func(t *testing.T) {
				clk := sketchtest.NewFakeClock()
				clk.Set(1_700_000_000_000)
				l, err := limit.New(10, 20, limit.WithClock(clk), limit.WithSeed(seed), limit.WithCapacity(tc.keys, tc.deny))
				if err != nil {
					t.Fatal(err)
				}
				c := l.Capacity(tc.deny)
				if c < tc.keys {
					t.Fatalf("Capacity(%v) = %d < %d", tc.deny, c, tc.keys)
				}
				tm := clk.Now()
				got := a3capFill(l, tm, "k-", 0, c, 20, 1)
				denied := a3capProbe(l, tm, "fresh-", tc.probes)
				rate := float64(denied) / float64(tc.probes)
				t.Logf("%d lines, Capacity(%v) = %d keys at full debt (%d got their burst): %s of %d fresh keys denied, Saturation %s",
					l.Sizes().Cells/64-1, tc.deny, c, got, a3capPct(rate), tc.probes, a3capPct(l.Stats().Saturation))
				if float64(denied) > max(1.5*tc.deny*float64(tc.probes), a3capBinom(tc.probes, tc.deny)) {
					t.Errorf("seed %d: WithCapacity(%d, %v), filled to Capacity(%v) = %d keys: %s of fresh keys denied, %.1fx the promised %v",
						seed, tc.keys, tc.deny, tc.deny, c, a3capPct(rate), rate/tc.deny, tc.deny)
				}
			})
		}
	}
}
