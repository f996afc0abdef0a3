package atomiccell_test

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/lfgrudge/grudge/atomiccell"
	"github.com/lfgrudge/grudge/decay"
)

// TestAudit101CeilCellFixedAddNaNDeltaPanics (audit 101; fixed at stop
// 60, the text below says what was wrong; Add and Next now panic
// "atomiccell: delta is NaN" and leave the cell as it was).
// atomiccell/doc.go, "Invariants": "A stored score is never NaN or ±Inf:
// every narrowing goes through RoundUp ... and callers never pass a NaN
// delta (the sketch panics first)"; Cell.Add's doc: "delta must be
// finite". atomiccell is a public package whose Cell and Rules anyone may
// use without a sketch in front, yet Add does not check: a NaN delta goes
// through twoSum (NaN), clampSum (neither < lo nor >= hi, so it is kept)
// and stepUpErr, and the cell stores a NaN score with no panic. The
// poisoning is permanent: every later Add reads NaN (Value returns NaN),
// adds to it and stores NaN again, so the cell never counts again and
// every Min/compare over it answers false. The package's other inputs
// fail loudly (the sketch's own Update panics "delta is NaN"); here the
// one check that keeps the package invariant is left to callers.
// Reproduction: var c atomiccell.Cell; r := NewRules(decay.None(), 0,
// 1e6); c.Add(r, 0, math.NaN(), c.Load()) -> c.Load().Score() is NaN;
// c.Add(r, 0, 1, c.Load()) -> still NaN. Rules.Next(w, 0, NaN) returns
// a NaN word likewise. Want: a panic that names the package ("atomiccell:
// ... delta is NaN"), or at least a stored score that is not NaN.
func TestAudit101CeilCellFixedAddNaNDeltaPanics(t *testing.T) {
	r := atomiccell.NewRules(decay.None(), 0, 1e6)
	var c atomiccell.Cell
	c.Store(atomiccell.Pack(5, 7))
	msg := func() (m string) {
		defer func() {
			if p := recover(); p != nil {
				m = fmt.Sprint(p)
			}
		}()
		c.Add(r, 7, math.NaN(), c.Load())
		return ""
	}()
	if msg != "atomiccell: delta is NaN" {
		t.Errorf("Cell.Add with a NaN delta: panic %q, want \"atomiccell: delta is NaN\"", msg)
	}
	if w := c.Load(); w != atomiccell.Pack(5, 7) {
		t.Errorf("the panicking Add changed the cell: %v at %d", w.Score(), w.Stamp())
	}
	nmsg := func() (m string) {
		defer func() {
			if p := recover(); p != nil {
				m = fmt.Sprint(p)
			}
		}()
		r.Next(atomiccell.Pack(5, 7), 7, math.NaN())
		return ""
	}()
	if nmsg != "atomiccell: delta is NaN" {
		t.Errorf("Rules.Next with a NaN delta: panic %q, want \"atomiccell: delta is NaN\"", nmsg)
	}
}

// TestAudit101CeilCellAddInfDeltaClamps (passing check): an infinite
// delta, outside Add's "delta must be finite", still never stores Inf or
// NaN (the invariant): +Inf clamps to Hi, -Inf to Lo.
func TestAudit101CeilCellAddInfDeltaClamps(t *testing.T) {
	r := atomiccell.NewRules(decay.Exponential(1), -3, 1e6)
	for _, d := range []float64{math.Inf(1), math.Inf(-1)} {
		var c atomiccell.Cell
		c.Store(atomiccell.Pack(5, 7))
		got := c.Add(r, 9, d, c.Load()).Score()
		want := float32(1e6)
		if d < 0 {
			want = -3
		}
		if got != want {
			t.Errorf("Add(%v) stored %v, want the bound %v", d, got, want)
		}
	}
}

// TestAudit101CeilCellConcurrentMixedSignsAcrossWrap (passing check):
// atomiccell/doc.go ("No update loses mass", "A stamp never moves
// backwards: an update keeps the newer of the stored stamp and now,
// compared modulo 2^32") and Add ("Lock-free: each failed CAS means
// another update succeeded"). Goroutines add whole deltas of both signs
// (+1, -1, +3, -2, +7) under decay.None, each with its own now on either
// side of the 2^32 stamp wrap (2^32 - 2, 2^32 - 1, 0, 1), half of them
// passing a stale word: every partial sum is a whole number below 2^24
// in magnitude, so every add is exact and the final score must equal
// the exact total, and the final stamp must be the newest now (1).
func TestAudit101CeilCellConcurrentMixedSignsAcrossWrap(t *testing.T) {
	r := atomiccell.NewRules(decay.None(), -(1 << 24), 1<<24)
	var c atomiccell.Cell
	c.Store(atomiccell.Pack(0, math.MaxUint32-3))
	nows := []uint32{math.MaxUint32 - 1, math.MaxUint32, 0, 1}
	deltas := []float64{1, -1, 3, -2, 7}
	per := 3000
	if testing.Short() {
		per = 500
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			stale := atomiccell.Pack(123, 5)
			for i := range per {
				w := c.Load()
				if i%2 == 1 {
					w = stale
				}
				c.Add(r, nows[(g+i)%len(nows)], deltas[(g+i)%len(deltas)], w)
			}
		})
	}
	wg.Wait()
	want := 0.0
	for g := range 4 {
		for i := range per {
			want += deltas[(g+i)%len(deltas)]
		}
	}
	got := c.Load()
	if float64(got.Score()) != want {
		t.Errorf("after %d concurrent whole adds: score %v, want exactly %v", 4*per, got.Score(), want)
	}
	if got.Stamp() != 1 {
		t.Errorf("stamp %d, want 1 (the newest now, modulo 2^32)", got.Stamp())
	}
}

// audit101ExpNeg returns e^-x for x >= 0, to prec bits (argument
// halving, a Taylor series, then squaring).
func audit101ExpNeg(x *big.Float, prec uint) *big.Float {
	p := prec + 64
	r := new(big.Float).SetPrec(p).Set(x)
	k := 0
	lim := new(big.Float).SetPrec(p).SetFloat64(0x1p-24)
	for r.Cmp(lim) > 0 {
		r.Quo(r, new(big.Float).SetPrec(p).SetInt64(2))
		k++
	}
	sum := new(big.Float).SetPrec(p).SetInt64(1)
	term := new(big.Float).SetPrec(p).SetInt64(1)
	for i := int64(1); i <= 20; i++ {
		term.Mul(term, r)
		term.Quo(term, new(big.Float).SetPrec(p).SetInt64(-i))
		sum.Add(sum, term)
	}
	for range k {
		sum.Mul(sum, sum)
	}
	return sum
}

// TestAudit101CeilCellExpValueAboveRealDecay (passing check): Rate's doc
// (meter/rate.go: "The sketch only errs upward: collisions ... and
// float32 rounding (up) can raise an estimate, never lower it") rests on
// atomiccell's Rules.Value ("on the safe side") being at or above the
// real decayed value, not only the law's float64 one: checked against
// s x e^-(lambda x dt / 1000) computed exactly from the float64 lambda
// (math/big to 300 bits), for lambdas of Rate windows from 1 ms to 146
// years and just above the slow-law threshold, ages at the table seams,
// past the tables (2^24 ms) and up to 2^31 - 1, with factors down to
// the subnormal range (x up to 830), scores of both signs from float32
// subnormals to MaxFloat32. The result is also never farther from 0
// than the score.
func TestAudit101CeilCellExpValueAboveRealDecay(t *testing.T) {
	rng := rand.New(rand.NewPCG(101, 7))
	iters := 2000
	if testing.Short() {
		iters = 600
	}
	seams := []int64{1, 2, 255, 256, 257, 65535, 65536, 65537, 1<<24 - 1, 1 << 24, 1<<24 + 1, 1<<31 - 1}
	checked, underflows := 0, 0
	for i := range iters {
		var lambda float64
		switch i % 4 {
		case 0:
			lambda = 1 / (float64(1+rng.Int64N(1<<20)) * 1e-3) // windows of 1 ms to 17 min
		case 1:
			lambda = math.Pow(10, -9+rng.Float64()*12)
		case 2:
			lambda = 1.83e-9 * (1 + rng.Float64()*0.05)
		default:
			lambda = 1000 // a 1 ms window
		}
		law := decay.Exponential(lambda)
		rules := atomiccell.NewRules(law, -math.MaxFloat32, math.MaxFloat32)
		var dt int64
		switch rng.IntN(3) {
		case 0:
			dt = seams[rng.IntN(len(seams))]
		case 1:
			// an age putting x = lambda dt/1000 in [600, 830]: the
			// factor near and below 2^-1022
			dt = int64((600 + rng.Float64()*230) * 1000 / lambda)
		default:
			dt = 1 + rng.Int64N(1<<uint(1+rng.IntN(30)))
		}
		if dt < 1 || dt >= 1<<31 {
			continue
		}
		s := float64(math.Float32frombits(1 + rng.Uint32N(0x7f7fffff)))
		if rng.IntN(2) == 0 {
			s = -s
		}
		st := rng.Uint32()
		v := rules.Value(atomiccell.Pack(float32(s), st), st+uint32(dt))
		if math.Abs(v) > math.Abs(s) || (s > 0 && v < 0) || (s < 0 && v > 0) {
			t.Fatalf("Exponential(%v): Value(%v aged %d ms) = %v: grew or crossed 0", lambda, s, dt, v)
		}
		x := new(big.Float).SetPrec(300).SetFloat64(lambda)
		x.Mul(x, new(big.Float).SetPrec(300).SetInt64(dt))
		x.Quo(x, new(big.Float).SetPrec(300).SetInt64(1000))
		if x.Cmp(big.NewFloat(900)) > 0 {
			continue // the real value is below 1e-350: any v >= 0 for s > 0 is 0 there
		}
		real := audit101ExpNeg(x, 300)
		real.Mul(real, new(big.Float).SetPrec(300).SetFloat64(s))
		checked++
		// An exact underflow stays 0 (docs/precision.md, "Scores below
		// 1e-290"): a real value below the smallest float64, 2^-1074,
		// may read 0; anything larger may not read below it.
		if v == 0 && new(big.Float).Abs(real).Cmp(big.NewFloat(0x1p-1074)) < 0 {
			underflows++
			continue
		}
		if new(big.Float).SetPrec(300).SetFloat64(v).Cmp(real) < 0 {
			rf, _ := real.Float64()
			t.Errorf("Exponential(%v): Value(%v aged %d ms) = %v, below the real decayed value %v (law's Apply %v)", lambda, s, dt, v, rf, law.Apply(s, dt))
		}
	}
	if checked-underflows < iters/2 {
		t.Fatalf("only %d of %d checked (%d underflows)", checked, iters, underflows)
	}
}

// TestAudit101CeilCellFixedNewRulesNaNBoundPanics (audit 101; fixed at
// stop 60, the text below says what was wrong; NewRules now panics,
// naming the bounds, on any bounds its preconditions exclude).
// atomiccell/doc.go, "Invariants": "A stored score is never NaN or ±Inf:
// every narrowing goes through RoundUp, which maps values beyond the
// float32 range to ±MaxFloat32"; NewRules: "Preconditions (sketch.New
// checks them for a Config): lo <= 0 <= hi, lo < hi, neither NaN". The
// public NewRules checks none of them and returns Rules with hi = NaN
// (RoundUp(NaN) is NaN). clampSum's "v >= hi" is then false for every
// sum, so nothing clamps: an add of 1e39 (finite) narrows to float32 +Inf
// and the cell stores +Inf; from there every read is +Inf and every
// later add of a finite negative delta leaves it +Inf (a NaN lo likewise
// never clamps below). Reproduction: r := NewRules(decay.None(), 0,
// math.NaN()); var c Cell; c.Add(r, 0, 1e39, c.Load()).Score() == +Inf.
// Want: NewRules panics on a NaN (or otherwise invalid) bound with a
// message naming the package, as the sketch does for a Config.
func TestAudit101CeilCellFixedNewRulesNaNBoundPanics(t *testing.T) {
	var r *atomiccell.Rules
	msg := func() (m string) {
		defer func() {
			if p := recover(); p != nil {
				m = fmt.Sprint(p)
			}
		}()
		r = atomiccell.NewRules(decay.None(), 0, math.NaN())
		return ""
	}()
	if strings.HasPrefix(msg, "atomiccell: NewRules: bounds") {
		for _, b := range [][2]float64{{math.NaN(), 1}, {1, 2}, {-2, -1}, {0, 0}, {math.NaN(), math.NaN()}} {
			func() {
				defer func() {
					if p := recover(); p == nil || !strings.HasPrefix(fmt.Sprint(p), "atomiccell: NewRules: bounds") {
						t.Errorf("NewRules(%v, %v): panic %v, want the bounds named", b[0], b[1], p)
					}
				}()
				atomiccell.NewRules(decay.None(), b[0], b[1])
			}()
		}
		return
	}
	t.Errorf("NewRules(None, 0, NaN): panic %q, want one naming the bounds", msg)
	var c atomiccell.Cell
	got := c.Add(r, 0, 1e39, c.Load()).Score()
	after := c.Add(r, 0, -1e30, c.Load()).Score()
	if math.IsInf(float64(got), 0) || math.IsNaN(float64(got)) {
		t.Errorf("NewRules(None, 0, NaN) was accepted silently, and an Add of 1e39 stored %v (after an Add of -1e30: %v): the invariant \"a stored score is never NaN or ±Inf\" (atomiccell/doc.go) is broken", got, after)
	}
}

// TestAudit101CeilCellDocumentedWrapUnderDecayNegativeScoreBelowTruth
// (audit 101; documented at stop 60, the text below says what was wrong;
// doc.go now says under-decay is the safe side for a score >= 0 only,
// and the test asserts the documented reading).
// atomiccell/doc.go, "Age arithmetic and the horizon": "On its own, a
// cell left idle for T >= 2^31 ms would read as if int32(T mod 2^32) ms
// had passed (under-decay: the safe side, but no forgetting)", and
// "A difference <= 0 is zero elapsed time". The safe side of this
// package is toward +Inf ("rounding the exact sum toward +Inf ... a
// stored score is >= the exact result it stands for"; Value "on the
// safe side (never below the law's own result)"). NewRules allows a
// negative lo ("lo <= 0 <= hi"), and for a negative score under-decay
// is the unsafe side: the score stays farther below 0 than its truth.
// Reproduction: NewRules(decay.Exponential(1), -100, 100), a word of
// -50 stamped at 0, read at now = 5 after 2^32 + 5 ms (or at any now
// 2^31 to 2^32 - 1 ms later, where Elapsed is 0): Value reads
// -49.75 (or -50), the law's own result for the idle time is -0 (e^-4.3e6
// underflows), so the reading is 50 below the truth; a positive +50
// reads above its truth, as the doc says. Suggested fix: say the safe
// side holds for scores >= 0 only (a negative score under-decays below
// its truth), or have the owner's horizon sweep guarantee it.
func TestAudit101CeilCellDocumentedWrapUnderDecayNegativeScoreBelowTruth(t *testing.T) {
	law := decay.Exponential(1)
	r := atomiccell.NewRules(law, -100, 100)
	for _, c := range []struct {
		idle int64  // true idle time, ms
		now  uint32 // its modular reading
	}{{1<<32 + 5, 5}, {1 << 31, 1 << 31}, {1<<32 - 1, 1<<32 - 1}} {
		for _, s := range []float32{50, -50} {
			v := r.Value(atomiccell.Pack(s, 0), c.now)
			truth := law.Apply(float64(s), c.idle)
			// The documented reading: as if int32(T mod 2^32) ms had
			// passed (a difference <= 0 is 0 ms), above the truth for a
			// positive score, below it for a negative one.
			asIf := r.Value(atomiccell.Pack(s, 0), 0) // no time passed
			if d := int32(c.now); d > 0 {
				asIf = r.Value(atomiccell.Pack(s, 0), uint32(d))
			}
			if v != asIf || (s > 0 && v < truth) || (s < 0 && v >= truth) {
				t.Errorf("score %v idle %d ms (now %d mod 2^32): Value %v (as if %v), truth %v: want the documented under-decay, above the truth for a positive score and below it for a negative one", s, c.idle, c.now, v, asIf, truth)
			}
		}
	}
}

// audit101LeastF32 is the least float32 at or above the exact x (within
// the float32 range).
func audit101LeastF32(x *big.Rat) float32 {
	f, _ := x.Float32()
	if new(big.Rat).SetFloat64(float64(f)).Cmp(x) < 0 {
		f = math.Nextafter32(f, float32(math.Inf(1)))
	}
	return f
}

// TestAudit101CeilCellNextSubnormalExact (passing check): Rules.Next's
// doc ("the least float32 at or above the exact sum, clamped: a delta
// the float64 add would absorb still steps it up") in the float32
// subnormal range and with float64-subnormal deltas, both signs, under
// decay.None at the word's own stamp, against math/big: scores from
// -2^-126 to 2^-126 (float32 subnormals, -0 and 0) plus deltas from
// 5e-324 to 2^-120, and a large score plus a 5e-324 delta (absorbed by
// the float64 add, must still step up one float32).
func TestAudit101CeilCellNextSubnormalExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(101, 9))
	r := atomiccell.NewRules(decay.None(), -1, 1)
	iters := 8000
	if testing.Short() {
		iters = 2000
	}
	for i := range iters {
		s := math.Float32frombits(rng.Uint32N(0x00800001)) // 0 .. 2^-126
		if rng.IntN(2) == 0 {
			s = -s
		}
		var d float64
		switch rng.IntN(4) {
		case 0:
			d = math.Float64frombits(1 + rng.Uint64N(1<<52)) // float64 subnormal
		case 1:
			d = float64(math.Float32frombits(1 + rng.Uint32N(0x00800000)))
		case 2:
			d = math.Ldexp(1+rng.Float64(), -150+rng.IntN(30))
		default:
			d = -float64(s) + math.Float64frombits(rng.Uint64N(8)) // near cancellation
		}
		if rng.IntN(2) == 0 {
			d = -d
		}
		exact := new(big.Rat).Add(new(big.Rat).SetFloat64(float64(s)), new(big.Rat).SetFloat64(d))
		want := audit101LeastF32(exact)
		got := r.Next(atomiccell.Pack(s, 7), 7, d).Score()
		if math.Float32bits(got) != math.Float32bits(want) && !(got == 0 && want == 0) {
			t.Fatalf("iter %d: Next(%b, %b) = %b, want the least float32 at or above the exact sum, %b", i, s, d, got, want)
		}
	}
	r2 := atomiccell.NewRules(decay.None(), -2, 2)
	for _, s := range []float32{1, 0.75, -0.5, 1.0 / 3} {
		got := r2.Next(atomiccell.Pack(s, 7), 7, 5e-324).Score()
		if want := math.Nextafter32(s, 2); got != want {
			t.Errorf("Next(%v, 5e-324) = %v, want one float32 up, %v", s, got, want)
		}
	}
}
