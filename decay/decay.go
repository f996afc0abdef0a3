package decay

import "github.com/lfgrudge/grudge/internal/law"

// Decay is a time-decay law. Implementations must be safe for concurrent use
// (the provided ones are immutable values).
type Decay interface {
	// Apply returns score after dtMillis ms of decay. dtMillis <= 0 returns
	// score unchanged. Monotone toward 0, never crosses 0, and composes:
	// Apply(Apply(s, a), b) == Apply(s, a+b) (within float tolerance).
	Apply(score float64, dtMillis int64) float64
}

// Validator is implemented by laws that can check their own parameters;
// sketch.New calls it.
type Validator interface {
	// Validate returns nil or an error that names the offending value.
	Validate() error
}

// Drainer is implemented by laws that know whether they pull every finite
// score to 0 (or near it) in finite time. A clamp bound of ±Inf is only
// accepted with a law that drains.
type Drainer interface {
	Drains() bool
}

// None returns the identity law: scores never decay.
func None() Decay { return law.None() }

// Exponential returns the law score*exp(-lambda*seconds): a half-life of
// ln(2)/lambda seconds. lambda must be finite and > 0 (checked by
// sketch.New).
func Exponential(lambda float64) Decay { return law.Exponential(lambda) }

// Linear returns the law that moves a score toward 0 by rate per second
// and stops at 0. rate must be finite and > 0 (checked by sketch.New).
func Linear(rate float64) Decay { return law.Linear(rate) }
