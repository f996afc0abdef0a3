package core

import (
	"math"
	"math/big"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/law"
)

// Defaults and limits of Config.
const (
	DefaultLevels        = 4
	DefaultCellsPerLevel = 100_000
	MaxLevels            = 8
	// MaxCellsPerLevel bounds M so that a level index fits the 32-bit
	// multiply-shift reduction and a row stays addressable.
	MaxCellsPerLevel = 1 << 30
	// DefaultMaxBytes is the cap on a sketch's cell block when
	// Config.MaxBytes is 0: 4 GiB (L=8, M=2^26).
	DefaultMaxBytes = 4 << 30
)

// Config describes a sketch. The zero value is not valid on its own: Hi
// must be set (Lo <= 0 <= Hi, Lo < Hi; for example Lo: 0, Hi: 1e9). Every
// other zero field takes the default its comment names.
type Config struct {
	Levels        uint32      // L; 0 means 4; at most 8
	CellsPerLevel uint32      // M; 0 means 100_000; at most 2^30
	Decay         decay.Decay // nil means decay.None()
	Lo, Hi        float64     // clamp bounds; Lo <= 0 <= Hi, Lo < Hi, within the float32 range; ±Inf only with a decay that drains, and then scores saturate at ±MaxFloat32 (the float32 range's end)
	Aggregator    Aggregator  // zero value means Min; Min, Max, Mean provided
	// AggregateFunc, when non-nil, replaces Aggregator: it combines the L
	// per-level scores of a key (len(scores) == L >= 1) into its estimate.
	// It must be safe for concurrent use and must not retain or modify
	// scores beyond the call. It is the slow path (an indirect call and a
	// copy per operation, see CustomAggregate); Min, Max and Mean are
	// faster as Aggregator. It must return a finite value for finite
	// scores; TryUpdate compares its result with the limit.
	AggregateFunc func(scores []float64) float64
	Hasher        HasherFactory // nil means XXH3(); SipHash() is the keyed PRF
	Seed          uint64        // hash seed (SipHash key is expanded from it)
	Clock         Clock         // nil means the fast system clock; a *Timebase is shared as is
	MaxBytes      int64         // cap on the cell block in bytes; 0 means DefaultMaxBytes
	// Conservative turns on conservative update (conservative.go): a
	// write raises each of the key's cells only to the key's new
	// estimate. It needs the Min aggregator; it takes no negative delta,
	// and Refund gives nothing back.
	Conservative bool
	// FinalAdmission changes what a TryUpdate's retry after a commit
	// conflict reads at a held level (one whose undo was refused, so it
	// keeps the call's increment): while the level's word is still the one
	// the call wrote, the retry reads it at the value the increment went
	// in over, not with the call's own increment. meter.Novelty sets it:
	// its mark saturates at Hi, where an undo is refused, so a retry
	// counting the call's own mark could tell no caller that a key never
	// seen is new (audit 109). The retry still decides again, so racing
	// calls of keys that share every cell are admitted once (audits 88 and
	// 112), but for a writer that left a held word exactly as the call
	// wrote it (a saturating add stamped at the call's time), which no load
	// can see; a horizon sweep's re-stamp of the held word counts as
	// another writer's (docs/design.md, "Roll-backs").
	FinalAdmission bool
}

// Normalize returns cfg with defaults filled in and validated: Levels,
// CellsPerLevel, Decay, Hasher and MaxBytes are set, Clock stays nil when
// it was nil (each implementation picks its own default clock). An error
// is a *ConfigError (errors.Is(err, ErrInvalidConfig)) naming the field
// and the offending value, prefixed "sketch: ".
func (cfg Config) Normalize() (Config, error) {
	bad := func(field string, value any, format string, args ...any) (Config, error) {
		return cfg, ConfigErr("sketch", field, value, format, args...)
	}
	if cfg.Clock != nil && IsNil(cfg.Clock) {
		// A typed nil (a nil *FakeClock) is not the default clock: its
		// first reading would be a nil dereference (audit 140).
		return bad("Clock", cfg.Clock, "Clock must not be a nil %T (leave Clock nil for the default clock)", cfg.Clock)
	}
	if cfg.Levels == 0 {
		cfg.Levels = DefaultLevels
	}
	if cfg.Levels > MaxLevels {
		return bad("Levels", cfg.Levels, "Levels must be <= %d; got %d", MaxLevels, cfg.Levels)
	}
	if cfg.CellsPerLevel == 0 {
		cfg.CellsPerLevel = DefaultCellsPerLevel
	}
	if cfg.CellsPerLevel > MaxCellsPerLevel {
		return bad("CellsPerLevel", cfg.CellsPerLevel, "CellsPerLevel must be <= %d; got %d", MaxCellsPerLevel, cfg.CellsPerLevel)
	}
	if cfg.MaxBytes < 0 {
		return bad("MaxBytes", cfg.MaxBytes, "MaxBytes must be >= 0 (0 means %d); got %d", int64(DefaultMaxBytes), cfg.MaxBytes)
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	if n := CellBytes(cfg.Levels, cfg.CellsPerLevel); n > cfg.MaxBytes {
		return bad("CellsPerLevel", cfg.CellsPerLevel, "Levels x CellsPerLevel = %d x %d needs %d bytes of cells, above MaxBytes %d; raise MaxBytes or shrink the sketch", cfg.Levels, cfg.CellsPerLevel, n, cfg.MaxBytes)
	}
	if cfg.Decay == nil {
		cfg.Decay = decay.None()
	}
	var verr error
	if p := recovered(func() { verr = law.Validate(cfg.Decay) }); p != nil {
		return bad("Decay", cfg.Decay, "Decay's Validate panicked: %v", p)
	}
	if verr != nil {
		return cfg, ConfigErrCause(verr, "sketch", "Decay", cfg.Decay, "Decay is invalid: %v", verr)
	}
	if math.IsNaN(cfg.Lo) {
		return bad("Lo", cfg.Lo, "Lo must not be NaN; got %v", cfg.Lo)
	}
	if math.IsNaN(cfg.Hi) {
		return bad("Hi", cfg.Hi, "Hi must not be NaN; got %v", cfg.Hi)
	}
	// -0 is 0: one configuration, one snapshot header (the header
	// compares the bounds bit for bit).
	if cfg.Lo == 0 {
		cfg.Lo = 0
	}
	if cfg.Hi == 0 {
		cfg.Hi = 0
	}
	if cfg.Lo == 0 && cfg.Hi == 0 {
		return bad("Hi", cfg.Hi, "Hi must be set: scores are clamped to [Lo, Hi] and Lo = Hi = 0 leaves no room (for example Hi: 1e9); got Lo=0, Hi=0")
	}
	if !(cfg.Lo < cfg.Hi) {
		return bad("Hi", cfg.Hi, "Hi must be > Lo; got Lo=%v, Hi=%v", cfg.Lo, cfg.Hi)
	}
	if cfg.Lo > 0 {
		return bad("Lo", cfg.Lo, "Lo must be <= 0; got %v", cfg.Lo)
	}
	if cfg.Hi < 0 {
		return bad("Hi", cfg.Hi, "Hi must be >= 0; got %v", cfg.Hi)
	}
	if !math.IsInf(cfg.Lo, 0) && cfg.Lo < -math.MaxFloat32 {
		return bad("Lo", cfg.Lo, "Lo must be within the float32 range (>= %v) or -Inf; got %v", -math.MaxFloat32, cfg.Lo)
	}
	if !math.IsInf(cfg.Hi, 0) && cfg.Hi > math.MaxFloat32 {
		return bad("Hi", cfg.Hi, "Hi must be within the float32 range (<= %v) or +Inf; got %v", math.MaxFloat32, cfg.Hi)
	}
	// Whether the law drains matters only for an infinite bound: only
	// then is a custom law's Apply called here (a law that panics on long
	// gaps is refused with an error, not a panic of New).
	drains := true
	if math.IsInf(cfg.Hi, 1) || math.IsInf(cfg.Lo, -1) {
		if p := recovered(func() { drains = law.Drains(cfg.Decay) }); p != nil {
			return bad("Decay", cfg.Decay, "Decay panicked when asked whether it drains: %v", p)
		}
	}
	if math.IsInf(cfg.Hi, 1) && !drains {
		return bad("Hi", cfg.Hi, "Hi = +Inf needs a Decay that drains; got Hi=%v with %v decay", cfg.Hi, kindName(cfg.Decay))
	}
	if math.IsInf(cfg.Lo, -1) && !drains {
		return bad("Lo", cfg.Lo, "Lo = -Inf needs a Decay that drains; got Lo=%v with %v decay", cfg.Lo, kindName(cfg.Decay))
	}
	if cfg.Aggregator > Mean {
		return bad("Aggregator", cfg.Aggregator, "Aggregator must be Min, Max or Mean; got %v", cfg.Aggregator)
	}
	if cfg.Conservative && (cfg.Aggregator != Min || cfg.AggregateFunc != nil) {
		return bad("Conservative", cfg.Conservative, "Conservative update needs the Min aggregator; got %v", cfg.Aggregator)
	}
	if cfg.Hasher == nil {
		cfg.Hasher = XXH3()
	}
	return cfg, nil
}

// CellBytes returns the bytes of the cell block of a sketch of levels rows
// of m cells, rows padded to whole cache lines (guard lines excluded).
func CellBytes(levels, m uint32) int64 {
	return int64(levels) * int64(rowStride(m)) * 8
}

func kindName(d decay.Decay) string {
	k, _ := law.Params(d)
	return k.String()
}

// FalsePositiveRate is the probability that a cold key shares all L cells
// with at least one of hotKeys concurrently hot keys, in a sketch of L
// levels of m cells: (1 - (1 - 1/m)^hotKeys)^L (0 for no hot keys, 1 for
// no cells). Under Min aggregation that is the chance a cold key is
// scored like a hot one. It is the float64 rounding of the rate
// SuggestLevels decides on (fpPerLevel).
func FalsePositiveRate(levels, m uint32, hotKeys uint64) float64 {
	if m == 0 {
		return 1
	}
	p := fpPerLevel(m, hotKeys)
	rate := newFP().SetInt64(1)
	for range levels {
		rate.Mul(rate, p)
	}
	f, _ := rate.Float64()
	return f
}

// fpPrec is the precision of the false-positive rate's arithmetic: far
// past float64's, so that a target equal to a level's rate as float64
// (31/256 for 2 hot keys in 16 cells) compares equal, not an ulp above.
const fpPrec = 512

func newFP() *big.Float { return new(big.Float).SetPrec(fpPrec) }

// fpPerLevel returns 1 - (1 - 1/m)^hotKeys (m > 0) to fpPrec bits, the
// power by squaring.
func fpPerLevel(m uint32, hotKeys uint64) *big.Float {
	one := newFP().SetInt64(1)
	base := newFP().Sub(one, newFP().Quo(one, newFP().SetUint64(uint64(m))))
	miss := newFP().SetInt64(1)
	for h := hotKeys; h > 0; h >>= 1 {
		if h&1 == 1 {
			miss.Mul(miss, base)
		}
		base.Mul(base, base)
	}
	// A miss below 2^-(fpPrec+1) leaves 1 - miss rounding to 1, and
	// big.Float's Sub would first shift 1 across the whole exponent gap:
	// 2^32 hot keys in 4 cells miss with 2^-1.78e9, a 212 MB subtraction
	// (audit 87).
	if miss.Sign() > 0 && miss.MantExp(nil) < -fpPrec-1 {
		return one
	}
	return miss.Sub(one, miss)
}

// SuggestLevels returns the smallest L in 1..MaxLevels whose
// FalsePositiveRate for hotKeys hot keys in rows of m cells (0 means
// DefaultCellsPerLevel) is at most target, and MaxLevels when none is.
// Each level costs one cell access per operation. The rate is compared
// as computed to 512 bits, not as its float64 rounding, so a target
// equal to a level's rate (31/256 for 2 hot keys in 16 cells) is met by
// that level (audit 50); no hot keys need one level.
func SuggestLevels(m uint32, hotKeys uint64, target float64) uint32 {
	if m == 0 {
		m = DefaultCellsPerLevel
	}
	if math.IsNaN(target) {
		return MaxLevels
	}
	want := newFP()
	if math.IsInf(target, 0) {
		want.SetInf(target < 0)
	} else {
		want.SetFloat64(target)
	}
	p := fpPerLevel(m, hotKeys)
	rate := newFP().Set(p)
	for l := uint32(1); l < MaxLevels; l++ {
		if rate.Cmp(want) <= 0 {
			return l
		}
		rate.Mul(rate, p)
	}
	return MaxLevels
}

// recovered runs f and returns what it panicked with (nil if it returned).
func recovered(f func()) (p any) {
	defer func() { p = recover() }()
	f()
	return nil
}
