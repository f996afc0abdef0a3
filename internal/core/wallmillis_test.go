package core

import (
	"math"
	"math/big"
	"testing"
	"time"
)

// TestWallMillisSaturatesExactly: WallMillis is t's Unix millisecond,
// exactly where it fits in int64 and saturated outside, at the seconds on
// both sides of each end, with every millisecond fraction.
func TestWallMillisSaturatesExactly(t *testing.T) {
	for _, s := range []int64{math.MaxInt64 / 1000, math.MaxInt64/1000 + 1, math.MaxInt64/1000 - 1,
		math.MinInt64 / 1000, math.MinInt64/1000 - 1, math.MinInt64/1000 - 2, math.MinInt64/1000 + 1, 0, -1, 1 << 40, -1 << 40} {
		for m := int64(0); m < 1000; m++ {
			tm := time.Unix(s, m*1e6+999_999)
			v := new(big.Int).Mul(big.NewInt(s), big.NewInt(1000))
			v.Add(v, big.NewInt(m))
			want := int64(math.MaxInt64)
			switch {
			case v.IsInt64():
				want = v.Int64()
			case v.Sign() < 0:
				want = math.MinInt64
			}
			if got := WallMillis(tm); got != want {
				t.Fatalf("WallMillis(Unix(%d, %d ms)) = %d, want %d", s, m, got, want)
			}
		}
	}
	if a := testing.AllocsPerRun(10, func() { WallMillis(time.Unix(math.MaxInt64, 0)) }); a != 0 {
		t.Errorf("WallMillis allocates %v", a)
	}
}
