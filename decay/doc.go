// Package decay holds the time-decay laws a sketch cell obeys between
// accesses.
//
// # Model
//
// A Decay maps a score and an elapsed time in milliseconds to the score that
// remains. Decay is applied lazily: a cell stores a score and the time it was
// last touched; whoever touches it next applies the law for the gap. Lazy
// decay is only correct because every law here composes over time
// subdivision:
//
//	Apply(Apply(s, a), b) == Apply(s, a+b)   (within float tolerance)
//
// so it does not matter how often a cell is touched between two reads.
//
// # Guarantees of the provided laws
//
//   - dtMillis <= 0 returns the score unchanged (a clock that steps backwards
//     counts as zero elapsed time, never as growth).
//   - Monotone toward 0: |Apply(s, dt)| <= |s| and the sign never flips, so a
//     score never crosses 0.
//   - NaN in gives NaN out; the sketch rejects NaN before it reaches a law.
//
// Parameters are per second. Exponential(lambda) keeps s*exp(-lambda*t), a
// half-life of ln(2)/lambda seconds; Linear(rate) moves s toward 0 by rate
// per second and stops at 0, its float64 result rounded toward +Inf (never
// below the exact drain of the float64 rate; exact drains, such as whole
// units a millisecond, come out exact, but for rates above about 1e289 a
// second, whose drain overflows a float64 product and is widened by 2^-51
// of itself, and below 2^-900, whose drain is taken two float64 steps
// short); None is the identity.
//
// Constructors never fail: invalid parameters (NaN, Inf, <= 0) are reported
// by sketch.New as a *sketch.ConfigError naming the value.
//
// # Pseudo-code of a lazy read
//
//	var law decay.Decay = decay.Exponential(0.1)
//	now := clock()
//	s := law.Apply(cell.score, now-cell.stamp)
//
// Custom laws may implement Decay; they should keep the guarantees above and
// may implement Validator and Drainer so that sketch.New can check them.
//
// # On the hot path
//
// The sketch does not call a provided law through the interface: it
// evaluates None, Exponential and Linear inline (exponential decay by table
// lookup, biased up by 2^-40, toward +Inf: a positive score never decays
// more than the law, a negative one never less), and
// sanitizes a custom law's faults (NaN, ±Inf, growth, crossing 0) to the
// safe side: no decay, or 0. docs/precision.md has the measured error.
package decay
