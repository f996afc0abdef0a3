package grudge_test

import (
	"math"
	"testing"

	"github.com/lfgrudge/grudge"
)

// grudge.Mean "averages the level scores": the average of finite scores
// is finite and between their min and max, even where their sum is not
// a float64 (MaxFloat64 twice).
func TestAudit15MutMeanOfHugeScores(t *testing.T) {
	for _, v := range [][]float64{
		{math.MaxFloat64, math.MaxFloat64},
		{math.MaxFloat64, math.MaxFloat64, math.MaxFloat64, 0},
		{-math.MaxFloat64, -math.MaxFloat64},
	} {
		got := grudge.Mean(v)
		lo, hi := v[0], v[0]
		for _, x := range v {
			lo, hi = min(lo, x), max(hi, x)
		}
		if math.IsInf(got, 0) || math.IsNaN(got) || got < lo || got > hi {
			t.Errorf("Mean(%v) = %v, want a finite average within [%v, %v]", v, got, lo, hi)
		}
	}
}
