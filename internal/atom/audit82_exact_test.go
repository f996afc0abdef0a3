package atom

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/testsize"
)

// audit82Ceil is the oracle: the exact a + b (big.Float), clamped to
// [lo, hi], then the least float32 at or above it.
func audit82Ceil(a, b, lo, hi float64) float32 {
	x := new(big.Float).SetPrec(2200).SetFloat64(a)
	x.Add(x, new(big.Float).SetPrec(2200).SetFloat64(b))
	if x.Cmp(new(big.Float).SetFloat64(lo)) < 0 {
		x.SetFloat64(lo)
	} else if x.Cmp(new(big.Float).SetFloat64(hi)) > 0 {
		x.SetFloat64(hi)
	}
	f, _ := x.Float32()
	if new(big.Float).SetFloat64(float64(f)).Cmp(x) < 0 {
		f = math.Nextafter32(f, float32(math.Inf(1)))
	}
	return f
}

func audit82Scores() []float32 {
	base := []float32{0, math.SmallestNonzeroFloat32, 2 * math.SmallestNonzeroFloat32,
		math.Float32frombits(0x007fffff), math.Float32frombits(0x00800000), math.Float32frombits(0x00800001),
		0.1, 1, 3, 1 << 24, 1<<24 + 2, 0x1p60, 0x1p60 - 0x1p36, 0x1p100, 1e30,
		math.Nextafter32(math.MaxFloat32, 0), math.MaxFloat32}
	var out []float32
	for _, s := range base {
		out = append(out, s, -s)
	}
	out = append(out, float32(math.Copysign(0, -1)))
	return out
}

func audit82Deltas(s float32) []float64 {
	sf := float64(s)
	a := math.Abs(sf)
	ulp32 := float64(math.Nextafter32(float32(a), float32(math.Inf(1)))) - a
	ulp64 := math.Nextafter(a, math.Inf(1)) - a
	d := []float64{0, math.Copysign(0, -1), 5e-324, math.SmallestNonzeroFloat32, math.SmallestNonzeroFloat32 / 2,
		math.SmallestNonzeroFloat32 * 0.75, 1, 0.1, 1e14, 1e-300,
		math.MaxFloat64, math.MaxFloat64 / 2, 1e300, math.MaxFloat32, 2 * math.MaxFloat32,
		ulp64 / 4, ulp64 / 2, ulp64 * 0.75, ulp64, ulp32, ulp32 / 2, ulp32 + ulp64/4, ulp32 - ulp64/4,
		ulp32/2 + ulp64/4, ulp32/2 - ulp64/4, a, 2 * a, a + ulp64/4}
	out := make([]float64, 0, 2*len(d))
	for _, x := range d {
		out = append(out, x, -x)
	}
	return out
}

type audit82Bounds struct{ lo, hi float64 }

func audit82BoundsFor(s float32, delta float64) []audit82Bounds {
	sum := float64(s) + delta
	bs := []audit82Bounds{
		{-math.MaxFloat32, math.MaxFloat32}, {0, math.MaxFloat32}, {-10, math.Inf(1)},
		{math.Inf(-1), 0}, {0, 0.1}, {0, 1e12}, {-1e12, 0}, {-0.1, 0.1}, {-1, 1e30},
	}
	if !math.IsInf(sum, 0) && math.Abs(sum) <= math.MaxFloat32 {
		c := float64(RoundUp(sum))
		f := float64(float32(sum))
		for _, b := range []float64{c, f, float64(math.Nextafter32(float32(c), float32(math.Inf(-1))))} {
			if b >= 0 {
				bs = append(bs, audit82Bounds{-math.MaxFloat32, b}, audit82Bounds{0, b})
			}
			if b <= 0 {
				bs = append(bs, audit82Bounds{b, math.MaxFloat32}, audit82Bounds{b, 1})
			}
		}
	}
	return bs
}

// TestAudit82AddEdgesEveryPath: every add path (RoundSum, Next, Apply,
// NextN, nextN (assembly on amd64), nextNGeneric, ApplyN, DecideN,
// decideN, decideNGeneric) on edge scores, deltas and bounds stores
// exactly the least float32 at or above the exact clamped sum, finite,
// and the batches agree with the twins bit for bit, whatever the word
// past n holds; DecideN reports AdmitSame exactly when no word changes.
func TestAudit82AddEdgesEveryPath(t *testing.T) {
	testsize.Serial(t)
	rng := rand.New(rand.NewPCG(82, 1))
	// Words past n: nasty words that would change the result if they
	// leaked (aged non-zero, inexact, NaN bits, huge).
	junk := []Word{Pack(0x1p100, 1), Pack(float32(math.NaN()), 200), Word(0xffffffffffffffff), Pack(-math.MaxFloat32, 0), Pack(0.1, 100)}
	checked := 0
	for _, s := range audit82Scores() {
		for _, delta := range audit82Deltas(s) {
			for _, b := range audit82BoundsFor(s, delta) {
				if b.lo > 0 || b.hi < 0 || !(b.lo < b.hi) {
					continue
				}
				r := NewRules(decay.None(), b.lo, b.hi)
				lo, hi := r.Lo(), r.Hi()
				sf := float64(s)
				if sf < lo || sf > hi {
					continue
				}
				want := audit82Ceil(sf, delta, lo, hi)
				same := func(got float32) bool {
					return math.Float32bits(got) == math.Float32bits(want) || (got == 0 && want == 0)
				}
				fail := func(path string, got float32) {
					t.Helper()
					t.Fatalf("%s: score %v (%#x) + delta %v (%#x) in [%v, %v]: stored %v (%#x), want %v (%#x)",
						path, s, math.Float32bits(s), delta, math.Float64bits(delta), lo, hi, got, math.Float32bits(got), want, math.Float32bits(want))
				}
				const now = 100
				w := Pack(s, now)
				if got := r.RoundSum(sf, delta); !same(got) {
					fail("RoundSum", got)
				}
				if got := r.Next(w, now, delta).Score(); !same(got) {
					fail("Next", got)
				}
				if got := r.Apply(w, sf, now, delta).Score(); !same(got) {
					fail("Apply", got)
				}
				// aged under decay.None: nextNFrom
				if got := r.Next(Pack(s, now-5), now, delta).Score(); !same(got) {
					fail("Next aged", got)
				}
				for n := uint32(1); n <= MaxCells; n++ {
					for _, pos := range []uint32{0, n - 1} {
						if pos == n-1 && n == 1 {
							continue
						}
						var ws [MaxCells]Word
						var wants [MaxCells]float32
						for i := range uint32(MaxCells) {
							if i >= n {
								ws[i] = junk[rng.IntN(len(junk))]
								continue
							}
							si := s
							if i != pos {
								switch rng.IntN(3) {
								case 0:
									si = float32(rng.IntN(8))
								case 1:
									si = math.Nextafter32(s, float32(math.Inf(1-2*rng.IntN(2))))
								}
								if float64(si) < lo || float64(si) > hi || math.IsInf(float64(si), 0) {
									si = s
								}
							}
							ws[i] = Pack(si, now)
							wants[i] = audit82Ceil(float64(si), delta, lo, hi)
						}
						checkN := func(path string, nw *[MaxCells]Word) {
							t.Helper()
							for i := range n {
								got := nw[i].Score()
								if math.Float32bits(got) != math.Float32bits(wants[i]) && !(got == 0 && wants[i] == 0) {
									t.Fatalf("%s n=%d word %d: %v + %v in [%v, %v] stored %v (%#x), want %v (%#x); words %x",
										path, n, i, ws[i].Score(), delta, lo, hi, got, math.Float32bits(got), wants[i], math.Float32bits(wants[i]), ws[:MaxCells])
								}
								if nw[i].Stamp() != now {
									t.Fatalf("%s n=%d word %d: stamp %d, want %d", path, n, i, nw[i].Stamp(), now)
								}
							}
						}
						var a, g, p [MaxCells]Word
						if !nextN(&ws, n, now, delta, lo, hi, &a) {
							t.Fatalf("nextN reported slow on fresh words (n=%d, words %x)", n, ws)
						}
						checkN("nextN", &a)
						nextNGeneric(&ws, n, now, delta, lo, hi, &g)
						checkN("nextNGeneric", &g)
						r.NextN(&ws, n, now, delta, &p)
						checkN("NextN", &p)
						var v [MaxCells]float64
						for i := range n {
							v[i] = float64(ws[i].Score())
						}
						sameAll := r.ApplyN(&ws, &v, n, now, delta, &p)
						checkN("ApplyN", &p)
						unchanged := true
						for i := range n {
							if p[i] != ws[i] {
								unchanged = false
							}
						}
						if sameAll != unchanged {
							t.Fatalf("ApplyN same=%v, words unchanged=%v", sameAll, unchanged)
						}
						for _, limit := range []float64{math.MaxFloat64, 0} {
							var va, vg [MaxCells]float64
							var da, dg [MaxCells]Word
							vdA := decideN(&ws, n, now, delta, limit, lo, hi, &va, &da)
							vdG := decideNGeneric(&ws, n, now, delta, limit, lo, hi, &vg, &dg)
							if vdA != vdG {
								t.Fatalf("decideN %d, twin %d (n=%d delta %v limit %v words %x)", vdA, vdG, n, delta, limit, ws)
							}
							lowest := math.Inf(1)
							for i := range n {
								lowest = min(lowest, float64(ws[i].Score()))
							}
							wantV := Deny
							if lowest+delta <= limit {
								wantV = Admit
								if unchanged {
									wantV = AdmitSame
								}
							}
							if vdA != wantV {
								t.Fatalf("decideN verdict %d, want %d (n=%d delta %v limit %v unchanged %v words %x)", vdA, wantV, n, delta, limit, unchanged, ws)
							}
							if vdA == Admit || vdA == AdmitSame {
								checkN("decideN", &da)
								checkN("decideNGeneric", &dg)
							}
						}
						checked++
					}
				}
			}
		}
	}
	t.Logf("%d batches checked", checked)
}

// TestAudit82BoundTies: sums the float64 add rounds exactly onto Lo or
// Hi (or a float32 inside) with a TwoSum error of either sign.
func TestAudit82BoundTies(t *testing.T) {
	type tc struct{ s, d, lo, hi float64 }
	var cases []tc
	for _, b := range []float64{0x1p60, 1, 3, 1 << 24, 1e30, math.MaxFloat32, 0.1} {
		bf := float64(RoundUp(b))
		ulp := math.Nextafter(bf, math.Inf(1)) - bf
		for _, e := range []float64{ulp / 4, -ulp / 4, ulp / 8, -ulp / 8} {
			// score just below hi, delta to land on hi with error e
			s := float64(math.Nextafter32(float32(bf), 0))
			d := (bf - s) + e
			cases = append(cases, tc{s, d, 0, bf}, tc{s, d, -1, math.MaxFloat32})
			// Lo negative: -s + (-d) lands on -bf
			cases = append(cases, tc{-s, -d, -bf, 1}, tc{-s, -d, -math.MaxFloat32, 1})
			// sum on lo from above, lo negative, score at 0 side
			cases = append(cases, tc{0, -bf + e, -bf, 1})
		}
	}
	for _, c := range cases {
		r := NewRules(decay.None(), c.lo, c.hi)
		lo, hi := r.Lo(), r.Hi()
		if c.s < lo || c.s > hi {
			continue
		}
		want := audit82Ceil(c.s, c.d, lo, hi)
		ws := [MaxCells]Word{Pack(float32(c.s), 7), Pack(1, 7), Pack(float32(c.s), 7)}
		for n := uint32(1); n <= 3; n++ {
			var a, g [MaxCells]Word
			nextN(&ws, n, 7, c.d, lo, hi, &a)
			nextNGeneric(&ws, n, 7, c.d, lo, hi, &g)
			for _, got := range []float32{r.RoundSum(c.s, c.d), a[0].Score(), g[0].Score()} {
				if math.Float32bits(got) != math.Float32bits(want) {
					t.Errorf("%v + %v in [%v, %v]: stored %v, want %v", c.s, c.d, lo, hi, got, want)
				}
			}
		}
	}
}

// TestAudit82RandomTwin: random float32 scores and deltas built from
// random bits (every exponent), lanes mixed, both batches against the
// oracle.
func TestAudit82RandomTwin(t *testing.T) {
	testsize.Serial(t)
	rng := rand.New(rand.NewPCG(82, 2))
	for it := range 60000 {
		lo, hi := -math.MaxFloat32, math.MaxFloat32
		switch rng.IntN(4) {
		case 0:
			lo = 0
		case 1:
			hi = math.Ldexp(rng.Float64(), rng.IntN(200)-100)
		case 2:
			lo = -math.Ldexp(rng.Float64(), rng.IntN(200)-100)
		}
		r := NewRules(decay.None(), lo, hi)
		lo, hi = r.Lo(), r.Hi()
		n := uint32(1 + rng.IntN(MaxCells))
		var ws [MaxCells]Word
		var wants [MaxCells]float32
		base := math.Float32frombits(rng.Uint32())
		var delta float64
		switch rng.IntN(3) {
		case 0:
			delta = math.Float64frombits(rng.Uint64())
		case 1:
			delta = float64(base) * math.Ldexp(1+rng.Float64(), -rng.IntN(80))
		default:
			delta = float64(rng.IntN(100)) - 50
		}
		if math.IsNaN(delta) || math.IsInf(delta, 0) {
			delta = 1e-30
		}
		for i := range uint32(MaxCells) {
			sc := base
			if rng.IntN(2) == 0 {
				sc = math.Float32frombits(rng.Uint32())
			}
			if math.IsNaN(float64(sc)) || math.IsInf(float64(sc), 0) || float64(sc) < lo || float64(sc) > hi {
				sc = 0
			}
			ws[i] = Pack(sc, 9)
			wants[i] = audit82Ceil(float64(sc), delta, lo, hi)
		}
		var a, g [MaxCells]Word
		nextN(&ws, n, 9, delta, lo, hi, &a)
		nextNGeneric(&ws, n, 9, delta, lo, hi, &g)
		for i := range n {
			for _, got := range []float32{a[i].Score(), g[i].Score()} {
				if math.Float32bits(got) != math.Float32bits(wants[i]) && !(got == 0 && wants[i] == 0) {
					t.Fatalf("it %d word %d/%d: %v + %v in [%v, %v]: asm %v twin %v, want %v", it, i, n, ws[i].Score(), delta, lo, hi, a[i].Score(), g[i].Score(), wants[i])
				}
			}
		}
	}
}

// TestAudit82SumUpOracle: SumUp is the least float64 at or above the
// exact sum for finite sums.
func TestAudit82SumUpOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(82, 3))
	for it := range 200000 {
		a := math.Ldexp(rng.NormFloat64(), rng.IntN(200)-100)
		b := math.Ldexp(rng.NormFloat64(), rng.IntN(200)-100)
		if rng.IntN(5) == 0 {
			b = -a + math.Ldexp(rng.NormFloat64(), rng.IntN(200)-150)
		}
		got := SumUp(a, b)
		x := new(big.Float).SetPrec(2200).SetFloat64(a)
		x.Add(x, new(big.Float).SetPrec(2200).SetFloat64(b))
		gb := new(big.Float).SetFloat64(got)
		if gb.Cmp(x) < 0 {
			t.Fatalf("it %d: SumUp(%v, %v) = %v below the exact sum", it, a, b, got)
		}
		if p := math.Nextafter(got, math.Inf(-1)); new(big.Float).SetFloat64(p).Cmp(x) >= 0 {
			t.Fatalf("it %d: SumUp(%v, %v) = %v, but %v is also at or above the exact sum", it, a, b, got, p)
		}
	}
}

// TestAudit82FixedSumUpNegativeOverflow: word.go's SumUp comment
// promises "a sum beyond the float64 range is +Inf or -MaxFloat64"
// (rounding toward +Inf of a sum below -MaxFloat64 is -MaxFloat64); the
// code returned -Inf (twoSum's error is NaN, so no step). Fixed in stop
// 49: a -Inf sum returns -MaxFloat64.
func TestAudit82FixedSumUpNegativeOverflow(t *testing.T) {
	if got := SumUp(-math.MaxFloat64, -math.MaxFloat64); got != -math.MaxFloat64 {
		t.Errorf("SumUp(-MaxFloat64, -MaxFloat64) = %v, want -MaxFloat64 (word.go: \"a sum beyond the float64 range is +Inf or -MaxFloat64\")", got)
	}
	if got := SumUp(math.MaxFloat64, math.MaxFloat64); !math.IsInf(got, 1) {
		t.Errorf("SumUp(MaxFloat64, MaxFloat64) = %v, want +Inf", got)
	}
}

// TestAudit82DecayedAdd: aged words (nextNFrom through NextN, Next) under
// Exponential and Linear store the least float32 at or above the exact
// sum of the decayed value (Value) and delta, tiny deltas included.
func TestAudit82DecayedAdd(t *testing.T) {
	testsize.Serial(t)
	rng := rand.New(rand.NewPCG(82, 4))
	for _, d := range []decay.Decay{decay.Exponential(0.5), decay.Linear(3), decay.None()} {
		r := NewRules(d, -1e20, 1e30)
		for it := range 20000 {
			now := uint32(1000 + rng.IntN(1000))
			n := uint32(1 + rng.IntN(MaxCells))
			var ws [MaxCells]Word
			for i := range n {
				sc := float32(math.Ldexp(1+rng.Float64(), rng.IntN(90)-20))
				if rng.IntN(3) == 0 && float64(sc) < 1e20 {
					sc = -sc // a credit (Lo is negative)
				}
				ws[i] = Pack(sc, now-uint32(rng.IntN(3)))
			}
			v0 := r.Value(ws[0], now)
			delta := math.Ldexp(math.Abs(v0)+1e-30, -40-rng.IntN(40)) // far below a float64 ulp
			if rng.IntN(2) == 0 {
				delta = -delta
			}
			var nw [MaxCells]Word
			r.NextN(&ws, n, now, delta, &nw)
			for i := range n {
				v := r.Value(ws[i], now)
				want := audit82Ceil(v, delta, r.Lo(), r.Hi())
				if got := nw[i].Score(); got != want {
					t.Fatalf("%v it %d word %d: value %v + %v: NextN stored %v, want %v", d, it, i, v, delta, got, want)
				}
				if got := r.Next(ws[i], now, delta).Score(); got != want {
					t.Fatalf("%v it %d word %d: value %v + %v: Next stored %v, want %v", d, it, i, v, delta, got, want)
				}
			}
		}
	}
}
