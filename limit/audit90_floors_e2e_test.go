package limit_test

import (
	"bytes"
	"fmt"
	"math"
	"testing"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// a90flCase is a Buckets limiter and its floor histogram's epoch: width
// ticks of perMs ticks a millisecond (the engine's span/128, rounded up).
type a90flCase struct {
	rate  limit.Limit
	burst int
	width uint64
	perMs uint64
}

// ms returns the milliseconds of e histogram epochs, rounded up.
func (c a90flCase) ms(e uint64) int64 {
	return int64((e*c.width + c.perMs - 1) / c.perMs)
}

// wrapMs is the most whole ms within 2^32 epochs.
func (c a90flCase) wrapMs() int64 {
	return int64(uint64(1) << 32 * c.width / c.perMs)
}

// a90flDenied is the share of probes fresh keys of family tag that Peek
// denies one token now.
func a90flDenied(l *limit.Limiter, tag string, probes int) float64 {
	d := 0
	for i := range probes {
		if !l.Peek(fmt.Sprintf("%s-%d", tag, i)).Allowed {
			d++
		}
	}
	return float64(d) / float64(probes)
}

// TestAudit90FloorsSaturationAcrossJumps: a Buckets limiter whose clock
// jumps ahead by 2^28, 2^31, 2^32 (aligned on the 32-bit epochs of an
// earlier flood), 9 x 2^28 and 2^40 histogram epochs, flooded after each
// jump with a different number of keys: before each flood it denies no
// fresh key and reads Saturation 0 (no floor of an earlier flood read
// live), and after it Stats().Saturation follows the measured share of
// fresh keys denied (stats.go: "the estimated probability that a fresh
// key ... asking for one token now is denied"). New(1e6, 1)'s histogram
// epoch is one tick (1/16,000 ms: 2^31 epochs in 134 s).
func TestAudit90FloorsSaturationAcrossJumps(t *testing.T) {
	for _, c := range []a90flCase{
		{1e6, 1, 1, 16000},
		{1e6, 1000, 251, 16000},
		{10, 20, 469, 15},
	} {
		t.Run(fmt.Sprintf("New(%v,%d)", c.rate, c.burst), func(t *testing.T) {
			clk := limittest.NewFakeClock()
			clk.Set(1_700_000_000_000)
			l, err := limit.New(c.rate, c.burst, limit.WithClock(clk), limit.WithSeed(90), limit.WithCapacity(1000, 0.01))
			if err != nil {
				t.Fatal(err)
			}
			if l.Engine() != limit.Buckets {
				t.Fatalf("engine %v; want Buckets", l.Engine())
			}
			e28 := uint64(1) << 28
			steps := []struct {
				name string
				d    int64
				keys int
			}{
				{"start", 0, 8000},
				{"2^28-3", c.ms(e28 - 3), 1500},
				{"2^28+5", c.ms(e28 + 5), 2500},
				{"2^31+7", c.ms(1<<31 + 7), 8000},
				{"aligned 2^32", c.wrapMs(), 1200},
				{"2^32-2^28", c.ms(1<<32 - e28), 2000},
			}
			for i := range 9 {
				steps = append(steps, struct {
					name string
					d    int64
					keys int
				}{fmt.Sprintf("2^28 #%d", i), c.ms(e28), 1000 + 250*i})
			}
			steps = append(steps, struct {
				name string
				d    int64
				keys int
			}{"2^40", c.ms(1 << 40), 3000}, struct {
				name string
				d    int64
				keys int
			}{"aligned 2^32 again", c.wrapMs(), 8000})
			for si, s := range steps {
				clk.Set(clk.NowMillis() + s.d)
				if si > 0 {
					if sat, m := l.Stats().Saturation, a90flDenied(l, fmt.Sprintf("pre%d", si), 300); sat > 0.01 || m > 0 {
						t.Errorf("%s: before the flood: Saturation %.4f, fresh keys denied %.4f; want both 0 (every debt drained)", s.name, sat, m)
					}
				}
				now := l.Now()
				for k := range s.keys {
					l.AllowN(now, fmt.Sprintf("flood%d-%d", si, k), l.Burst())
				}
				m := a90flDenied(l, fmt.Sprintf("fresh%d", si), 2000)
				sat := l.Stats().Saturation
				t.Logf("%s: %d keys: denied %.4f, Saturation %.4f", s.name, s.keys, m, sat)
				if sat < 0.8*m-0.01 || sat > 1.25*m+0.02 {
					t.Errorf("%s: flood of %d keys: %.2f%% of fresh keys denied, Saturation %.2f%%; want within 20%%", s.name, s.keys, 100*m, 100*sat)
				}
			}
		})
	}
}

// TestAudit90FloorsSaturationRestoreAcrossEras: a Buckets limiter whose
// lines hold floors of floods 2^32 and 2^31 histogram epochs apart (the
// older ones expired, kept in the headers of lines not touched since) is
// saved and restored (snapshot.go rebuilds the histogram from every
// line's floor, in line order); the restored limiter, now and after
// downtimes of 2^28, 2^31+2^28 and aligned 2^32 epochs, denies the fresh
// keys the original denies and reads the same Saturation, flood after
// flood (limit/doc.go: the restored limiter "decides as the never-stopped
// one would at the same wall time"; stats.go: Saturation "the estimated
// probability that a fresh key ... is denied").
func TestAudit90FloorsSaturationRestoreAcrossEras(t *testing.T) {
	for _, c := range []a90flCase{
		{1e6, 1, 1, 16000},
		{10, 20, 469, 15},
	} {
		t.Run(fmt.Sprintf("New(%v,%d)", c.rate, c.burst), func(t *testing.T) {
			clk := limittest.NewFakeClock()
			clk.Set(1_700_000_000_000)
			mk := func() *limit.Limiter {
				l, err := limit.New(c.rate, c.burst, limit.WithClock(clk), limit.WithSeed(90), limit.WithCapacity(1000, 0.01))
				if err != nil {
					t.Fatal(err)
				}
				return l
			}
			flood := func(ls []*limit.Limiter, tag string, keys int) {
				for _, l := range ls {
					now := l.Now()
					for k := range keys {
						l.AllowN(now, fmt.Sprintf("%s-%d", tag, k), l.Burst())
					}
				}
			}
			a := mk()
			flood([]*limit.Limiter{a}, "era0", 8000)
			clk.Set(clk.NowMillis() + c.wrapMs())
			flood([]*limit.Limiter{a}, "era1", 1100)
			clk.Set(clk.NowMillis() + c.ms(1<<31+3))
			flood([]*limit.Limiter{a}, "era2", 1250)
			var buf bytes.Buffer
			if _, err := a.WriteTo(&buf); err != nil {
				t.Fatal(err)
			}
			snap := buf.Bytes()
			for i, down := range []int64{0, c.ms(1 << 28), c.ms(1<<31 + 1<<28), c.wrapMs()} {
				clk.Set(clk.NowMillis() + down)
				b := mk()
				if _, err := b.ReadFrom(bytes.NewReader(snap)); err != nil {
					t.Fatal(err)
				}
				both := []*limit.Limiter{a, b}
				for j, keys := range []int{0, 1300, 8000} {
					flood(both, fmt.Sprintf("r%d-%d", i, j), keys)
					ma, mb := a90flDenied(a, fmt.Sprintf("fresh%d-%d", i, j), 2000), a90flDenied(b, fmt.Sprintf("fresh%d-%d", i, j), 2000)
					sa, sb := a.Stats().Saturation, b.Stats().Saturation
					t.Logf("downtime %d ms, flood %d: original denied %.4f sat %.4f; restored denied %.4f sat %.4f", down, keys, ma, sa, mb, sb)
					if ma != mb || math.Abs(sa-sb) > 0.02 || sb < 0.8*mb-0.01 || sb > 1.25*mb+0.02 {
						t.Errorf("downtime %d ms, then a flood of %d keys: original denies %.4f of fresh keys (Saturation %.4f), restored %.4f (Saturation %.4f)", down, keys, ma, sa, mb, sb)
					}
				}
				// Everything drains again before the next restore.
				clk.Set(clk.NowMillis() + c.ms(1<<10))
			}
		})
	}
}
