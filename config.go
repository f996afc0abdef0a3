package grudge

import (
	"reflect"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch"
)

// Config describes a Sketch, field for field as grudge v0.1.0 has it. The
// zero value is not valid on its own: Lo and Hi must bracket 0 with Lo < Hi
// (for example Lo: 0, Hi: 1).
type Config struct {
	// Levels is L, the number of hash levels; 0 means 4; at most 8.
	Levels uint32
	// CellsPerLevel is M, the cells in each level; 0 means 100,000.
	CellsPerLevel uint32
	// Decay is the forgiveness law; nil means None.
	Decay Decay
	// Lo and Hi clamp every cell: Lo <= 0 <= Hi and Lo < Hi. An infinite
	// bound needs a Decay that drains, and scores then saturate at
	// ±MaxFloat32.
	Lo, Hi float64
	// Aggregator combines a key's L level scores; nil means Min. Min, Max
	// and Mean take the lock-free fast path; any other function works
	// through a pooled copy of the scores (slow path), each capped at Hi,
	// and its result is read as it returns it (a mean of its own may
	// round an ulp above Hi, where Mean reads Hi).
	Aggregator Aggregator
	// Hasher builds the key hash; nil means Murmur3 (grudge's default).
	// Use SipHash for keys chosen by untrusted clients.
	Hasher HasherFactory
	// Clock tells the time; nil means the runtime's monotonic clock.
	Clock Clock
}

// Decay is the decay law of a score: Apply(score, dtMillis) returns score
// after dtMillis milliseconds (dtMillis <= 0 leaves it unchanged). It is
// decay.Decay; a Decay of your own works (slower than the built-ins: one
// interface call per cell). It must move toward 0, never cross it, and
// compose over subdivisions of time.
type Decay = decay.Decay

// Exponential returns score * exp(-lambdaPerSec * seconds).
func Exponential(lambdaPerSec float64) Decay { return decay.Exponential(lambdaPerSec) }

// Linear returns a law that moves a score toward 0 by ratePerSec per
// second and stops at 0.
func Linear(ratePerSec float64) Decay { return decay.Linear(ratePerSec) }

// None is the identity law: scores never decay. It reads both ways a
// caller may spell it: as a Decay value, as grudge declares it
// (Decay: grudge.None), and as a call returning one (Decay:
// grudge.None()); either is decay.None() inside the sketch.
//
// The price of the two spellings: None itself is a function value, and
// a func compares only with nil. d == grudge.None does not compile
// ("func can only be compared to nil"), and a Decay that holds None
// panics when compared (d == e, or used as a map key), as comparing any
// func does. Compare with grudge.None() (or decay.None()), which is
// comparable.
var None noneLaw = decay.None

// noneLaw is None's type: a function returning the identity law, which
// is itself the identity law.
type noneLaw func() Decay

// Apply returns score unchanged.
func (noneLaw) Apply(score float64, _ int64) float64 { return score }

// Aggregator combines the L per-level scores of a key into its estimate.
// It must be safe for concurrent use and must not retain levelScores.
type Aggregator func(levelScores []float64) float64

// The built-in aggregators. New recognises them (by function identity, once)
// and runs the lock-free sketch's inlined versions; they are variables, as
// in grudge, and a function assigned to one of them is treated as custom.
var (
	// Min takes the smallest level score (count-min): collisions only raise
	// it, so with non-negative deltas it never under-estimates.
	Min Aggregator = minScores
	// Max takes the largest level score.
	Max Aggregator = maxScores
	// Mean averages the level scores.
	Mean Aggregator = meanScores
)

func minScores(levelScores []float64) float64  { return core.Min.Aggregate(levelScores) }
func maxScores(levelScores []float64) float64  { return core.Max.Aggregate(levelScores) }
func meanScores(levelScores []float64) float64 { return core.Mean.Aggregate(levelScores) }

// builtin maps a built-in Aggregator to the core's enum; ok is false for a
// custom function.
func builtin(a Aggregator) (agg sketch.Aggregator, ok bool) {
	if a == nil {
		return sketch.Min, true
	}
	switch reflect.ValueOf(a).Pointer() {
	case reflect.ValueOf(minScores).Pointer():
		return sketch.Min, true
	case reflect.ValueOf(maxScores).Pointer():
		return sketch.Max, true
	case reflect.ValueOf(meanScores).Pointer():
		return sketch.Mean, true
	}
	return 0, false
}

// Clock tells the time. Sketches read it once per operation and count
// whole milliseconds; a reading earlier than one already seen counts as no
// time passing. grudgetest.FakeClock is one for tests.
type Clock interface {
	Now() time.Time
}

// clockAdapter makes a Clock a sketch.Clock. It keeps Now, so the core's
// Timebase anchors its scale to the clock's own time.Time.
type clockAdapter struct{ c Clock }

func (a clockAdapter) NowMillis() int64 { return a.c.Now().UnixMilli() }
func (a clockAdapter) Now() time.Time   { return a.c.Now() }

// coreClock returns the core's view of c: nil stays nil (the default
// monotonic clock), a clock that already has NowMillis (grudgetest's) is
// used as is.
func coreClock(c Clock) sketch.Clock {
	switch c := c.(type) {
	case nil:
		return nil
	case sketch.Clock:
		return c
	default:
		return clockAdapter{c}
	}
}

// native translates cfg to the core's Config, hashing under seed.
func (cfg Config) native(seed uint64) sketch.Config {
	d := cfg.Decay
	if _, ok := d.(noneLaw); ok {
		d = decay.None() // the built-in law, not a custom one
	}
	nc := sketch.Config{
		Levels:        cfg.Levels,
		CellsPerLevel: cfg.CellsPerLevel,
		Decay:         d,
		Lo:            cfg.Lo,
		Hi:            cfg.Hi,
		Hasher:        coreHasher(cfg.Hasher),
		Seed:          seed,
		Clock:         coreClock(cfg.Clock),
	}
	if agg, ok := builtin(cfg.Aggregator); ok {
		nc.Aggregator = agg
	} else {
		nc.AggregateFunc = cfg.Aggregator
	}
	return nc
}

// ErrInvalidConfig is matched by every configuration error New and
// NewRotator return: errors.Is(err, ErrInvalidConfig). Each such error is
// a *ConfigError naming the field and the value.
var ErrInvalidConfig = sketch.ErrInvalidConfig

// ConfigError reports one invalid configuration field (sketch.ConfigError).
type ConfigError = sketch.ConfigError
