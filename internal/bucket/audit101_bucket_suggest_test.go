package bucket_test

import (
	"testing"

	"github.com/lfgrudge/grudge/internal/bucket"
)

// TestAudit101BucketSuggestSmallestAndMonotone: sizing.go, Suggest:
// "returns the smallest engine that holds keys keys at their limit with
// a fresh-key denial rate of at most deny (Fits)". Its search gallops
// and bisects, which is right only if Fits is monotone in lines. An
// exhaustive scan of lines from 2 to twice the answer for a grid of
// small targets (where the floor tail makes Fits least smooth): the
// first fitting size is Suggest's, and every larger one fits. Passes.
func TestAudit101BucketSuggestSmallestAndMonotone(t *testing.T) {
	keysList := []int{1, 3, 20, 150}
	denies := []float64{0.5, 0.05, 0.002}
	if testing.Short() {
		keysList = []int{1, 20}
	}
	for _, keys := range keysList {
		for _, deny := range denies {
			g, err := bucket.Suggest(keys, deny)
			if err != nil {
				t.Fatal(err)
			}
			first := -1
			for lines := 2; lines <= 2*g.Lines+8; lines++ {
				ok := bucket.Fits(keys, lines, deny)
				if ok && first < 0 {
					first = lines
				}
				if !ok && first >= 0 {
					t.Fatalf("keys %d deny %v: Fits at %d lines but not at %d", keys, deny, first, lines)
				}
			}
			if first != g.Lines {
				t.Errorf("keys %d deny %v: the smallest fitting engine has %d lines, Suggest says %d", keys, deny, first, g.Lines)
			}
		}
	}
}
