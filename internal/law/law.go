// Package law is the arithmetic of the decay laws behind package decay:
// the provided laws (None, Exponential, Linear, which package decay's
// constructors return), their kinds and parameters (Params), the
// validation sketch.New applies (Validate, Drains), and Compiled, the
// form the engine's hot path uses (table-driven exponential decay biased
// to the safe side, the two common laws inlined into batch loops, a
// custom law's faults sanitized). decay's package documentation states
// the laws' contract.
package law

import (
	"fmt"
	"math"
)

// Decay is decay.Decay: the engine's copy of the interface (values of
// either type are assignable to the other).
type Decay interface {
	// Apply returns score after dtMillis ms of decay. dtMillis <= 0 returns
	// score unchanged. Monotone toward 0, never crosses 0, and composes:
	// Apply(Apply(s, a), b) == Apply(s, a+b) (within float tolerance).
	Apply(score float64, dtMillis int64) float64
}

// Validator is implemented by laws that can check their own parameters.
type Validator interface {
	// Validate returns nil or an error that names the offending value.
	Validate() error
}

// Drainer is implemented by laws that know whether they pull every finite
// score to 0 (or near it) in finite time. A clamp bound of +Inf is only safe
// with a law that drains.
type Drainer interface {
	Drains() bool
}

// Kind identifies a provided law so that hot paths can specialise on it.
type Kind uint8

const (
	// KindCustom is any Decay not built by this package (or decay's).
	KindCustom Kind = iota
	// KindNone is the identity law.
	KindNone
	// KindExponential is score*exp(-lambda*seconds).
	KindExponential
	// KindLinear moves toward 0 by rate per second.
	KindLinear
)

// String returns the law's name.
func (k Kind) String() string {
	switch k {
	case KindNone:
		return "none"
	case KindExponential:
		return "exponential"
	case KindLinear:
		return "linear"
	default:
		return "custom"
	}
}

// Params reports which provided law d is and its per-second parameter
// (lambda for Exponential, rate for Linear, 0 otherwise). A nil d is
// KindNone, as sketch.Config treats it.
func Params(d Decay) (Kind, float64) {
	switch v := d.(type) {
	case nil:
		return KindNone, 0
	case none:
		return KindNone, 0
	case exponential:
		return KindExponential, v.lambda
	case linear:
		return KindLinear, v.rate
	default:
		return KindCustom, 0
	}
}

// Undecay returns a value that decays to b or more over dt ms under d
// (b > 0, dt > 0), rounded up: b for None, b x e^(lambda x dt) for
// Exponential (with expNudge's bias, which covers the rounding of Exp and
// of its argument), b + rate x dt for Linear (the least such value: a
// positive score drains linearly); false for a custom law, which has no
// inverse here. It may be +Inf (a sketch's clamp at Hi takes it).
func Undecay(d Decay, b float64, dt int64) (float64, bool) {
	switch kind, param := Params(d); kind {
	case KindNone:
		return b, true
	case KindExponential:
		v := b * math.Exp(param*float64(dt)/1000)
		return v + v*expNudge, true
	case KindLinear:
		return math.Nextafter(b+param*float64(dt)/1000, math.Inf(1)), true
	}
	return 0, false
}

// Validate checks d's parameters. nil is valid (it means None). Laws built
// by this package are checked for NaN, Inf and non-positive parameters; a
// custom law is checked through Validator if it implements it.
func Validate(d Decay) error {
	if d == nil {
		return nil
	}
	if v, ok := d.(Validator); ok {
		return v.Validate()
	}
	return nil
}

// Drains reports whether d pulls every finite score toward 0 over time.
// Provided laws answer exactly; a custom law answers through Drainer, and
// otherwise is probed: it drains if an hour of decay shrinks 1e6.
func Drains(d Decay) bool {
	if d == nil {
		return false
	}
	if v, ok := d.(Drainer); ok {
		return v.Drains()
	}
	return math.Abs(d.Apply(1e6, 3_600_000)) < 1e6
}

func checkParam(name string, v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
		return fmt.Errorf("decay: %s must be finite and > 0; got %v", name, v)
	}
	return nil
}

// None returns the identity law: scores never decay.
func None() Decay { return none{} }

type none struct{}

func (none) Apply(score float64, _ int64) float64 { return score }
func (none) Validate() error                      { return nil }
func (none) Drains() bool                         { return false }

// Exponential returns the law score*exp(-lambda*seconds): half-life
// ln(2)/lambda seconds. lambda must be finite and > 0 (see Validate).
func Exponential(lambda float64) Decay { return exponential{lambda: lambda} }

type exponential struct {
	lambda float64 // per second; valid when finite and > 0
}

func (e exponential) Apply(score float64, dtMillis int64) float64 {
	if dtMillis <= 0 {
		return score
	}
	return expScaled(score, e.lambda*float64(dtMillis)/1000)
}

// expScaled returns score x e^-x. Past x = 700 the factor alone nears the
// subnormal range (below 2^-1022 it loses bits, past 745 it underflows to
// 0 while the product may still be a normal number: MaxFloat32 x e^-745 is
// 1e-285), so it is exp(log|score| - x) there, with score's sign.
func expScaled(score, x float64) float64 {
	if x < 700 || score == 0 {
		return score * math.Exp(-x)
	}
	if math.IsInf(score, 0) {
		return score // Inf x e^-x, x up to +Inf (lambda x dt overflowed): not NaN
	}
	v := math.Exp(math.Log(math.Abs(score)) - x)
	if score < 0 {
		return -v
	}
	return v
}
func (e exponential) Validate() error { return checkParam("Exponential lambda", e.lambda) }
func (e exponential) Drains() bool    { return e.lambda > 0 }

// Linear returns the law that moves a score toward 0 by rate per second and
// stops at 0 (a leaky bucket). rate must be finite and > 0 (see Validate).
func Linear(rate float64) Decay { return linear{rate: rate, whole: wholeRate(rate)} }

type linear struct {
	rate  float64 // per second; valid when finite and > 0
	whole bool    // wholeRate(rate)
}

// wholeRate reports a linear rate of a whole number of thousands a
// second, at most 2^20 (package limit's units: a whole drain a ms): its
// drop over dt < 2^32 ms is exact (rate x dt < 2^52), so linearAt only
// checks the subtraction.
func wholeRate(rate float64) bool { return math.Mod(rate, 1000) == 0 && rate <= 1<<20 }

// Apply moves score toward 0 by rate x dt/1000, stopping at 0, never
// below the exact drain of the float64 rate (linearAt).
func (l linear) Apply(score float64, dtMillis int64) float64 {
	if dtMillis <= 0 || score == 0 || score != score || math.IsInf(score, 0) {
		return score // ±Inf less any drop stays itself
	}
	return linearAt(l.rate, l.whole, score, dtMillis)
}

// linearAt returns score (finite, not 0) moved toward 0 by rate x dt/1000
// (dt > 0), stopping at 0, rounded toward +Inf: never below the exact
// result, never past score. The drop is computed as float64 does (the
// product, then the quotient, each rounded to nearest) with delta, the
// exact drop less it (both roundings' errors, from two fused
// multiply-adds, to within delta's own rounding; its sign exact); the
// subtraction's own error is exact (Fast2Sum: |score| > drop wherever the
// result is not 0). With them c is the exact result less the float64
// one, and a positive c moves the result to the least float64 at or
// above v + c (addUp). Where both are 0 (an exact drop of an exact
// difference: package limit's whole units, or Linear(1) over 3000 ms) the
// result is the plain expression's, bit for bit. Where rate x dt
// overflows, the drop divides first (wideDrop), its two roundings taken
// 2^-51 of it to the safe side. Audit 86: rounded to nearest,
// Linear(0.1) read 0.99939999999999995 for an exact
// 0.99939999999999999997, and a negative score absorbed at every write a
// drain below half its ulp. The Redis script (redis/sketch.lua, decay)
// computes the same, with Dekker's product for the fused multiply-add.
func linearAt(rate float64, whole bool, score float64, dt int64) float64 {
	t := float64(dt)
	if dt > 1<<53 {
		// Past 2^53 ms the age rounds: down for a positive score (never
		// more than dt's drain), up for a negative one (never less),
		// so the result stays at or above the exact one.
		over := t >= 0x1p63 || int64(t) > dt
		switch {
		case score > 0 && over:
			t = math.Nextafter(t, 0)
		case score < 0 && !over && int64(t) < dt:
			t = math.Nextafter(t, math.Inf(1))
		}
	}
	if rate < 0x1p-900 {
		return tinyLinearAt(rate, score, t)
	}
	p := rate * t
	drop := p / 1000
	if whole && score > 0 && uint64(dt) < 1<<32 {
		// An exact drop: only the subtraction can round, and it did not
		// where its Fast2Sum error is 0 (the common case: package limit).
		v := score - drop
		if v <= 0 {
			return 0
		}
		if score-v == drop {
			return v
		}
	}
	// rate x t = p + e1; p = 1000 x drop + e2; delta = (e1 + e2)/1000, a
	// multiply (2^-51 of delta off, which addUp's widening covers).
	delta := (math.FMA(rate, t, -p) + math.FMA(-drop, 1000, p)) * 0.001
	if drop > math.MaxFloat64 {
		drop = wideDrop(rate, dt)
		delta = -math.Copysign(drop*0x1p-51, score)
	}
	if score > 0 {
		v := score - drop
		if c := ((score - v) - drop) - delta; c > 0 {
			v = min(addUp(v, c, delta), score)
		}
		return max(v, 0)
	}
	v := score + drop
	if c := (drop - (v - score)) + delta; c > 0 {
		v = addUp(v, c, delta)
	}
	return min(v, 0)
}

// tinyLinearAt is linearAt for a rate below 2^-900 a second, where the
// error terms below underflow (audit 98: Linear(5e-324) left -1 at -1):
// each of the drop's two roundings is at most half a step, subnormal or
// not, so two steps short of it is below the exact drop and two steps
// long above it. A positive score takes the short drop, a negative one
// the long drop, and the sum is then stepped up: the result is never
// below the exact one, and never farther from 0 than score. Such a drop
// is below 2^-840: it moves only scores near it.
func tinyLinearAt(rate, score, t float64) float64 {
	if !(t > 0) || score == 0 || score != score || math.IsInf(score, 0) {
		return score
	}
	drop := rate * t / 1000
	if score > 0 {
		drop = math.Nextafter(math.Nextafter(drop, 0), 0)
		return max(min(math.Nextafter(score-drop, math.Inf(1)), score), 0)
	}
	// The exact drop is above 0 even where this one underflows.
	drop = math.Nextafter(math.Nextafter(drop, math.Inf(1)), math.Inf(1))
	return min(math.Nextafter(score+drop, math.Inf(1)), 0)
}

// addUp returns the least float64 at or above v + c for c > 0 computed
// from delta (linearAt): c widened by 2^-50 of itself and of delta (its
// own rounding, and delta's), then the sum rounded up, its error exact
// where |v| >= c (Fast2Sum), else stepped up regardless.
//
//go:noinline
func addUp(v, c, delta float64) float64 {
	c += (c + math.Abs(delta)) * 0x1p-50
	w := v + c
	if math.Abs(v) < c || c-(w-v) > 0 {
		return math.Nextafter(w, math.Inf(1))
	}
	return w
}

// wideDrop is the linear drop rate x dt/1000 when rate x dt overflows
// (a rate above about 1e289 per second): dividing first keeps a drop
// below MaxFloat64 finite, so the law still composes. Every other drop
// is the product divided by 1000, as the reference computes it.
//
//go:noinline
func wideDrop(rate float64, dtMillis int64) float64 { return rate * (float64(dtMillis) / 1000) }

func (l linear) Validate() error { return checkParam("Linear rate", l.rate) }
func (l linear) Drains() bool    { return l.rate > 0 }
