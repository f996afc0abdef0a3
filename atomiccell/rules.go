package atomiccell

import (
	"math"

	"github.com/lfgrudge/grudge/decay"
)

// expNudge is the relative upward bias applied to table-driven exponential
// decay. It covers the few float64 ulps (2^-51) by which a product of
// table entries may differ from math.Exp of the whole gap, and the
// argument rounding of lambda*dt for any gap whose factor is not already
// zero, so the decayed value stays >= the float64 reference's. It is far
// below float32 resolution (2^-24), so it costs no measurable precision.
const expNudge = 1.0 / (1 << 40)

// tinyDecayed is the magnitude below which exponential decay falls back to
// the exact expression of decay.Exponential.Apply: products this small may
// involve subnormal factors, whose rounding the relative nudge cannot
// cover.
const tinyDecayed = 1e-290

// expTableBits is the width of each exponential lookup table; three tables
// cover gaps below 2^(3*expTableBits) ms (about 4.7 hours), and longer gaps
// fall back to math.Exp.
const expTableBits = 8

// Rules is what a cell update needs besides the cell: the decay law, in a
// form specialised for the hot path, and the clamp bounds. A Rules is
// immutable after NewRules and safe for concurrent use.
type Rules struct {
	// lo and hi are the clamp bounds, rounded toward +Inf to float32 and
	// held as float64: lo <= 0 <= hi, both finite (an infinite bound is
	// saturated at ±MaxFloat32).
	lo, hi float64
	kind   decay.Kind
	// param is lambda (Exponential) or rate (Linear), per second.
	param float64
	// law is the original law; used as is for custom laws.
	law decay.Decay
	// exp[k][i] = exp(-lambda * (i << (k*expTableBits)) / 1000), computed
	// with the same expression shape as decay.Exponential.Apply.
	exp [3][1 << expTableBits]float64
}

// NewRules builds Rules for law d (nil means decay.None()) and bounds
// [lo, hi]. Preconditions (checked by sketch.New): lo <= 0 <= hi, lo < hi,
// neither NaN, and d valid.
func NewRules(d decay.Decay, lo, hi float64) *Rules {
	r := &Rules{lo: float64(RoundUp(lo)), hi: float64(RoundUp(hi)), law: d}
	r.kind, r.param = decay.Params(d)
	if r.kind == decay.KindExponential {
		for k := range r.exp {
			for i := range r.exp[k] {
				ms := int64(i) << (k * expTableBits)
				r.exp[k][i] = math.Exp(-r.param * float64(ms) / 1000)
			}
		}
	}
	return r
}

// Lo returns the effective lower bound (Lo rounded up to float32).
func (r *Rules) Lo() float64 { return r.lo }

// Hi returns the effective upper bound (Hi rounded up to float32, at most
// MaxFloat32).
func (r *Rules) Hi() float64 { return r.hi }

// Kind returns the decay law's kind.
func (r *Rules) Kind() decay.Kind { return r.kind }

// Decay returns score after dt ms under the law, in float64. dt <= 0
// returns score. For Exponential it is table-driven (no math.Exp for gaps
// below about 4.7 hours) and biased upward for positive scores (toward 0
// for negative ones) by expNudge, so it never decays more than
// decay.Exponential(lambda).Apply would.
func (r *Rules) Decay(score float64, dt int64) float64 {
	if dt <= 0 || score == 0 {
		return score
	}
	switch r.kind {
	case decay.KindNone:
		return score
	case decay.KindExponential:
		return r.expDecay(score, dt)
	case decay.KindLinear:
		// Same expression as decay.Linear.Apply, so the result is >= the
		// reference's whenever score is.
		drop := r.param * float64(dt) / 1000
		if score > 0 {
			return math.Max(score-drop, 0)
		}
		return math.Min(score+drop, 0)
	default:
		return sanitize(score, r.law.Apply(score, dt))
	}
}

// sanitize keeps a custom law's result v for score on the safe side of
// the contract (monotone toward 0, never crossing it): NaN or ±Inf, or a
// v that grew away from 0, reads as no decay (score); a v that crossed 0
// reads as 0. So a faulty law can only keep scores high, never poison a
// cell or lose mass.
func sanitize(score, v float64) float64 {
	switch {
	case v-v != 0: // NaN or ±Inf
		return score
	case score > 0:
		return min(max(v, 0), score)
	case score < 0:
		return max(min(v, 0), score)
	}
	return score
}

// Remain returns a lower bound on what is left, dt ms later, of an
// increment inc > 0 that was added to a cell, and an upper bound on the
// magnitude left of an inc < 0: the amount a refund may take back without
// taking any other key's mass. For the exponential law each contribution
// decays on its own, so it is inc*exp(-lambda*dt), nudged toward -Inf.
// A cell under the linear law drains at the law's rate whatever it holds,
// so the least that can be left of inc > 0 is Linear.Apply(inc, dt) (as
// if the drain took inc first); for inc < 0 the whole of inc may be left.
// A custom law is treated as the linear one is, through its Apply.
func (r *Rules) Remain(inc float64, dt int64) float64 {
	if dt <= 0 || inc == 0 {
		return inc
	}
	switch r.kind {
	case decay.KindNone:
		return inc
	case decay.KindExponential:
		v := inc * math.Exp(-r.param*float64(dt)/1000)
		return v - math.Abs(v)*expNudge
	default:
		if inc < 0 {
			return inc
		}
		v := r.Decay(inc, dt)
		return max(v-v*expNudge, 0)
	}
}

// expDecay is the Exponential case of Decay for dt > 0: table driven
// below 2^24 ms, nudged up by expNudge. Small enough to inline into the
// batch loops; the rare paths are out of line.
func (r *Rules) expDecay(score float64, dt int64) float64 {
	if dt >= 1<<(3*expTableBits) {
		return r.expSlow(score, dt)
	}
	const mask = 1<<expTableBits - 1
	v := score * (r.exp[0][dt&mask] * r.exp[1][(dt>>expTableBits)&mask] * r.exp[2][(dt>>(2*expTableBits))&mask])
	if math.Abs(v) < tinyDecayed {
		return r.expSlow(score, dt)
	}
	return v + math.Abs(v)*expNudge
}

// expSlow is exponential decay by math.Exp of the whole gap, as
// decay.Exponential.Apply computes it: for gaps past the tables, and near
// the float64 subnormal range, where the relative nudge no longer covers
// the table's rounding (rare: the score is gone by then). It is nudged
// like the table path except in that tiny range.
//
//go:noinline
func (r *Rules) expSlow(score float64, dt int64) float64 {
	v := score * math.Exp(-r.param*float64(dt)/1000)
	if math.Abs(v) < tinyDecayed {
		// Near the subnormal range the relative bias alone no longer
		// covers a reference that composed its decay over other gaps
		// (subnormal products round in absolute steps): add eight
		// subnormal ulps (4e-323) too, toward +Inf but never across 0,
		// so the result stays >= the reference's. An exact 0
		// (underflow) stays 0, so a decayed score still reaches 0.
		const tinyBias = 8 * math.SmallestNonzeroFloat64
		switch {
		case v > 0:
			return v + v*expNudge + tinyBias
		case v < 0:
			return min(v-v*expNudge+tinyBias, 0)
		}
		return v
	}
	// Nudged like the table path: the reference composes decay over the
	// gaps between its accesses, and for a large exponent x the float64
	// rounding of the argument alone is x*2^-53 relative, up to about
	// 1e-13 before exp underflows; 2^-40 covers it.
	return v + math.Abs(v)*expNudge
}

// MaxCells is the most words ValueN and NextN take at once (a sketch's
// MaxLevels).
const MaxCells = 8

// ValueN sets v[i] = Value(w[i], now) for i < n: one call for all of a
// key's cells, with the decay law's dispatch taken once and the common
// laws inlined. n <= MaxCells.
func (r *Rules) ValueN(w *[MaxCells]Word, n uint32, now uint32, v *[MaxCells]float64) {
	switch r.kind {
	case decay.KindNone:
		for i := range n {
			v[i] = float64(w[i].Score())
		}
	case decay.KindExponential:
		// expDecay, inlined by hand (it is over the inlining budget).
		const mask = 1<<expTableBits - 1
		for i := range n {
			s, dt := float64(w[i].Score()), Elapsed(w[i].Stamp(), now)
			if dt > 0 && s != 0 {
				if dt >= 1<<(3*expTableBits) {
					s = r.expSlow(s, dt)
				} else if x := s * (r.exp[0][dt&mask] * r.exp[1][(dt>>expTableBits)&mask] * r.exp[2][(dt>>(2*expTableBits))&mask]); math.Abs(x) < tinyDecayed {
					s = r.expSlow(s, dt)
				} else {
					s = x + math.Abs(x)*expNudge
				}
			}
			v[i] = s
		}
	default:
		for i := range n {
			v[i] = r.Value(w[i], now)
		}
	}
}

// NextN sets nw[i] = Next(w[i], now, delta) for i < n, computing all of
// them before the caller's first CAS. n <= MaxCells.
func (r *Rules) NextN(w *[MaxCells]Word, n uint32, now uint32, delta float64, nw *[MaxCells]Word) {
	var v [MaxCells]float64
	r.ValueN(w, n, now, &v)
	lo, hi := r.lo, r.hi
	for i := range n {
		x := min(max(v[i]+delta, lo), hi) // round, inlined
		nw[i] = Pack(roundUpInRange(x), Newer(w[i].Stamp(), now))
	}
}

// Value returns the score word w stands for at time now: its score decayed
// for the elapsed age. It only reads.
func (r *Rules) Value(w Word, now uint32) float64 {
	return r.Decay(float64(w.Score()), Elapsed(w.Stamp(), now))
}

// Next returns the word that results from adding delta to w at time now:
// decay for the elapsed age, add, clamp to [lo, hi], narrow with RoundUp,
// stamp with the newer of w's stamp and now. delta must be finite.
func (r *Rules) Next(w Word, now uint32, delta float64) Word {
	return r.Apply(w, r.Value(w, now), now, delta)
}

// Apply is Next for a caller that has the value already: v must be
// r.Value(w, now) (from Value or ValueN), and then Apply(w, v, now, delta)
// == Next(w, now, delta). It saves decaying the word a second time.
func (r *Rules) Apply(w Word, v float64, now uint32, delta float64) Word {
	return Pack(r.Round(v+delta), Newer(w.Stamp(), now))
}

// Round clamps v to [lo, hi] and narrows it upward. Because lo and hi are
// float32 values, the result stays inside the bounds. v must not be NaN.
func (r *Rules) Round(v float64) float32 {
	if v < r.lo {
		v = r.lo
	} else if v > r.hi {
		v = r.hi
	}
	return roundUpInRange(v)
}
