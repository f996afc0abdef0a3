package sketch_test

// Audit 86 (precision): the lock-free sketch and sketch/reference against
// exact exponential decay (math/big at 320 bits, exp by a Taylor series
// after halving), on one key alone, for extreme lambdas, ages past the
// sketch's tables and stamp horizons, scores at the float32 limits (both
// signs, Lo < 0), mass accumulation, UpdateAndQuery and TryUpdate.

import (
	"fmt"
	"math"
	"math/big"
	"testing"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/reference"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

const audit86precBits = 320

func audit86precF(x float64) *big.Float {
	return new(big.Float).SetPrec(audit86precBits).SetFloat64(x)
}

// audit86precExpNeg returns e^-x for x >= 0: e^-(x/2^m) by its Taylor
// series (x/2^m < 2^-12), squared m times. Relative error far below 2^-250.
func audit86precExpNeg(x *big.Float) *big.Float {
	if x.Sign() == 0 {
		return big.NewFloat(1).SetPrec(audit86precBits)
	}
	if x.Cmp(audit86precF(800)) > 0 {
		// Past 800 any product with a float32 score is below 1e-300 (the
		// documented underflow floor): a positive lower bound suffices,
		// e^-800 x 2^-ceil(1.45 (x - 800)) <= e^-x.
		y, _ := new(big.Float).Sub(x, audit86precF(800)).Float64()
		k := int(math.Min(math.Ceil(1.45*y), 1<<30))
		e := audit86precExpNeg(audit86precF(800))
		return e.SetMantExp(e, -k)
	}
	m := 12 + max(x.MantExp(nil), 0)
	y := new(big.Float).SetPrec(audit86precBits).SetMantExp(x, -m)
	y.Neg(y)
	sum := big.NewFloat(1).SetPrec(audit86precBits)
	term := big.NewFloat(1).SetPrec(audit86precBits)
	for k := 1; k < 60; k++ {
		term.Mul(term, y)
		term.Quo(term, new(big.Float).SetPrec(audit86precBits).SetInt64(int64(k)))
		sum.Add(sum, term)
		if term.Sign() == 0 || term.MantExp(nil) < -audit86precBits-20 {
			break
		}
	}
	for range m {
		sum.Mul(sum, sum)
	}
	return sum
}

// audit86precFactor is exp(-lambda*dt/1000) exactly (lambda the float64).
func audit86precFactor(lambda float64, dt int64) *big.Float {
	x := audit86precF(lambda)
	x.Mul(x, new(big.Float).SetPrec(audit86precBits).SetInt64(dt))
	x.Quo(x, audit86precF(1000))
	return audit86precExpNeg(x)
}

// audit86precBelow reports got < truth (exactly).
func audit86precBelow(got float64, truth *big.Float) bool {
	return audit86precF(got).Cmp(truth) < 0
}

// audit86precRel is (got - truth)/|truth| as a float64 (0 if truth is 0).
func audit86precRel(got float64, truth *big.Float) float64 {
	if truth.Sign() == 0 {
		return got
	}
	d := audit86precF(got)
	d.Sub(d, truth)
	d.Quo(d, new(big.Float).Abs(truth))
	f, _ := d.Float64()
	return f
}

func audit86precTiny(truth *big.Float) bool {
	f, _ := new(big.Float).Abs(truth).Float64()
	return f < 1e-300
}

// TestAudit86PrecExpOracleSelf: the oracle agrees with math.Exp.
func TestAudit86PrecExpOracleSelf(t *testing.T) {
	for _, x := range []float64{1e-15, 1e-6, 0.5, 1, 2.5, 10, 100, 700, 745} {
		f, _ := audit86precExpNeg(audit86precF(x)).Float64()
		if w := math.Exp(-x); math.Abs(f-w) > 4e-16*w+5e-324 {
			t.Fatalf("exp(-%v) oracle %v, math.Exp %v", x, f, w)
		}
	}
}

var audit86precLambdas = []float64{1e-12, 1e-9, 2e-9, 1e-6, math.Ln2 / 10, 1, 3.7, 1e3, 1e6}

var audit86precAges = []int64{
	1, 2, 255, 256, 257, 1000, 65535, 65536, 65537, 1<<24 - 1, 1 << 24, 1<<24 + 1,
	1<<29 - 1, 1 << 29, 1<<29 + 1, 1<<30 + 7, 1<<31 - 1, 1 << 31, 1<<31 + 1,
	1<<32 - 1, 1 << 32, 1<<32 + 1, 365 * 86_400_000, 3 * 365 * 86_400_000,
}

var audit86precScores = []float64{
	3e38, math.MaxFloat32, 1e30, 16777217, 1000, 1, 0.1, 1e-20, 1e-38,
	float64(math.SmallestNonzeroFloat32) * 3, float64(math.SmallestNonzeroFloat32),
}

// TestAudit86PrecExpSingleShot: Update(k, s) then, dt ms later, Query,
// UpdateAndQuery(k, 0) and the reference's Query are never below
// s*exp(-lambda*dt/1000) (for a negative s: never more negative), with
// Lo = -MaxFloat32 and Hi = MaxFloat32. Underflow of a truth below 1e-300
// to 0 is the documented floor (docs/precision.md, "an exact underflow
// stays 0") and is only counted. Also the worst over-estimate, relative.
func TestAudit86PrecExpSingleShot(t *testing.T) {
	testsize.Serial(t)
	ages := audit86precAges
	if testsize.Small() {
		ages = ages[:12]
	}
	worst, worstAt, underflows, n, worstTinyAbs := 0.0, "", 0, 0, 0.0
	for li, lambda := range audit86precLambdas {
		for si, s := range audit86precScores {
			for _, sign := range []float64{1, -1} {
				s := sign * s
				stored := float64(float32(s)) // the scores are float32 values or round up
				if float64(float32(s)) < s {
					stored = float64(math.Nextafter32(float32(s), float32(math.Inf(1))))
				}
				for ai, dt := range ages {
					levels := uint32(1 + (li+si+ai)%4)
					fc := sketchtest.NewFakeClock()
					cfg := sketch.Config{Levels: levels, CellsPerLevel: 1 << 12, Decay: decay.Exponential(lambda),
						Lo: -math.MaxFloat32, Hi: math.MaxFloat32, Clock: fc}
					sk, err := sketch.New(cfg)
					if err != nil {
						t.Fatal(err)
					}
					rf, err := reference.New(cfg)
					if err != nil {
						t.Fatal(err)
					}
					t0 := int64(1_700_000_000_000) + int64(ai)*977
					fc.Set(t0)
					key := []byte("k")
					sk.Update(key, s)
					rf.Update(key, s)
					fc.Set(t0 + dt)
					truth := audit86precF(stored)
					truth.Mul(truth, audit86precFactor(lambda, dt))
					truthS := audit86precF(s)
					truthS.Mul(truthS, audit86precFactor(lambda, dt))
					q := sk.Query(key)
					qr := rf.Query(key)
					u := sk.UpdateAndQuery(key, 0)
					where := fmt.Sprintf("Exponential(%g) L=%d s=%g dt=%d", lambda, levels, s, dt)
					for _, c := range []struct {
						what string
						got  float64
						tr   *big.Float
					}{{"Query", q, truth}, {"UpdateAndQuery(0)", u, truth}, {"reference Query", qr, truthS}} {
						n++
						if c.what == "reference Query" {
							// The reference decays in float64 rounded to
							// nearest (the argument lambda*dt too): never below "up to float64 rounding"
							// (sketch package doc).
							if r := audit86precRel(c.got, c.tr); r < -1e-12 && !audit86precTiny(c.tr) {
								t.Errorf("%s: reference Query = %v below the exact by rel %g", where, c.got, r)
							}
							continue
						}
						if audit86precBelow(c.got, c.tr) {
							if c.got == 0 && audit86precTiny(c.tr) {
								underflows++
								continue
							}
							tf, _ := c.tr.Float64()
							t.Errorf("%s: %s = %v below the exact %v (rel %g)", where, c.what, c.got, tf, audit86precRel(c.got, c.tr))
							continue
						}
						if c.what == "Query" {
							tf, _ := new(big.Float).Abs(c.tr).Float64()
							if tf >= 1e-30 {
								if r := audit86precRel(c.got, c.tr); r > worst {
									worst, worstAt = r, where
								}
							} else if d := c.got - sign*tf; d > worstTinyAbs {
								worstTinyAbs = d
							}
						}
					}
				}
			}
		}
	}
	t.Logf("%d reads; worst Query over-estimate rel %g at %s (truths >= 1e-30); worst absolute over-estimate of a truth below 1e-30: %g; reads of 0 for a truth below 1e-300: %d", n, worst, worstAt, worstTinyAbs, underflows)
	// A single narrowing to float32 costs at most 2^-23 relative; the
	// horizon sweep adds at most one ulp per 2^29 ms (docs/precision.md).
	if worst > 3*0x1p-23*float64(1+ages[len(ages)-1]>>29) {
		t.Errorf("worst over-estimate %g exceeds the documented bound", worst)
	}
}
