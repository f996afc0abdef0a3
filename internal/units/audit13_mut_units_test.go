package units

import (
	"math"
	"math/big"
	"testing"
)

// TestAudit13FractionTolInclusive: Fraction returns the first convergent
// within 4 ulps of r, the bound included. For r = 1 - 2^-51 (4 ulps of
// 2^-53 below 1) and r = 1 + 2^-50 (4 ulps of 2^-52 above 1) the
// convergent 1/1 lies exactly 4 ulps away. Mutation audit13 M12 (strict
// <) passes it by, and no later convergent has q <= 2^32.
func TestAudit13FractionTolInclusive(t *testing.T) {
	for _, r := range []float64{1 - math.Ldexp(1, -51), 1 + math.Ldexp(1, -50)} {
		// The oracle: |1 - r| is exactly 4 ulps.
		ulp := math.Nextafter(r, math.Inf(1)) - r
		d := new(big.Rat).Sub(big.NewRat(1, 1), new(big.Rat).SetFloat64(r))
		if d.Abs(d).Cmp(new(big.Rat).SetFloat64(4*ulp)) != 0 {
			t.Fatalf("setup: %v is not 4 ulps from 1", r)
		}
		p, q, ok := Fraction(r)
		if !ok || p.Cmp(big.NewInt(1)) != 0 || q.Cmp(big.NewInt(1)) != 0 {
			t.Errorf("Fraction(%v) = %v/%v, %v; want 1/1 (exactly 4 ulps away)", r, p, q, ok)
		}
	}
}

// TestAudit13UnitsExactAtBound: "If also MaxDebt x unit <= 2^24, ...
// exact": the bound itself is exact. Mutation audit13 M10.
func TestAudit13UnitsExactAtBound(t *testing.T) {
	for _, c := range []struct {
		rate, maxDebt, unit, drain float64
	}{
		{1000, 1 << 24, 1, 1},
		{500, 1 << 23, 2, 1},
		{10, 1 << 24 / 128 * 128 / 100, 100, 1}, // below the bound
		{1.0 / 64, 1 << 24 / 64000, 64000, 1},   // 2^24 / 64000 is not whole: below
		{1000.0 / 1024, 1 << 14, 1024, 1},       // 2^14 x 1024 = 2^24
	} {
		unit, drain, exact, fbits := Units(c.rate, c.maxDebt)
		wantExact := c.maxDebt*c.unit <= MaxExactUnits
		if unit != c.unit || drain != c.drain || exact != wantExact || fbits != 0 {
			t.Errorf("Units(%v, %v) = %v, %v, %v, %v; want %v, %v, %v, 0", c.rate, c.maxDebt, unit, drain, exact, fbits, c.unit, c.drain, wantExact)
		}
	}
}
