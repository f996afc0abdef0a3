package atom

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/lfgrudge/grudge/internal/testsize"
)

// TestFusedOperands: the exactness-dependent helpers (twoSum, SumUp,
// RoundUp, roundIn, roundSumIn) are about the float64 values of their operands.
// Inlined into a caller that passes a product, the compiler may fuse the
// product into their adds (an FMA: arm64, which make test-arm64 runs
// under qemu) unless the helper rounds its operands explicitly; then
// twoSum's error term described neither sum, and RoundUp's step compared
// against the exact product (a limiter clamp one float32 above the
// sketch's, a RetryAfter 1 ms late: rapid seed 7828073466830710819 of
// TestAdvTierNeverEarlyRatios on arm64). Every call below passes a*b
// inline, as such a caller does; at GOAMD64=v1 (no fusion) it is the
// plain oracle check.
func TestFusedOperands(t *testing.T) {
	testsize.Serial(t)
	rng := rand.New(rand.NewPCG(7, 11))
	exact := func(x float64) *big.Float { return new(big.Float).SetPrec(2200).SetFloat64(x) }
	for i := range 200_000 {
		// Products that round (random 53-bit mantissas) next to an
		// addend of nearby magnitude, so the fused and the rounded sum
		// differ in their last bits.
		a := (1 + rng.Float64()) * math.Ldexp(1, rng.IntN(40)-20)
		b := (1 + rng.Float64()) * math.Ldexp(1, rng.IntN(40)-20)
		c := -(a * b) * (1 + math.Ldexp(rng.Float64()-0.5, -rng.IntN(30)))
		if i%2 == 1 {
			c = math.Ldexp(rng.Float64(), rng.IntN(60)-30)
		}
		p := float64(a * b) // the product's float64 value, the operand

		s, e := twoSum(a*b, c)
		want := exact(p)
		want.Add(want, exact(c))
		if got := exact(s); got.Add(got, exact(e)).Cmp(want) != 0 {
			t.Fatalf("twoSum(%v*%v, %v) = %v + %v, not the sum of the rounded product %v and %v", a, b, c, s, e, p, c)
		}
		if got, want := SumUp(a*b, c), SumUp(p, c); got != want {
			t.Fatalf("SumUp(%v*%v, %v) = %v, SumUp of the rounded product = %v", a, b, c, got, want)
		}
		if got, want := RoundUp(a*b), RoundUp(p); got != want {
			t.Fatalf("RoundUp(%v*%v) = %v, RoundUp of the rounded product %v = %v", a, b, got, p, want)
		}
		if got, want := roundIn(a*b, -math.MaxFloat32, math.MaxFloat32), roundIn(p, -math.MaxFloat32, math.MaxFloat32); got != want {
			t.Fatalf("roundIn(%v*%v) = %v, roundIn of the rounded product %v = %v", a, b, got, p, want)
		}
		if got, want := roundSumIn(a*b, c, -math.MaxFloat32, math.MaxFloat32), ceilSum(p, c, -math.MaxFloat32, math.MaxFloat32); got != want {
			t.Fatalf("roundSumIn(%v*%v, %v) = %v, want %v", a, b, c, got, want)
		}
	}
}
