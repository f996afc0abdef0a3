package limit_test

// Audit 3, capacity: Stats.Saturation, "the estimated probability that a
// fresh key (one the limiter has never seen) asking for one token now is
// denied: the limiter's rate of innocent denials, the number to alert on
// (docs/capacity.md has its accuracy against measured rates, and
// WithCapacity the cure)". docs/capacity.md: "the reading is within 2%
// relative on every row where the measurement has 1,000 denials or
// more, on both engines ... TestSaturation (package limit) asserts 20%".

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a3capSatClose reports whether a Saturation reading sat agrees with a
// rate measured over probes fresh keys: within 20% relative, or within
// the measurement's noise (4 standard deviations, and 3 counts).
func a3capSatClose(sat, rate float64, probes int) bool {
	noise := (4*math.Sqrt(rate*(1-rate)*float64(probes)) + 3) / float64(probes)
	return math.Abs(sat-rate) <= max(0.2*rate, noise)
}

// TestAudit3CapSaturationAtFill reads Stats at 0, 50%, 100% and 200% of
// Capacity(deny) keys at full debt (frozen clock), next to the rate
// measured with fresh keys (PeekN): empty reads 0; at every fill the
// reading agrees with the measured rate (20%, or the probes' noise); at
// half of Capacity it reads at most deny (not full), at 2x above deny
// (full); the readings rise with the fill. (Whether the rate at Capacity
// is within deny is TestAudit3CapCapacityPerSeed's question.) Then time: at +99 ms every debt still
// denies a token (a debt of 20 - 0.99 tokens), at +100 ms none does (19 +
// 1 <= 20), at +4 s (MaxDebt drained) nothing is left: the reading
// is "now", so it must follow. Both engines (the count-min's Capacity is
// its Bloom formula, with double hashing's pairs, at deny).
func TestAudit3CapSaturationAtFill(t *testing.T) {
	const deny, probes = 0.01, 12_000
	for _, e := range []limit.Engine{limit.Buckets, limit.CountMin} {
		t.Run(e.String(), func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			clk.Set(1_700_000_000_000)
			l, err := limit.New(10, 20, limit.WithClock(clk), limit.WithSeed(3), limit.WithEngine(e), limit.WithCapacity(4000, deny))
			if err != nil {
				t.Fatal(err)
			}
			c := l.Capacity(deny)
			tm := clk.Now()
			if s := l.Stats(); s.Saturation != 0 {
				t.Fatalf("empty limiter: Saturation %v, want 0", s.Saturation)
			}
			prev, filled := 0.0, 0
			for _, pct := range []int{50, 100, 200} {
				to := c * pct / 100
				a3capFill(l, tm, "k-", filled, to, 20, 1)
				filled = to
				rate := float64(a3capProbe(l, tm, fmt.Sprint("fresh", pct, "-"), probes)) / probes
				sat := l.Stats().Saturation
				t.Logf("%d%% of Capacity(%v) = %d keys: measured %s, Saturation %s", pct, deny, to, a3capPct(rate), a3capPct(sat))
				if !a3capSatClose(sat, rate, probes) {
					t.Errorf("%d%% of Capacity: Saturation %s, measured %s", pct, a3capPct(sat), a3capPct(rate))
				}
				if pct == 50 && sat > deny {
					t.Errorf("50%% of Capacity(%v): Saturation %s says the limiter is past its target", deny, a3capPct(sat))
				}
				if pct == 200 && sat <= deny {
					t.Errorf("200%% of Capacity(%v): Saturation %s does not say it is full (measured %s)", deny, a3capPct(sat), a3capPct(rate))
				}
				if sat < prev {
					t.Errorf("%d%% of Capacity: Saturation %s fell from %s", pct, a3capPct(sat), a3capPct(prev))
				}
				prev = sat
			}
			for _, step := range []struct {
				d     time.Duration
				label string
			}{{99 * time.Millisecond, "+99ms"}, {time.Millisecond, "+100ms"}, {time.Second, "+1.1s"}, {3 * time.Second, "+4.1s"}} {
				clk.Advance(step.d)
				tm := clk.Now()
				rate := float64(a3capProbe(l, tm, "late"+step.label+"-", probes)) / probes
				sat := l.Stats().Saturation
				t.Logf("%s: measured %s, Saturation %s", step.label, a3capPct(rate), a3capPct(sat))
				if !a3capSatClose(sat, rate, probes) {
					t.Errorf("%s after the fill: Saturation %s, measured %s", step.label, a3capPct(sat), a3capPct(rate))
				}
			}
		})
	}
}
