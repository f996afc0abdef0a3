package meter

import (
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// audit101CeilOracle returns the least float64 at or above the exact
// rational c x 1e9 / n (c finite, > 0), or +Inf where no float64 is. It is
// computed independently of math/big's Rat.Float64: below 2^-1022 as
// ceil(X x 2^1074) subnormal ulps, above it by big.Float with 53 bits
// rounded toward +Inf (both exact, as the result is a float64).
func audit101CeilOracle(c float64, n uint64) float64 {
	x := new(big.Rat).SetFloat64(c)
	x.Mul(x, new(big.Rat).SetFrac(big.NewInt(1e9), new(big.Int).SetUint64(n)))
	minNormal := new(big.Rat).SetFloat64(0x1p-1022)
	if x.Cmp(minNormal) < 0 {
		// k = ceil(x x 2^1074) in [1, 2^52]
		y := new(big.Rat).Mul(x, new(big.Rat).SetInt(new(big.Int).Lsh(big.NewInt(1), 1074)))
		k := new(big.Int).Quo(y.Num(), y.Denom())
		if new(big.Int).Mul(k, y.Denom()).Cmp(y.Num()) != 0 {
			k.Add(k, big.NewInt(1))
		}
		return math.Ldexp(float64(k.Int64()), -1074) // exact: k <= 2^52
	}
	f := new(big.Float).SetPrec(53).SetMode(big.ToPositiveInf).SetRat(x)
	if f.Cmp(new(big.Float).SetFloat64(math.MaxFloat64)) > 0 {
		return math.Inf(1)
	}
	v, acc := f.Float64()
	if acc != big.Exact {
		panic("oracle: not exact")
	}
	return v
}

// audit101Windows are the adversarial windows (ns) of the checks: the
// least allowed (1 ms) and its neighbours, 2^19 + 1 and 2^20 (just above
// ceilQuotient's own precondition, n > 2^19), odd and prime windows,
// windows around the point where the quotient's integer part q1 has
// exactly 53 bits (n near m x 1e9 / 2^53, 0.5 s to 1 s), powers of
// two and of ten, 2^53 +- 1, and the largest a Rate takes (2^62) and
// ceilQuotient's bound (2^63 - 1).
func audit101Windows(rng *rand.Rand) []uint64 {
	ws := []uint64{1e6, 1e6 + 1, 1e6 + 3, 1<<19 + 1, 1 << 20, 1<<20 + 1, 999_999_937, 1_000_000_007,
		3e6, 7e6, 13e6, 130e6, 1e9, 1e9 - 1, 1e9 + 1, 5e8, 5e8 - 1, 5e8 + 1, 1 << 29, 1<<29 + 1, 1 << 30, 1<<30 - 1,
		60e9, 3600e9, 1 << 53, 1<<53 - 1, 1<<53 + 1, 1e18, 1 << 62, 1<<62 - 1, 1<<63 - 1, 1<<63 - 25,
		1953125, 1953125 * 512, 5 * 5 * 5 * 5 * 5 * 5 * 5 * 5 * 5 * 5 * 5 * 5 * 5 * 5 * 5 * 5 * 5 * 5 * 5 * 5 * 5 * 5 * 5 * 5 * 5 * 5}
	for range 30 {
		ws = append(ws, 1<<19+1+rng.Uint64N(1<<40))
		ws = append(ws, 1<<19+1+rng.Uint64N(1<<63-1<<19-2))
		ws = append(ws, 1e6+rng.Uint64N(2e9))
	}
	return ws
}

// audit101Counts are the adversarial counts: the smallest subnormal
// (5e-324) and its small multiples, the largest subnormal, 2^-1022 and
// its neighbours, the float32 edges (smallest subnormal, MaxFloat32),
// full-mantissa values (all ones), MaxFloat64 and its neighbour, and
// random bit patterns over the whole positive range.
func audit101Counts(rng *rand.Rand, k int) []float64 {
	cs := []float64{5e-324, 1e-323, 1.5e-323, 0x1p-1060, math.Float64frombits(0x000fffffffffffff), 0x1p-1022,
		math.Nextafter(0x1p-1022, 0), math.Nextafter(0x1p-1022, 1), math.SmallestNonzeroFloat32, math.MaxFloat32,
		float64(math.Nextafter32(math.MaxFloat32, 0)), 1, 1 - 0x1p-53, 1 + 0x1p-52, 0x1.fffffffffffffp0, 0x1.fffffffffffffp100,
		math.MaxFloat64, math.Nextafter(math.MaxFloat64, 0), 1e300, 1e-300, 0.1, 1.0 / 3, 13, 1 << 24, 1<<24 + 2}
	for range k {
		cs = append(cs, math.Float64frombits(1+rng.Uint64N(0x7fefffffffffffff)))
		cs = append(cs, float64(math.Float32frombits(1+rng.Uint32N(0x7f7fffff))))
		cs = append(cs, math.Float64frombits(1+rng.Uint64N(1<<52))) // subnormal
	}
	return cs
}

// TestAudit101CeilQuotientExactOracle (passing check): Rate's doc
// (meter/rate.go, "PerSecond is C/window rounded up (never below the
// exact quotient of the count read)") and perSecond's "the least float64
// not below c x 1e9 / window_ns". ceilQuotient is compared bit for bit
// with an independent exact oracle (math/big, with the subnormal range
// done in integer ulps) for every count in the whole positive float64
// range (subnormal 5e-324 to MaxFloat64, where the quotient may exceed
// MaxFloat64: +Inf is then the least float64 "not below" it) and every
// window from 2^19 + 1 ns to 2^63 - 1 ns (the function's stated domain),
// including quotients that land in the subnormal range and below half
// of 5e-324 (an underflow to 0 would be below the truth).
func TestAudit101CeilQuotientExactOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(101, 1))
	k := 30
	if testing.Short() {
		k = 15
	}
	ws := audit101Windows(rng)
	cs := audit101Counts(rng, k)
	bad := 0
	for _, n := range ws {
		// Counts whose quotient lies within a few steps of a power of
		// two, on either side: the round-up's carry (top++ reaching
		// 2^53) and the binade change of the result.
		cs := cs
		for _, k := range []int{-1070, -1040, -1000, -20, 0, 1, 10, 53, 100, 900} {
			c0 := math.Ldexp(float64(n)/1e9, k)
			for range 3 {
				c0 = math.Nextafter(c0, 0)
			}
			for range 7 {
				if c0 > 0 && !math.IsInf(c0, 0) {
					cs = append(cs, c0)
				}
				c0 = math.Nextafter(c0, math.Inf(1))
			}
		}
		for _, c := range cs {
			got := ceilQuotient(c, n)
			want := audit101CeilOracle(c, n)
			if c == 1.0/3 || c == 13 || c == 5e-324 {
				// The oracle itself: want is not below the exact
				// quotient and the float64 below it is (math/big).
				x := new(big.Rat).SetFloat64(c)
				x.Mul(x, new(big.Rat).SetFrac(big.NewInt(1e9), new(big.Int).SetUint64(n)))
				if new(big.Rat).SetFloat64(want).Cmp(x) < 0 || new(big.Rat).SetFloat64(math.Nextafter(want, 0)).Cmp(x) >= 0 {
					t.Fatalf("oracle wrong for c %v n %d: %v", c, n, want)
				}
			}
			if math.Float64bits(got) != math.Float64bits(want) {
				if bad < 5 {
					t.Errorf("ceilQuotient(%b, %d) = %v (%b), want the least float64 not below c x 1e9 / n: %v (%b)", c, n, got, got, want, want)
				}
				bad++
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d pairs wrong", bad, len(ws)*len(cs))
	}
}

// TestAudit101CeilQuotientExactQuotientsNotRoundedUp (passing check):
// where c x 1e9 / n is itself a float64, "rounded up" must return it, not
// the next float64 (a sticky bit set by mistake would). The pairs are
// built to divide exactly: n = 2^a x 5^b with b >= 9, c = q x 5^(b-9) x
// 2^(a-9) for a q of few bits, so the quotient is q; q ranges over normal
// and subnormal float64 values and powers of two (a top++ that carries
// to 2^53 has nothing to carry here).
func TestAudit101CeilQuotientExactQuotientsNotRoundedUp(t *testing.T) {
	rng := rand.New(rand.NewPCG(101, 2))
	checked, reps := 0, 3
	if testing.Short() {
		reps = 1
	}
	for a := 0; a <= 40; a++ {
		for b := 9; b <= 27; b++ {
			n := uint64(1) << a
			for range b {
				if n > (1<<63-1)/5 {
					n = 0
					break
				}
				n *= 5
			}
			if n <= 1<<19 || n >= 1<<63 {
				continue
			}
			p5 := math.Pow(5, float64(b-9)) // exact: 5^18 < 2^53
			for range reps {
				qi := float64(1 + rng.Uint64N(1<<12))
				for _, qe := range []int{-1074, -1060, -1030, -1022, -1000, -500, -30, 0, 30, 400, 900} {
					q := math.Ldexp(qi, qe)
					if q == 0 || math.IsInf(q, 0) || math.Ldexp(q, -qe) != qi {
						continue
					}
					c := q * p5
					c = math.Ldexp(c, a-9)
					// c must be q x 5^(b-9) x 2^(a-9) exactly.
					exact := new(big.Rat).SetFloat64(q)
					exact.Mul(exact, new(big.Rat).SetFrac(new(big.Int).SetUint64(n), big.NewInt(1e9)))
					if c == 0 || math.IsInf(c, 0) || new(big.Rat).SetFloat64(c).Cmp(exact) != 0 {
						continue
					}
					checked++
					if got := ceilQuotient(c, n); got != q {
						t.Fatalf("c = %b, n = %d: c x 1e9 / n is exactly %v, ceilQuotient returned %v", c, n, q, got)
					}
				}
			}
		}
	}
	if checked < 600*reps {
		t.Fatalf("only %d exact pairs checked", checked)
	}
}

// audit101Rate is a one-cell Rate on clk (no collisions, no rotation
// within the test).
func audit101Rate(t *testing.T, w time.Duration, clk *sketchtest.FakeClock) *Rate {
	t.Helper()
	r, err := NewRate(w, WithClock(clk), WithSeed(101), WithSize(1, 1),
		WithHasher(sketch.XXH3()), WithPrefetch(false), WithPeriodWindows(1e9/float64(w/time.Millisecond)+1))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestAudit101CeilPerSecondEveryPath (passing check): through the API,
// PerSecondAt at every path a count reaches it by — a float32 cell read
// at its instant (counts from 2^-149 to MaxFloat32, n a fraction or a
// whole number), a decayed float64 count read 1 ms to many windows later
// (the exponential table path, the slow path past 2^24 ms, the tiny
// path below 1e-290), a key never seen (0), a decayed count that has
// underflowed to 0 — the result is exactly the least float64 not below
// the count read (the rotator's primary query at the same t) x 1e9 /
// window_ns, and 0 reads 0.
func TestAudit101CeilPerSecondEveryPath(t *testing.T) {
	rng := rand.New(rand.NewPCG(101, 3))
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	ws := []time.Duration{time.Millisecond, 1_000_001, 3 * time.Millisecond, 7 * time.Millisecond, 130 * time.Millisecond,
		time.Second, 1_000_000_007, time.Minute, time.Hour}
	ns := []float64{math.SmallestNonzeroFloat32, 1e-40, 0.1, 1, 3, 13, 1 << 24, 1<<24 + 1, 1e30, math.MaxFloat32}
	gaps := []int64{0, 1, 2, 3, 255, 256, 65535, 65536, 1 << 24, 1<<24 + 1}
	iters := 4
	if testing.Short() {
		iters = 1
	}
	checked, tiny, sub, f32 := 0, 0, 0, 0
	for _, w := range ws {
		for range iters {
			for _, n := range ns {
				n = float64(float32(n * (1 + rng.Float64()/4)))
				if n > math.MaxFloat32 {
					n = math.MaxFloat32
				}
				r := audit101Rate(t, w, clk)
				t0, ms0 := clk.Now(), clk.NowMillis()
				if got := r.PerSecondAt(t0, "k"); got != 0 {
					t.Fatalf("a key never seen: PerSecond %v, want 0", got)
				}
				r.ObserveAt(t0, "k", n)
				wms := int64(w / time.Millisecond)
				gs := append(append([]int64(nil), gaps...), 600*wms, 690*wms, 700*wms, 720*wms, 735*wms, 745*wms, 760*wms, 800*wms)
				slices.Sort(gs)
				for _, g := range gs {
					// A t past the clock counts as the clock's reading
					// (internal/core/at.go): move the clock there.
					clk.Set(ms0 + g)
					at := clk.Now()
					c := r.r.QueryStringAt(at, "k")
					got := r.PerSecondAt(at, "k")
					checked++
					switch {
					case c > 0 && c < 0x1p-1022:
						sub++
					case c > 0 && c < 1e-290:
						tiny++
					case float64(float32(c)) == c:
						f32++
					}
					if c == 0 {
						if got != 0 {
							t.Fatalf("window %v, n %v, +%d ms: count 0, PerSecond %v", w, n, g, got)
						}
						continue
					}
					if want := audit101CeilOracle(c, uint64(w)); got != want {
						t.Fatalf("window %v, n %v, +%d ms: count %b, PerSecond %v, want %v", w, n, g, c, got, want)
					}
				}
			}
		}
	}
	t.Logf("%d reads checked: %d of subnormal counts, %d of counts below 1e-290, %d of float32 counts", checked, sub, tiny, f32)
	if sub == 0 || tiny == 0 || f32 == 0 {
		t.Errorf("a path went unchecked: %d subnormal, %d tiny, %d float32 counts", sub, tiny, f32)
	}
}
