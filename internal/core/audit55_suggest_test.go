package core

import (
	"math"
	"math/big"
	"testing"

	"github.com/lfgrudge/grudge/internal/testsize"
)

// a55SuggestOracle is SuggestLevels with the rate as an exact big.Rat.
func a55SuggestOracle(m uint32, h uint64, target *big.Rat) uint32 {
	mm := new(big.Int).SetUint64(uint64(m))
	num := new(big.Int).Exp(mm, new(big.Int).SetUint64(h), nil)
	miss := new(big.Int).Exp(new(big.Int).Sub(mm, big.NewInt(1)), new(big.Int).SetUint64(h), nil)
	per := new(big.Rat).SetFrac(new(big.Int).Sub(num, miss), num)
	rate := new(big.Rat).Set(per)
	for l := uint32(1); l < MaxLevels; l++ {
		if rate.Cmp(target) <= 0 {
			return l
		}
		rate.Mul(rate, per)
	}
	return MaxLevels
}

// TestAudit55SuggestLevelsExactOracle: for m in 1..70 and a few larger
// (powers of two among them: where a level's rate can equal a float64),
// hot keys 1..24 and 100, every level's exact rate, the float64
// nearest it and its two neighbours as targets: SuggestLevels (512 bits)
// agrees with an exact big.Rat oracle.
func TestAudit55SuggestLevelsExactOracle(t *testing.T) {
	testsize.Serial(t)
	ms := []uint32{}
	for m := uint32(1); m <= 70; m++ {
		ms = append(ms, m)
	}
	ms = append(ms, 128, 256, 1000, 1024, 65536)
	hs := []uint64{}
	for h := uint64(1); h <= 24; h++ {
		hs = append(hs, h)
	}
	hs = append(hs, 100)
	checked := 0
	for _, m := range ms {
		for _, h := range hs {
			mm := new(big.Int).SetUint64(uint64(m))
			num := new(big.Int).Exp(mm, new(big.Int).SetUint64(h), nil)
			miss := new(big.Int).Exp(new(big.Int).Sub(mm, big.NewInt(1)), new(big.Int).SetUint64(h), nil)
			per := new(big.Rat).SetFrac(new(big.Int).Sub(num, miss), num)
			rate := new(big.Rat).Set(per)
			for l := 1; l <= MaxLevels; l++ {
				f, _ := rate.Float64()
				for _, tf := range []float64{math.Nextafter(f, 0), f, math.Nextafter(f, 2)} {
					tr := new(big.Rat)
					if tr.SetFloat64(tf) == nil {
						continue
					}
					want := a55SuggestOracle(m, h, tr)
					if got := SuggestLevels(m, h, tf); got != want {
						t.Fatalf("SuggestLevels(m=%d, hot=%d, target=%v (level %d's rate %v)) = %d; exact oracle %d", m, h, tf, l, rate.FloatString(30), got, want)
					}
					checked++
				}
				rate.Mul(rate, per)
			}
		}
	}
	t.Logf("%d cases", checked)
}
