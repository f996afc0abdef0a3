package atom

import (
	"math"
	"math/bits"
	"unsafe"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/law"
)

// Rules is what a cell update needs besides the cell: the decay law, in a
// form specialised for the hot path, and the clamp bounds. A Rules is
// immutable after NewRules and safe for concurrent use.
type Rules struct {
	// lo and hi are the clamp bounds, rounded toward +Inf to float32 and
	// held as float64: lo <= 0 <= hi, both finite (an infinite bound is
	// saturated at ±MaxFloat32).
	lo, hi float64
	// law is the decay law, compiled by package decay (which owns every
	// law's arithmetic and its safe-side rounding).
	law *law.Compiled
}

// NewRules builds Rules for law d (nil means decay.None()) and bounds
// [lo, hi]. Preconditions (checked by sketch.New): lo <= 0 <= hi, lo < hi,
// neither NaN, and d valid.
func NewRules(d decay.Decay, lo, hi float64) *Rules {
	return &Rules{lo: float64(RoundUp(lo)), hi: float64(RoundUp(hi)), law: law.Compile(d)}
}

// Bytes returns the memory r holds: the struct and the compiled law it
// points to (the exponential tables included, whatever the law).
func (r *Rules) Bytes() int { return int(unsafe.Sizeof(*r)) + int(unsafe.Sizeof(law.Compiled{})) }

// Lo returns the effective lower bound (Lo rounded up to float32).
func (r *Rules) Lo() float64 { return r.lo }

// Hi returns the effective upper bound (Hi rounded up to float32, at most
// MaxFloat32).
func (r *Rules) Hi() float64 { return r.hi }

// Kind returns the decay law's kind.
func (r *Rules) Kind() law.Kind { return r.law.Kind() }

// Decay returns score after dt ms under the law, in float64, on the safe
// side (law.Compiled.Apply): never below the law's own result for a
// positive score, and a custom law's faults sanitized. dt <= 0 returns
// score.
func (r *Rules) Decay(score float64, dt int64) float64 {
	if dt <= 0 || score == 0 {
		return score // the hot key's case: no call
	}
	return r.law.Apply(score, dt)
}

// MaxCells is the most words ValueN and NextN take at once (a sketch's
// MaxLevels).
const MaxCells = 8

// ValueN sets v[i] = Value(w[i], now) for i < n and returns the smallest
// of them (the Min aggregate, so a caller that aggregates with Min needs
// no second pass): one call for all of a key's cells, with the decay
// law's dispatch taken once and the two common laws' arithmetic
// (law.Compiled.ExpFast, LinearApply) inlined into the loop.
// 1 <= n <= MaxCells.
//
// The loops make no call, so they keep everything in registers: a word
// the exponential table cannot decay (an age past its range) hands the
// rest of the words to valueNFrom.
func (r *Rules) ValueN(w *[MaxCells]Word, n uint32, now uint32, v *[MaxCells]float64) (lowest float64) {
	ws := w[:n]
	vs := v[:len(ws)]
	lowest = math.Inf(1)
	switch r.law.Kind() {
	case law.KindExponential:
		for i, x := range ws {
			s := float64(x.Score())
			if d := int32(now - x.Stamp()); d > 0 && s != 0 {
				y, ok := r.law.ExpFast(s, int64(d))
				if !ok {
					return r.valueNFrom(w, n, now, v, i, lowest)
				}
				s = y
			}
			vs[i] = s
			if s < lowest {
				lowest = s
			}
		}
	case law.KindLinear:
		for i, x := range ws {
			s := float64(x.Score())
			if d := int32(now - x.Stamp()); d > 0 && s != 0 {
				s = r.law.LinearApply(s, int64(d))
			}
			vs[i] = s
			if s < lowest {
				lowest = s
			}
		}
	case law.KindNone:
		for i, x := range ws {
			s := float64(x.Score())
			vs[i] = s
			if s < lowest {
				lowest = s
			}
		}
	default: // a custom law: one call to it per aged word
		return r.valueNFrom(w, n, now, v, 0, lowest)
	}
	return lowest
}

// valueNFrom is ValueN from word i on, lowest the Min of v[:i], through
// Value (a call to the law per aged word): a custom law, and the
// exponential words past its table.
//
//go:noinline
func (r *Rules) valueNFrom(w *[MaxCells]Word, n uint32, now uint32, v *[MaxCells]float64, i int, lowest float64) float64 {
	ws := w[i:n]
	vs := v[i:n]
	vs = vs[:len(ws)]
	for i, x := range ws {
		s := r.Value(x, now)
		vs[i] = s
		if s < lowest {
			lowest = s
		}
	}
	return lowest
}

// NextN sets nw[i] = Next(w[i], now, delta) for i < n, computing all of
// them before the caller's first CAS. n <= MaxCells. Words stamped at or
// after now (a hot key within its millisecond), or holding 0, cost an
// add, the clamp and the round-up (nextN: SSE2 assembly on amd64, two
// words at a time); if any word needs decay, nextNFrom does them all.
func (r *Rules) NextN(w *[MaxCells]Word, n uint32, now uint32, delta float64, nw *[MaxCells]Word) {
	if !nextN(w, n, now, delta, r.lo, r.hi, nw) {
		r.nextNFrom(w, n, now, delta, nw, 0)
	}
}

// nextNFrom is NextN from word i on, decaying each aged word (Rules.aged:
// the two common laws' arithmetic inline, the rest through the law).
//
//go:noinline
func (r *Rules) nextNFrom(w *[MaxCells]Word, n uint32, now uint32, delta float64, nw *[MaxCells]Word, i int) {
	ws := w[i:n]
	out := nw[i:n]
	out = out[:len(ws)]
	for i, x := range ws {
		s, st := float64(x.Score()), x.Stamp()
		if d := int32(now - st); d > 0 {
			st = now
			if s != 0 {
				s = r.aged(s, int64(d))
			}
		}
		// RoundSum's parts, which inline (through the call the loop
		// runs about 10 more instructions a word, callgrind).
		y, e := clampSum(s, delta, r.lo, r.hi)
		out[i] = Pack(stepUpErr(float32(y), y, e), st)
	}
}

// ApplyN sets nw[i] = Apply(w[i], v[i], now, delta) for i < n (v from
// ValueN) and reports whether every new word equals its old one: the
// batch form of Apply for a caller that needed the values first (an
// admitted TryUpdate decides on them). n <= MaxCells.
func (r *Rules) ApplyN(w *[MaxCells]Word, v *[MaxCells]float64, n uint32, now uint32, delta float64, nw *[MaxCells]Word) (same bool) {
	ws := w[:n]
	vs, out := v[:len(ws)], nw[:len(ws)]
	lo, hi := r.lo, r.hi
	var diff Word
	for i, x := range ws {
		// roundSumIn's parts, which inline: through a call (or
		// RoundSum) the loop costs an admitted TryUpdate more
		// instructions (docs/design.md, section 5).
		y, e := clampSum(vs[i], delta, lo, hi)
		out[i] = Pack(stepUpErr(float32(y), y, e), Newer(x.Stamp(), now))
		diff |= out[i] ^ x
	}
	return diff == 0
}

// DecideN is an admitted-or-denied TryUpdate's decision on words that
// need no decay law (each stamped at or after now, or scoring zero: a
// hot key's words within a millisecond), with the Min aggregate, in one
// pass and without the law's dispatch: ValueN, the compare against limit
// and, when admitted, ApplyN, in assembly on amd64 (decideNGeneric is
// the twin). It reports Slow, having concluded nothing, when a word
// needs the law; the caller then takes ValueN and ApplyN. 1 <= n <=
// MaxCells; delta and limit finite.
func (r *Rules) DecideN(w *[MaxCells]Word, n uint32, now uint32, delta, limit float64, v *[MaxCells]float64, nw *[MaxCells]Word) Verdict {
	return decideN(w, n, now, delta, limit, r.lo, r.hi, v, nw)
}

// aged is Value's decay for a non-zero score aged dt > 0 ms: the two
// common laws' arithmetic inline (law.Compiled.ExpFast, LinearApply), the
// rest through law.Compiled.Apply.
func (r *Rules) aged(s float64, dt int64) float64 {
	switch r.law.Kind() {
	case law.KindExponential:
		if x, ok := r.law.ExpFast(s, dt); ok {
			return x
		}
	case law.KindLinear:
		return r.law.LinearApply(s, dt)
	}
	return r.law.Apply(s, dt)
}

// Value returns the score word w stands for at time now: its score decayed
// for the elapsed age. It only reads.
func (r *Rules) Value(w Word, now uint32) float64 {
	s, dt := float64(w.Score()), Elapsed(w.Stamp(), now)
	if dt <= 0 || s == 0 {
		return s
	}
	switch r.law.Kind() {
	case law.KindExponential:
		if x, ok := r.law.ExpFast(s, dt); ok {
			return x
		}
	case law.KindLinear:
		return r.law.LinearApply(s, dt)
	}
	return r.law.Apply(s, dt)
}

// ValueLater returns the score w stands for x >= 0 ms after now: Value
// at that later time, on a 64-bit age (w's signed age at now, as Value
// takes it, plus x), so it stays defined past the 2^31 ms at which a
// stamp wraps. While that age is below 2^31 it is exactly what Value
// returns at now + x: the same law, the same arithmetic. It only reads.
func (r *Rules) ValueLater(w Word, now uint32, x int64) float64 {
	s := float64(w.Score())
	dt := int64(int32(now-w.Stamp())) + x
	if dt <= 0 || s == 0 {
		return s
	}
	return r.aged(s, dt)
}

// Next returns the word that results from adding delta to w at time now:
// decay for the elapsed age, add, clamp to [lo, hi] and narrow upward
// (RoundSum: the exact sum, not the float64 add's rounding of it), stamp
// with the newer of w's stamp and now. delta must be finite.
func (r *Rules) Next(w Word, now uint32, delta float64) Word {
	return r.Apply(w, r.Value(w, now), now, delta)
}

// Apply is Next for a caller that has the value already: v must be
// r.Value(w, now) (from Value or ValueN), and then Apply(w, v, now, delta)
// == Next(w, now, delta). It saves decaying the word a second time.
func (r *Rules) Apply(w Word, v float64, now uint32, delta float64) Word {
	return Pack(r.RoundSum(v, delta), Newer(w.Stamp(), now))
}

// Rebase returns the score a re-stamping (the horizon sweep) stores for
// a cell of score s aged age ms at the sweep's time, and how many ms
// before that time to stamp it, at most maxBack. The score is s decayed
// and rounded up as every stored value is (Round). Under the linear law a
// drained value a float32 cannot hold (above 2^24) would then read later
// by the rounding at every later time (a limiter's debt would drain the
// rounding's worth of ms late); stamped earlier by the time the law takes
// to drain that rounding, the stored word reads the drained value itself
// at the sweep's time and after, never less. Every other case is stamped
// at the sweep's time (back 0). Where the law drains several whole units
// a ms and the value is whole, the score is the least float32 at or above
// the decayed value that a whole number of ms of drain brings back to it
// exactly (found in closed form, wholeDrain), when one is in its binade
// or the next, under hi and within maxBack: then the sweep leaves nothing
// in the cell. Otherwise less than 1 ms of drain stays in it, and a value
// swept k times reads up to k ms of drain above its exact drain.
func (r *Rules) Rebase(s float64, age, maxBack int64) (score float32, back int64) {
	v := r.Decay(s, age)
	score = r.Round(v)
	f := float64(score)
	if r.law.Kind() != law.KindLinear || !(v > 0) || !(f > v) {
		return score, 0
	}
	// A law that drains d > 1 units a ms, d whole, and a whole v (every
	// value a float32 rounds above 2^24 is): f - v must be whole ms of
	// drain, or the remainder (up to d - 1 units) stays in the cell and
	// reads high at every later time, one more at each sweep.
	if d := r.law.Param() / 1000; d > 1 && d == math.Trunc(d) && v == math.Trunc(v) {
		if g, ok := wholeDrain(f, v, d); ok && g <= r.hi {
			if k := (g - v) / d; k <= float64(maxBack) && r.law.LinearApply(g, int64(k)) == v {
				return float32(g), int64(k)
			}
		}
	}
	back = min(int64((f-v)*1000/r.law.Param()), maxBack)
	for back > 0 && !(r.law.LinearApply(f, back) >= v) {
		back-- // float64 rounding of the drop: never read below v
	}
	return score, max(back, 0)
}

// wholeDrain returns the least float32 g >= f, in f's binade or the next
// one, for which g - v is a whole multiple of d: f and v whole, v <= f <
// 2^53, d whole in [2, 2^32). In a binade the float32 values are f + j x
// step, step a power of two, so g is f + j x step for the least j >= 0
// with j x step = v - f (mod d): with c = gcd(step, d), solvable iff c
// divides f - v, and then j = -(f - v)/c x (step/c)^-1 mod d/c, where
// step/c is 1 or d/c is odd (so that 2 has the inverse (d/c + 1)/2).
// j < d/c, so g is within d steps of f (the search it replaces gave up
// after 64, leaving the remainder of odd drains above 64 in the cell).
func wholeDrain(f, v, d float64) (g float64, ok bool) {
	if !(v <= f && f < 1<<53 && d >= 2 && d < 1<<32) {
		return 0, false
	}
	for range 2 {
		step := float64(math.Nextafter32(float32(f), float32(math.Inf(1)))) - f
		_, e := math.Frexp(f)
		top := math.Ldexp(1, e) // the next binade starts here
		if step >= 1 && step == math.Trunc(step) {
			D, S, R := uint64(d), uint64(step), uint64(f-v)
			c := uint64(1) << min(bits.TrailingZeros64(S), bits.TrailingZeros64(D))
			if R%c == 0 {
				D, S, R = D/c, S/c, (R/c)%(D/c)
				j := (D - R) % D // j x S = -R (mod D)
				for ; S > 1; S >>= 1 {
					j = j * ((D + 1) / 2) % D // D odd here: (D+1)/2 is 2's inverse
				}
				if g := f + float64(j)*step; g < top {
					return g, true
				}
			}
		}
		f = top
	}
	return 0, false
}

// Round clamps v to [lo, hi] and narrows it upward. Because lo and hi are
// float32 values, the result stays inside the bounds. v must not be NaN.
// It inlines (TestInlining).
func (r *Rules) Round(v float64) float32 { return roundIn(v, r.lo, r.hi) }

// RoundSum is Round of the exact sum v + delta, which the float64 add
// may round: the least float32 at or above it, clamped to [lo, hi]. A
// delta below half a float64 ulp of v, which v + delta absorbs, still
// steps the result one float32 up. Every add to a cell goes through it
// (Next, Apply, NextN, ApplyN). v and delta finite.
func (r *Rules) RoundSum(v, delta float64) float32 { return roundSumIn(v, delta, r.lo, r.hi) }
