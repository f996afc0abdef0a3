package limit_test

import (
	"fmt"
	"testing"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// a51Measured is the share of fresh keys denied one token now.
func a51Measured(l *limit.Limiter, tag string, probes int) float64 {
	den := 0
	for i := range probes {
		if !l.Peek(fmt.Sprintf("fresh-%s-%d", tag, i)).Allowed {
			den++
		}
	}
	return float64(den) / float64(probes)
}

// TestAudit51SaturationUnderClockJumps: an engine filled past its
// capacity says it is full (Stats.Saturation, "the estimated probability
// that a fresh key ... asking for one token now is denied") after the
// clock steps back (nothing drains: a t before a time already used
// counts as that time), and says empty again after forward jumps past
// MaxDebt's drain, whatever their size: the Buckets engine's 16-bit
// residue wraps (2^16 ticks), days, the sweep horizons 2^29..2^32 ms,
// years.
func TestAudit51SaturationUnderClockJumps(t *testing.T) {
	testsize.Serial(t)
	type cfg struct {
		name string
		opts []limit.Option
	}
	cfgs := []cfg{
		{"buckets", []limit.Option{limit.WithEngine(limit.Buckets), limit.WithCapacity(500, 0.01)}},
		{"countmin", []limit.Option{limit.WithEngine(limit.CountMin), limit.WithSize(3, 512)}},
	}
	jumps := []int64{61_439, 65_536, 4369 * 15, 131_072, 3_600_000, 86_400_000, 1 << 29, 1 << 30, 1<<31 - 1, 1 << 31, 1 << 32, 365 * 86_400_000}
	for _, c := range cfgs {
		t.Run(c.name, func(t *testing.T) {
			for ji, jump := range jumps {
				clk := limittest.NewFakeClock()
				clk.Set(1_700_000_000_000)
				l := limit.MustNew(10, 20, append([]limit.Option{limit.WithClock(clk), limit.WithSeed(uint64(ji + 1))}, c.opts...)...)
				for i := range 20_000 {
					l.AllowN(clk.Now(), fmt.Sprint("heavy-", i), 20)
				}
				full := l.Stats().Saturation
				meas := a51Measured(l, "a", 4000)
				if full < 0.9 || meas < 0.9 {
					t.Fatalf("jump %d: after the fill saturation %.4f measured %.4f; want both >= 0.9", jump, full, meas)
				}
				// back by hours: still full
				clk.Set(clk.NowMillis() - 3*3_600_000)
				if s, m := l.Stats().Saturation, a51Measured(l, "b", 2000); s < 0.9 || m < 0.9 {
					t.Errorf("%s: 3 h back: saturation %.4f measured %.4f; want both >= 0.9 (nothing drains)", c.name, s, m)
				}
				// forward past the mark by the jump
				clk.Set(clk.NowMillis() + 3*3_600_000 + jump)
				s, m := l.Stats().Saturation, a51Measured(l, "c", 2000)
				if s > 0.01 || m > 0 {
					t.Errorf("%s: after a %d ms jump forward: saturation %.4f measured %.4f; want 0 (every debt drained within 4 s)", c.name, jump, s, m)
				}
				// and it fills again
				for i := range 20_000 {
					l.AllowN(clk.Now(), fmt.Sprint("heavy2-", i), 20)
				}
				if s, m := l.Stats().Saturation, a51Measured(l, "d", 2000); s < 0.9 || m < 0.9 {
					t.Errorf("%s: refilled after a %d ms jump: saturation %.4f measured %.4f; want both >= 0.9", c.name, jump, s, m)
				}
			}
		})
	}
}
