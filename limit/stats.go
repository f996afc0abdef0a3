package limit

import "sync/atomic"

// Stats is a reading of a limiter for monitoring: what it runs on and
// how full it is. It is a plain value (publish it with expvar.Func, or
// marshal it as JSON: Engine reads as its name); more fields may come.
type Stats struct {
	// Engine is the engine the limiter runs on (Auto for Inf).
	Engine Engine
	// Bytes is the memory the engine holds (Sizes().Total).
	Bytes int
	// Saturation is the estimated probability that a fresh key (one the
	// limiter has never seen) asking for one token now is denied: the
	// limiter's rate of innocent denials, the number to alert on
	// (docs/capacity.md has its accuracy against measured rates, and
	// WithCapacity the cure). The Buckets engine reads its eviction-floor
	// histogram and samples 4096 lines; the count-min the share of cells
	// that would deny in a run of 16,384 cells of each level of its
	// primary generation (their product: the Bloom filter's rate). Each
	// reading reads about 256 KiB (Buckets) or 512 KiB (count-min) and
	// takes well under a millisecond; it never writes and does not
	// allocate. 0 for Inf.
	Saturation float64
}

// statsCalls draws a fresh sample offset per Stats call.
var statsCalls atomic.Uint64

// Stats returns the limiter's current Stats. It panics on the zero
// Limiter.
func (l *Limiter) Stats() Stats {
	if l.none() {
		l.unset()
		return Stats{}
	}
	st := Stats{Engine: l.Engine(), Bytes: l.Sizes().Total}
	p := l.p.Load()
	if l.b != nil {
		st.Saturation = l.b.Saturation(p.unit, p.burstU)
	} else {
		st.Saturation = l.r.Saturation(p.unit, p.burstU, 0, statsCalls.Add(0x9E3779B97F4A7C15))
	}
	return st
}

// MarshalText returns the engine's name ("auto", "buckets",
// "count-min"), so that Stats marshals readably.
func (e Engine) MarshalText() ([]byte, error) { return []byte(e.String()), nil }
