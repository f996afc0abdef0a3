package atom

import "math"

// Word is a packed cell value: float32 score bits in the high half, uint32
// stamp in the low half. The zero Word is score +0 at stamp 0.
type Word uint64

// Pack builds a Word from a score and a stamp. score must not be NaN or Inf
// (use RoundUp to narrow).
func Pack(score float32, stamp uint32) Word {
	return Word(uint64(math.Float32bits(score))<<32 | uint64(stamp))
}

// Score returns the stored float32 score.
func (w Word) Score() float32 { return math.Float32frombits(uint32(w >> 32)) }

// Stamp returns the stored age stamp (ms relative to the owner's epoch,
// modulo 2^32).
func (w Word) Stamp() uint32 { return uint32(w) }

// Elapsed returns the milliseconds from stamp to now, computed modulo 2^32
// as a signed difference; a difference <= 0 (backwards clock, or an idle
// time past the 2^31 ms horizon) is 0.
func Elapsed(stamp, now uint32) int64 {
	d := int32(now - stamp)
	if d <= 0 {
		return 0
	}
	return int64(d)
}

// Newer returns the later of stamp and now in modular order: now if it is
// ahead of stamp, else stamp. It keeps stamps from moving backwards.
func Newer(stamp, now uint32) uint32 {
	if int32(now-stamp) > 0 {
		return now
	}
	return stamp
}

// RoundUp narrows x to float32, rounding toward +Inf, so the result is
// never below x. Values beyond the float32 range saturate at ±MaxFloat32
// (+Inf and -Inf included), so the result is always finite. NaN is a
// caller's error and is returned as NaN; the sketch rejects NaN before it
// reaches a cell.
func RoundUp(x float64) float32 {
	f := float32(x) // round to nearest even; ±Inf beyond the range
	// Step one float32 toward +Inf when the conversion rounded down: by
	// its bit pattern, +1 for positives (from +0 that is the smallest
	// subnormal) and -1 for negatives (toward zero; -Inf steps to
	// -MaxFloat32). -0 never needs the step: it comes only from x <= 0.
	// Written without a data-dependent branch (the compiler emits
	// conditional moves): whether a conversion rounds down is a coin flip,
	// and a mispredicted branch per cell costs more than the arithmetic.
	//
	// float64(x) rounds x, as twoSum rounds its operands: inlined into a
	// caller that passes a product, the compiler may otherwise fuse it
	// into stepUp's subtraction (an FMA, as on arm64), and the step would
	// compare f against the exact product rather than x. The other
	// callers of stepUpErr pass a sum or a clamped value, into which no
	// multiply fuses (docs/design.md, "Fused multiply-add"). It costs no
	// instruction.
	f = stepUp(f, float64(x))
	if f > math.MaxFloat32 { // +Inf: x beyond the range
		return math.MaxFloat32
	}
	if f < -math.MaxFloat32 {
		return -math.MaxFloat32
	}
	return f
}

// stepUp returns f, or the next float32 toward +Inf if f < x (f is x
// rounded to nearest): stepUpErr with no error, f - x < 0 being f < x
// here (f - x is exact, and ±Inf - x keeps Inf's sign).
func stepUp(f float32, x float64) float32 { return stepUpErr(f, x, 0) }

// roundUpInRange is RoundUp for an x already clamped to bounds that are
// float32 values within ±MaxFloat32 (as Rules' are): the result cannot
// leave the bounds, so no saturation is needed.
func roundUpInRange(x float64) float32 { return stepUp(float32(x), x) }

// twoSum returns s, a + b rounded to nearest, and e with a + b = s + e
// exactly (Knuth's TwoSum: no branch, either order of magnitude). e is 0
// when the add is exact, and NaN when s overflows.
func twoSum(a, b float64) (s, e float64) {
	// The explicit conversions round a and b: inlined into a caller
	// whose a or b is a product, the compiler may otherwise fuse that
	// product into the adds below (an FMA, as arm64 does), and then s,
	// bb and e would not describe the same a + b (docs/design.md,
	// "Fused multiply-add"). They cost no instruction.
	a, b = float64(a), float64(b)
	s = a + b
	bb := s - a
	return s, (a - (s - bb)) + (b - bb)
}

// SumUp returns a + b rounded toward +Inf: the least float64 at or
// above the exact sum (the float64 add rounds to nearest, which may be
// below it). For the adds outside a cell's Next (a merge, a roll-back),
// so that each step of theirs errs upward as every cell write does, and
// then Round of the result is the least float32 at or above the exact
// sum. a and b finite; a sum beyond the float64 range is +Inf or
// -MaxFloat64.
func SumUp(a, b float64) float64 {
	s, e := twoSum(a, b)
	if e > 0 {
		return math.Nextafter(s, math.Inf(1))
	}
	if s < -math.MaxFloat64 { // -Inf: the sum is below the range (e is NaN)
		return -math.MaxFloat64
	}
	return s
}

// roundSumIn is roundIn of the exact sum a + b: the least float32 at or
// above it, clamped to [lo, hi], so a b too small for the float64 add (a
// delta below half a float64 ulp of a) still steps the result up instead
// of vanishing. lo and hi are float32 values within ±MaxFloat32; a and b
// finite.
func roundSumIn(a, b, lo, hi float64) float32 {
	v, e := clampSum(a, b, lo, hi)
	return stepUpErr(float32(v), v, e)
}

// clampSum is roundSumIn before the narrowing: a + b rounded to nearest
// and clamped to [lo, hi], with e the exact sum's excess over it where it
// counts. The bound's cases: a sum at or above hi gives hi, below lo
// gives lo, each with e = 0 (the exact sum is then on the same side); at
// exactly lo the error decides, as anywhere inside. It inlines, so the
// batch loops (nextNFrom, ApplyN) call it without a call.
func clampSum(a, b, lo, hi float64) (v, e float64) {
	v, e = twoSum(a, b)
	// Branches, as roundIn's: clamping is rare. A sum equal to hi keeps
	// its own zero's sign, as roundIn (and the assembly's MINPD) do.
	if v < lo {
		return lo, 0
	} else if v >= hi {
		if v > hi {
			v = hi
		}
		return v, 0
	}
	return v, e
}

// stepUpErr is stepUp for the exact value x + e (|e| at most half a
// float64 ulp of x): the next float32 toward +Inf if f < x + e. f - x is
// exact (f is x rounded to float32: 0, or at least one float64 ulp of x
// from it), so the compare decides on the exact value, and with e = 0 it
// is stepUp's f < x. A NaN e never steps.
func stepUpErr(f float32, x, e float64) float32 {
	b := math.Float32bits(f)
	var step uint32
	if float64(f)-x < e {
		step = 1
	}
	if int32(b) < 0 {
		step = -step
	}
	return math.Float32frombits(b + step)
}
