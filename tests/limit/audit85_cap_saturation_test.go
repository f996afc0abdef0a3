package limit_test

// Audit 85, saturation: Stats().Saturation, "the estimated probability
// that a fresh key (one the limiter has never seen) asking for one token
// now is denied" (limit/stats.go), against the rate measured with fresh
// peeks, at several fills of Capacity and as debts drain; and the
// reading's range. docs/capacity.md: "TestSaturation (package limit)
// asserts 20% on both engines from 2% to 99% denied"; design.md section
// 8: "within 2% of the measured rate wherever a measurement can tell".

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
)

// TestAudit85CapSaturationFillsAndDrain: limit.New(10, 20)
// WithCapacity(5000, 1%) on each engine, keys at their limit (burst, or
// MaxDebt) at 0, 25%, 100% and 200% of Capacity(1%), then the clock
// stepped through the drain (+0, +50 ms, +99 ms, +100 ms: a burst debt of
// 20 no longer denies a token; +2.099 s, +2.1 s: a MaxDebt of 40 no
// longer does; +4 s: all drained). At each point: the reading is in [0,
// 1] and not NaN; it agrees with 20,000 fresh peeks within 20% relative
// (audit85capSatAgrees: Chernoff at 1e-9 on each side); it never rises
// while the clock moves and nothing is written; it is 0 once every debt
// has drained (4 s); and it reads 0 on the empty limiter.
func TestAudit85CapSaturationFillsAndDrain(t *testing.T) {
	testsize.Serial(t)
	probes := testsize.Pick(20_000, 5_000)
	steps := []time.Duration{0, 50 * time.Millisecond, 99 * time.Millisecond, 100 * time.Millisecond,
		time.Second, 2099 * time.Millisecond, 2100 * time.Millisecond, 4 * time.Second}
	for _, e := range []limit.Engine{limit.Buckets, limit.CountMin} {
		for _, maxDebt := range []bool{false, true} {
			for _, pct := range []int{0, 25, 100, 200} {
				name := fmt.Sprintf("%v/maxdebt=%v/%d%%", e, maxDebt, pct)
				l, clk := audit85capNew(t, e, 11, limit.WithCapacity(5000, 0.01))
				start := clk.Now()
				n := l.Capacity(0.01) * pct / 100
				audit85capFill(l, start, "held", 0, n, maxDebt)
				prev := math.Inf(1)
				for _, d := range steps {
					at := start.Add(d)
					clk.SetTime(at)
					sat := l.Stats().Saturation
					denied := audit85capProbe(l, at, fmt.Sprintf("fresh%v-", d), probes)
					if math.IsNaN(sat) || sat < 0 || sat > 1 {
						t.Fatalf("%s +%v: Saturation %v outside [0, 1]", name, d, sat)
					}
					if !audit85capSatAgrees(sat, denied, probes, 0.2) {
						t.Errorf("%s +%v: Saturation %.4f%%, measured %.4f%% of %d fresh keys denied", name, d, 100*sat, 100*float64(denied)/float64(probes), probes)
					}
					// Sampled readings may wobble by their own sampling;
					// a rise past 20% (and a count's worth) is not that.
					if sat > prev*1.2+1e-4 {
						t.Errorf("%s +%v: Saturation rose from %.4f%% to %.4f%% with no write, as debts drain", name, d, 100*prev, 100*sat)
					}
					prev = sat
					if (pct == 0 || d >= 4*time.Second) && (sat != 0 || denied != 0) {
						t.Errorf("%s +%v: Saturation %v, %d fresh denied; want 0 (nothing in debt)", name, d, sat, denied)
					}
				}
			}
		}
	}
}
