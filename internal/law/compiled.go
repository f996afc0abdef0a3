package law

import "math"

// Compiled is a Decay prepared for a hot path: the provided laws are
// evaluated without an interface call, exponential decay by table lookup
// instead of math.Exp, and every result is on the safe side of the
// contract. It is immutable after Compile and safe for concurrent use.
//
// Safe side: for a positive score the result is never below the law's
// own float64 Apply (exponential decay is nudged up by 2^-40 relative,
// far below float32 resolution); a custom law's result is sanitized, so a
// law that returns NaN or ±Inf, grows a score, or crosses 0 cannot poison
// a caller (see Apply).
type Compiled struct {
	law   Decay
	kind  Kind
	param float64 // lambda (Exponential) or rate (Linear), per second
	whole bool    // Linear at a whole number of thousands a second, at most 2^20 (wholeRate)
	// exp[k][i] = exp(-lambda * (i << (k*expTableBits)) / 1000), with the
	// expression shape of Exponential's Apply.
	exp [3][1 << expTableBits]float64
}

const (
	// expNudge is the relative upward bias of table-driven exponential
	// decay: it covers the few float64 ulps (2^-51) by which a product of
	// table entries may differ from math.Exp of the whole gap, and the
	// argument rounding of lambda*dt, so the result stays >= the law's.
	expNudge = 1.0 / (1 << 40)
	// tinyDecayed is the magnitude below which exponential decay takes
	// math.Exp of the whole gap plus an absolute bias: products this small
	// may involve subnormal factors, whose rounding a relative nudge
	// cannot cover.
	tinyDecayed = 1e-290
	// expTableBits is the width of each table; three cover gaps below
	// 2^24 ms (about 4.7 hours); longer gaps use math.Exp.
	expTableBits = 8
	expSpan      = 1 << (3 * expTableBits)
	expMask      = 1<<expTableBits - 1
)

// Compile prepares d (nil means None). d must be valid (see Validate).
func Compile(d Decay) *Compiled {
	if d == nil {
		d = None()
	}
	c := &Compiled{law: d}
	c.kind, c.param = Params(d)
	c.whole = c.kind == KindLinear && wholeRate(c.param)
	// A law so slow that a 1 ms factor is within 2^-39 of 1 (lambda below
	// about 1.8e-9/s, a half-life of 12 years) keeps empty tables, so
	// that ExpFast always declines: its nudged factor could exceed 1 and
	// grow a score a float32 step at every write (audit 37); expSlow caps
	// the nudge at the score. Every faster law's factors are below
	// 1 - 2^-39, so nudged they stay below 1.
	if c.kind == KindExponential && -math.Expm1(-c.param/1000) > 2*expNudge {
		for k := range c.exp {
			for i := range c.exp[k] {
				ms := int64(i) << (k * expTableBits)
				c.exp[k][i] = math.Exp(-c.param * float64(ms) / 1000)
			}
		}
	}
	return c
}

// Law returns the law c was compiled from.
func (c *Compiled) Law() Decay { return c.law }

// Kind returns the law's kind.
func (c *Compiled) Kind() Kind { return c.kind }

// Param returns the law's parameter: lambda (Exponential) or rate
// (Linear), per second; 0 for other kinds.
func (c *Compiled) Param() float64 { return c.param }

// Apply returns score after dt ms under the law, on the safe side (see
// Compiled). dt <= 0 returns score.
func (c *Compiled) Apply(score float64, dt int64) float64 {
	if dt <= 0 || score == 0 {
		return score
	}
	switch c.kind {
	case KindNone:
		return score
	case KindExponential:
		return c.expApply(score, dt)
	case KindLinear:
		return c.LinearApply(score, dt)
	}
	return sanitize(score, c.law.Apply(score, dt))
}

// expApply is exponential decay for dt > 0: the table path (ExpFast)
// when it applies, math.Exp of the whole gap (expSlow) otherwise.
func (c *Compiled) expApply(score float64, dt int64) float64 {
	if v, ok := c.ExpFast(score, dt); ok {
		return v
	}
	return c.expSlow(score, dt)
}

// ExpFast is the table path of the exponential law, for a caller's own
// batch loop (atomiccell's ValueN): three lookups for dt mod 2^24, the
// product nudged up by 2^-40. ok is false, and v meaningless, when the
// caller must call Apply instead: dt >= 2^24 (past the tables), or a
// result so small that the relative nudge no longer covers the table's
// rounding. Kind must be KindExponential and dt > 0. It inlines
// (TestInlining), so a batch loop makes no call on the common path.
func (c *Compiled) ExpFast(score float64, dt int64) (v float64, ok bool) {
	f := c.exp[0][dt&expMask] * c.exp[1][(dt>>expTableBits)&expMask] * c.exp[2][(dt>>(2*expTableBits))&expMask]
	v = score * f
	a := math.Abs(v)
	// A subnormal factor has lost bits the nudge does not cover (a huge
	// score can keep the product normal): the slow path then. (A law too
	// slow for the nudge has empty tables, see Compile: a = 0 here.)
	return v + a*expNudge, dt < expSpan && a >= tinyDecayed && f >= 0x1p-1022
}

// expSlow is exponential decay by math.Exp of the whole gap, as
// Exponential's Apply computes it, nudged like the table path but never
// above the score's magnitude: for gaps past the tables, near the
// subnormal range (rare: the score is gone by then), and for a factor
// within the nudge of 1.
//
//go:noinline
func (c *Compiled) expSlow(score float64, dt int64) float64 {
	v := expScaled(score, c.param*float64(dt)/1000)
	if math.Abs(v) < tinyDecayed {
		// Near the subnormal range the relative bias alone no longer
		// covers a caller that composed its decay over other gaps
		// (subnormal products round in absolute steps): add eight
		// subnormal ulps (4e-323) too, toward +Inf but never across 0.
		// An exact 0 (underflow) stays 0, so a decayed score still
		// reaches 0.
		const tinyBias = 8 * math.SmallestNonzeroFloat64
		switch {
		case v > 0:
			return min(v+v*expNudge+tinyBias, score)
		case v < 0:
			return min(v-v*expNudge+tinyBias, 0)
		}
		return v
	}
	// The argument rounding of a large lambda*dt is up to about 1e-13
	// relative before exp underflows; 2^-40 covers it. Never above the
	// score's magnitude: decay moves toward 0, and a factor within the
	// nudge of 1 (a very slow law) would otherwise grow the score by a
	// float32 step at every write (audit 37).
	return min(v+math.Abs(v)*expNudge, math.Abs(score))
}

// LinearApply is the linear law for dt > 0 and a score that is neither 0
// nor NaN, for a caller's own batch loop (atomiccell's ValueN): Linear's
// Apply (linearAt, rounded toward +Inf), so the result equals the law's
// exactly for every finite score. Kind must be KindLinear. It inlines
// (TestInlining), to one call (linearAt costs past the inliner's 80).
func (c *Compiled) LinearApply(score float64, dt int64) float64 {
	return linearAt(c.param, c.whole, score, dt)
}

// Sanitize is sanitize for the packages that call a custom law
// themselves (the mutex reference), so that both implementations treat
// its faults alike.
func Sanitize(score, v float64) float64 { return sanitize(score, v) }

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
