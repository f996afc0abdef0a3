package limit_test

import (
	"math"
	"testing"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
)

// TestAudit70SuggestDocLines: docs/capacity.md, "Sizing": "Suggest now
// gives 1000 keys at 1% 85 lines ... and 20,000 at 0.1% 1,737 lines";
// "Suggest gives 10,000 keys at 0.1% 864 lines ..., at 1% 816 ..., and
// 100,000 at 0.1% 8,426"; "7,999 lines for 100,000 keys at 1%".
func TestAudit70SuggestDocLines(t *testing.T) {
	for _, c := range []struct {
		keys  int
		deny  float64
		lines int
	}{{1000, 0.01, 85}, {20_000, 0.001, 1737}, {10_000, 0.001, 864}, {10_000, 0.01, 816}, {100_000, 0.001, 8426}, {100_000, 0.01, 7999}} {
		s, err := limit.Suggest(c.keys, c.deny)
		if err != nil {
			t.Fatal(err)
		}
		if s.Buckets.Lines != c.lines {
			t.Errorf("Suggest(%d, %v).Buckets.Lines = %d, docs/capacity.md: %d", c.keys, c.deny, s.Buckets.Lines, c.lines)
		}
	}
}

// TestAudit70SmallEnginesOverSeeds: docs/capacity.md, "Sizing": engines
// sized WithCapacity(1000, 1%) filled with 1000 keys at full debt: "0 of
// 40 seeds over the target (worst 0.08%)"; 20,000 at 0.1%: "0 of 40,
// worst 0.08%" (Fits: more floors than the target allows in at most one
// engine in a thousand). Seeds 1..40 (10 under -race), 20,000 peeks each
// (50,000 at 0.1%); an engine counts as over when its measured rate
// exceeds the target by 3 binomial standard deviations.
func TestAudit70SmallEnginesOverSeeds(t *testing.T) {
	testsize.Serial(t)
	seeds := uint64(testsize.Sample(40, 10, 1))
	for _, c := range []struct {
		keys   int
		deny   float64
		probes int
	}{{1000, 0.01, 20_000}, {20_000, 0.001, 50_000}, {200, 0.05, 20_000}, {300, 0.02, 20_000}} {
		for _, full := range []bool{false, true} {
			over, worst := 0, 0.0
			for seed := uint64(1); seed <= seeds; seed++ {
				l, now := a70New(t, seed*7919, limit.WithCapacity(c.keys, c.deny))
				n := c.keys
				if full {
					n = l.Capacity(c.deny)
				}
				a70Fill(l, now, 0, n, nil)
				p := a70Peek(l, now, "fresh", c.probes)
				worst = max(worst, p)
				if p > c.deny+3*a70sd(c.deny, c.probes) {
					over++
					t.Logf("%d keys at %v, seed %d: %.4f%% fresh denied, Saturation %.4f%%", c.keys, c.deny, seed*7919, 100*p, 100*l.Stats().Saturation)
				}
			}
			t.Logf("%d keys at %v (filled to Capacity: %v): %d of %d seeds over, worst %.4f%%", c.keys, c.deny, full, over, seeds, 100*worst)
			if over > 0 {
				t.Errorf("%d keys at %v (filled to Capacity: %v): %d of %d engines over the target (worst %.4f%%), docs: 0 of 40; Fits: at most one in a thousand", c.keys, c.deny, full, over, seeds, 100*worst)
			}
		}
	}
}

func a70sd(p float64, n int) float64 { return math.Sqrt(p * (1 - p) / float64(n)) }
