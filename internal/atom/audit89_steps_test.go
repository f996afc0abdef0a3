package atom

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/law"
	"github.com/lfgrudge/grudge/internal/testsize"
)

const audit89Prec = 256

// audit89ExpNeg returns e^-x for x >= 0 at 256 bits: Taylor series of
// x/2^k (below 2^-12), squared k times.
func audit89ExpNeg(x *big.Float) *big.Float {
	y := new(big.Float).SetPrec(audit89Prec).Set(x)
	k := 0
	if x.Sign() > 0 {
		k = max(x.MantExp(nil)+12, 0)
	}
	y.SetMantExp(y, -k)
	sum := new(big.Float).SetPrec(audit89Prec).SetInt64(1)
	term := new(big.Float).SetPrec(audit89Prec).SetInt64(1)
	for i := int64(1); i < 40; i++ {
		term.Mul(term, y)
		term.Quo(term, new(big.Float).SetPrec(audit89Prec).SetInt64(-i))
		sum.Add(sum, term)
	}
	for range k {
		sum.Mul(sum, sum)
	}
	return sum
}

// audit89Truth is a key's exact score under one law: big.Float at 256
// bits (a relative error near 2^-250 per step, far below any float32 or
// float64 rounding the engine does), decayed exactly, added exactly,
// clamped to the configured (not rounded) bounds.
type audit89Truth struct {
	kind   law.Kind
	param  float64
	lo, hi float64
	v      *big.Float
}

func (e *audit89Truth) decayed(dt int64) *big.Float {
	v := new(big.Float).SetPrec(audit89Prec).Set(e.v)
	if dt <= 0 || v.Sign() == 0 {
		return v
	}
	switch e.kind {
	case law.KindExponential:
		x := new(big.Float).SetPrec(audit89Prec).SetFloat64(e.param)
		x.Mul(x, new(big.Float).SetPrec(audit89Prec).SetInt64(dt))
		x.Quo(x, new(big.Float).SetPrec(audit89Prec).SetInt64(1000))
		v.Mul(v, audit89ExpNeg(x))
	case law.KindLinear:
		drop := new(big.Float).SetPrec(audit89Prec).SetFloat64(e.param)
		drop.Mul(drop, new(big.Float).SetPrec(audit89Prec).SetInt64(dt))
		drop.Quo(drop, new(big.Float).SetPrec(audit89Prec).SetInt64(1000))
		if v.Sign() > 0 {
			v.Sub(v, drop)
			if v.Sign() < 0 {
				v.SetInt64(0)
			}
		} else {
			v.Add(v, drop)
			if v.Sign() > 0 {
				v.SetInt64(0)
			}
		}
	}
	return v
}

func (e *audit89Truth) add(dt int64, delta float64) {
	v := e.decayed(dt)
	v.Add(v, new(big.Float).SetFloat64(delta))
	if v.Cmp(big.NewFloat(e.hi)) > 0 {
		v.SetFloat64(e.hi)
	}
	if v.Cmp(big.NewFloat(e.lo)) < 0 {
		v.SetFloat64(e.lo)
	}
	e.v = v
}

// audit89Underflow is how far below the truth a value may read: mass a
// float64 underflows to 0 (precision.md, "an exact underflow stays 0"),
// never more than 2^-1000 however often it happens in these runs.
var audit89Underflow = new(big.Float).SetMantExp(big.NewFloat(1), -1000)

// audit89Below reports whether got is below the truth t by more than
// what float64 underflow loses.
func audit89Below(got float64, t *big.Float) bool {
	g := new(big.Float).SetPrec(audit89Prec).SetFloat64(got)
	g.Add(g, audit89Underflow)
	return g.Cmp(t) < 0
}

// TestAudit89AtomStepsAboveTruth: precision.md's induction ("Every step
// (decay, add, clamp, round) is monotone, and each one is at or above its
// float64 counterpart ... a lock-free cell is never below the reference
// cell that saw the same history") checked against the exact history
// instead: a float32 cell driven through Next, Value+Apply, NextN and
// the horizon sweep's Rebase, in many small steps (0 to 50 ms, some up to
// 4.7 h, sweeps at ages of 2^29 to 2^30 ms), with positive, zero, tiny
// (below a float32 ulp of the score) and, where Lo < 0, negative deltas,
// under None, Exponential (table and math.Exp paths) and Linear (whole
// and fractional drains), never reads below the exact score (256-bit
// big.Float: decayed once per gap, added exactly, clamped to the
// configured bounds): not right after the write (decay then add), not at
// later times through Value and ValueLater (add then decay), and
// ValueLater equals Value at the later time while the age is below 2^31.
func TestAudit89AtomStepsAboveTruth(t *testing.T) {
	testsize.Serial(t)
	laws := []decay.Decay{decay.None(), decay.Exponential(1e-3), decay.Exponential(0.0693), decay.Exponential(1), decay.Exponential(60),
		decay.Linear(0.05), decay.Linear(1), decay.Linear(123.456), decay.Linear(3000), decay.Linear(100.1)}
	bounds := [][2]float64{{0, 1e9}, {-1e6, 1e6}, {0, 0.1}, {-100, math.Inf(1)}}
	r := rand.New(rand.NewPCG(89, 10))
	for li, d := range laws {
		for bi, b := range bounds {
			rules := NewRules(d, b[0], b[1])
			kind, param := law.Params(d)
			hi := b[1]
			if math.IsInf(hi, 1) {
				hi = math.MaxFloat32 // "An infinite bound is MaxFloat32"
			}
			tr := &audit89Truth{kind: kind, param: param, lo: b[0], hi: hi, v: new(big.Float).SetPrec(audit89Prec)}
			var w Word
			abs := int64(uint32(r.Uint32())) // the clock, as an absolute ms count
			w = Pack(0, uint32(abs))
			stampAbs := abs
			for step := range 160 {
				var dt int64
				switch x := r.IntN(20); {
				case x < 6:
					dt = 0
				case x < 17:
					dt = 1 + r.Int64N(50)
				case x < 19:
					dt = r.Int64N(1 << 24)
				default:
					dt = 1<<29 + r.Int64N(1<<29) // a sweep's age
				}
				abs += dt
				now := uint32(abs)
				var delta float64
				s := math.Abs(tr.approx())
				switch x := r.IntN(10); {
				case x < 5:
					delta = math.Ldexp(1+r.Float64(), r.IntN(16)-6)
				case x < 6:
					delta = 0
				case x < 8:
					delta = math.Max(s, 1) * math.Ldexp(1+r.Float64(), -30-r.IntN(40)) // tiny
				default:
					delta = float64(1 + r.IntN(100))
				}
				if b[0] < 0 && r.IntN(3) == 0 {
					delta = -delta
				}
				age := abs - stampAbs
				switch op := r.IntN(4); {
				case age >= 1<<29 && op < 2:
					// The horizon sweep: re-stamp at now (Rebase), then the
					// add at the same ms.
					sc, back := rules.Rebase(float64(w.Score()), age, 1<<29)
					if back < 0 || back > 1<<29 {
						t.Fatalf("Rebase back %d", back)
					}
					tr.add(age, 0)
					age = 0 // the truth is at now
					stampAbs = abs - back
					w = Pack(sc, uint32(stampAbs))
					if got := rules.Value(w, now); audit89Below(got, tr.v) {
						t.Fatalf("law %d bounds %d step %d: swept cell reads %v below the truth %v", li, bi, step, got, tr.v.Text('g', 17))
					}
					w = rules.Next(w, now, delta)
				case op == 0:
					w = rules.Next(w, now, delta)
				case op == 1:
					w = rules.Apply(w, rules.Value(w, now), now, delta)
				default:
					var ws, nws [MaxCells]Word
					n := uint32(1 + r.IntN(MaxCells))
					for i := range n {
						ws[i] = w
					}
					rules.NextN(&ws, n, now, delta, &nws)
					for i := range n {
						if nws[i] != nws[0] {
							t.Fatalf("NextN of equal words gave different words")
						}
					}
					if nw := rules.Next(w, now, delta); nw != nws[0] {
						t.Fatalf("law %d: NextN %x, Next %x", li, nws[0], nw)
					}
					w = nws[0]
				}
				tr.add(max(age, 0), delta)
				stampAbs = abs // every write stamps now (Newer: no stamp is ahead of the clock here)
				if got := rules.Value(w, now); audit89Below(got, tr.v) {
					t.Fatalf("law %d bounds %d step %d: cell reads %v below the truth %v (decay then add)", li, bi, step, got, tr.v.Text('g', 17))
				}
				if f := float64(w.Score()); f > rules.Hi() || f < rules.Lo() || math.IsNaN(f) || math.IsInf(f, 0) {
					t.Fatalf("law %d: score %v outside [%v, %v]", li, f, rules.Lo(), rules.Hi())
				}
				for _, x := range []int64{1, 7, 1000, 1 + r.Int64N(1<<30)} {
					later := rules.ValueLater(w, now, x)
					if x < 1<<31 {
						if v := rules.Value(w, now+uint32(x)); math.Float64bits(v) != math.Float64bits(later) {
							t.Fatalf("law %d: ValueLater(%v, +%d) = %v, Value at now+%d = %v", li, w.Score(), x, later, x, v)
						}
					}
					if audit89Below(later, tr.decayed(x)) {
						t.Fatalf("law %d bounds %d step %d: %d ms later reads %v below the truth %v (add then decay)", li, bi, step, x, later,
							tr.decayed(x).Text('g', 17))
					}
				}
			}
		}
	}
}

// approx is the truth as a float64, for sizing deltas.
func (e *audit89Truth) approx() float64 { f, _ := e.v.Float64(); return f }
