package units

import (
	"math"
	"math/big"
	"testing"
)

// Fraction and Units at the float64 extremes: no panic; a fraction found
// lies within 4 ulps; Units returns a unit >= the exact token (never
// early) or +Inf, never NaN, for every MaxDebt in [1, 2^24] — except the
// near-+Inf tokens that are audit 71's finding (tested in package limit).
func TestAudit71FractionUnitsExtremes(t *testing.T) {
	xs := []float64{5e-324, 1e-320, 2.2250738585072014e-308, 1e-307, 5.6e-306, 1e-300, 1e-30, 1.0 / 3, 1, 3,
		1e22, 1e300, math.Nextafter(math.MaxFloat64, 0), math.MaxFloat64}
	for _, r := range xs {
		p, q, ok := Fraction(r)
		if ok {
			f := new(big.Rat).SetFrac(p, q)
			diff := new(big.Rat).Sub(f, new(big.Rat).SetFloat64(r))
			ulp := math.Nextafter(r, math.Inf(1)) - r
			if math.IsInf(ulp, 1) {
				ulp = r - math.Nextafter(r, 0)
			}
			tol := new(big.Rat).SetFloat64(4 * ulp)
			if diff.Abs(diff).Cmp(tol) > 0 {
				t.Errorf("Fraction(%v) = %v/%v, more than 4 ulps away", r, p, q)
			}
		}
		for _, md := range []float64{1, 15, 2000, 32768, 65535, 1 << 24} {
			if ms := 1000 / r; !math.IsInf(ms, 1) && ms > math.MaxFloat64/2 {
				continue // the finding's range
			}
			unit, drain, _, _ := Units(r, md)
			if math.IsNaN(unit) || math.IsNaN(drain) || unit <= 0 || drain <= 0 {
				t.Errorf("Units(%v, %v) = %v, %v", r, md, unit, drain)
				continue
			}
			if math.IsInf(unit, 1) {
				continue
			}
			// unit/drain ms per token >= 1000/r exactly
			got := new(big.Rat).Quo(new(big.Rat).SetFloat64(unit), new(big.Rat).SetFloat64(drain))
			exact := new(big.Rat).Quo(big.NewRat(1000, 1), new(big.Rat).SetFloat64(r))
			if got.Cmp(exact) < 0 {
				pp, qq, ok := Fraction(r)
				if ok && got.Cmp(new(big.Rat).Quo(new(big.Rat).Mul(big.NewRat(1000, 1), new(big.Rat).SetInt(qq)), new(big.Rat).SetInt(pp))) >= 0 {
					continue // the short fraction's own token
				}
				t.Errorf("Units(%v, %v): token %v ms below the exact %v (early)", r, md, got.FloatString(6), exact.FloatString(6))
			}
		}
	}
}
