package limit_test

import (
	"testing"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
)

// TestAudit66CapacityRoundTrip: WithCapacity "sizes either engine for a
// number of keys at their limit and a rate of fresh-key denials"
// (doc.go), and Limiter.Capacity says "how many such keys a limiter
// holds" ("Suggest's models read the other way", sizing.go). A limiter
// built WithCapacity(k, d) holds k: Capacity(d) >= k, on both engines
// (the count-min with 2 and 3 generations), and Suggest(Capacity(d), d)
// is no larger than the limiter.
func TestAudit66CapacityRoundTrip(t *testing.T) {
	keys := []int{1, 2, 7, 50, 333, 1000, 12345, 100_000}
	denies := []float64{0.5, 0.1, 0.01, 0.0003}
	for ki, k := range keys {
		if !testsize.Keep(ki, testsize.Sample(1, 1, 2)) { // every other size under an emulator: sizing, not arithmetic
			continue
		}
		for _, d := range denies {
			for _, v := range []struct {
				name string
				opts []limit.Option
			}{
				{"buckets", []limit.Option{limit.WithEngine(limit.Buckets)}},
				{"cm", []limit.Option{limit.WithEngine(limit.CountMin)}},
				{"cm3", []limit.Option{limit.WithGenerations(3)}},
			} {
				l, err := limit.New(10, 20, append([]limit.Option{limit.WithCapacity(k, d)}, v.opts...)...)
				if err != nil {
					t.Logf("%s k=%d d=%v: %v", v.name, k, d, err)
					continue
				}
				c := l.Capacity(d)
				if c < k {
					t.Errorf("%s: built WithCapacity(%d, %v), Capacity(%v) = %d < %d", v.name, k, d, d, c, k)
				}
				if v.name == "buckets" && c >= 1 {
					s, err := limit.Suggest(c, d)
					if err != nil {
						t.Fatal(err)
					}
					lines := l.Sizes().Cells/64 - 1 // Sizes: (Lines + 1) x 64
					if s.Buckets.Lines > lines {
						t.Errorf("buckets k=%d d=%v: Suggest(Capacity = %d) needs %d lines > the limiter's %d", k, d, c, s.Buckets.Lines, lines)
					}
				}
			}
		}
	}
}
