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
func Linear(rate float64) Decay { return linear{rate: rate} }

type linear struct {
	rate float64 // per second; valid when finite and > 0
}

func (l linear) Apply(score float64, dtMillis int64) float64 {
	if dtMillis <= 0 || score == 0 {
		return score
	}
	drop := l.rate * float64(dtMillis) / 1000
	if drop > math.MaxFloat64 {
		drop = wideDrop(l.rate, dtMillis)
		if math.IsInf(score, 0) {
			return score // Inf less an infinite drop: not NaN
		}
	}
	switch {
	case score > 0:
		return math.Max(score-drop, 0)
	case score < 0:
		return math.Min(score+drop, 0)
	}
	return score // NaN
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
