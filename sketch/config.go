package sketch

import (
	"fmt"
	"math"

	"github.com/lfgrudge/grudge/decay"
)

// Defaults and limits of Config.
const (
	DefaultLevels        = 4
	DefaultCellsPerLevel = 100_000
	MaxLevels            = 8
	// MaxCellsPerLevel bounds M so that a level index fits the 32-bit
	// multiply-shift reduction and a row stays addressable.
	MaxCellsPerLevel = 1 << 30
)

// Config describes a sketch. The zero value is not valid on its own: Lo
// and Hi must bracket 0 with Lo < Hi (for example Lo: 0, Hi: 1e9). Every
// other zero field takes the default its comment names.
type Config struct {
	Levels        uint32      // L; 0 means 4; at most 8
	CellsPerLevel uint32      // M; 0 means 100_000; at most 2^30
	Decay         decay.Decay // nil means decay.None()
	Lo, Hi        float64     // clamp bounds; need Lo <= 0 <= Hi and Lo < Hi; an infinite bound only with a decay that drains
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
	Clock         Clock         // nil means the fast system clock
}

// Normalize returns cfg with defaults filled in and validated: Levels,
// CellsPerLevel, Decay and Hasher are set, Clock stays nil when it was nil
// (each implementation picks its own default clock). The error names the
// field and the offending value, prefixed "sketch: ".
func (cfg Config) Normalize() (Config, error) {
	if cfg.Levels == 0 {
		cfg.Levels = DefaultLevels
	}
	if cfg.Levels > MaxLevels {
		return cfg, fmt.Errorf("sketch: Levels must be <= %d; got %d", MaxLevels, cfg.Levels)
	}
	if cfg.CellsPerLevel == 0 {
		cfg.CellsPerLevel = DefaultCellsPerLevel
	}
	if cfg.CellsPerLevel > MaxCellsPerLevel {
		return cfg, fmt.Errorf("sketch: CellsPerLevel must be <= %d; got %d", MaxCellsPerLevel, cfg.CellsPerLevel)
	}
	if cfg.Decay == nil {
		cfg.Decay = decay.None()
	}
	if err := decay.Validate(cfg.Decay); err != nil {
		return cfg, fmt.Errorf("sketch: Decay is invalid: %w", err)
	}
	if math.IsNaN(cfg.Lo) {
		return cfg, fmt.Errorf("sketch: Lo must not be NaN; got %v", cfg.Lo)
	}
	if math.IsNaN(cfg.Hi) {
		return cfg, fmt.Errorf("sketch: Hi must not be NaN; got %v", cfg.Hi)
	}
	if cfg.Lo > 0 {
		return cfg, fmt.Errorf("sketch: Lo must be <= 0; got %v", cfg.Lo)
	}
	if cfg.Hi < 0 {
		return cfg, fmt.Errorf("sketch: Hi must be >= 0; got %v", cfg.Hi)
	}
	if !(cfg.Lo < cfg.Hi) {
		return cfg, fmt.Errorf("sketch: Lo must be < Hi; got Lo=%v, Hi=%v", cfg.Lo, cfg.Hi)
	}
	drains := decay.Drains(cfg.Decay)
	if math.IsInf(cfg.Hi, 1) && !drains {
		return cfg, fmt.Errorf("sketch: Hi = +Inf needs a Decay that drains; got Hi=%v with %v decay", cfg.Hi, kindName(cfg.Decay))
	}
	if math.IsInf(cfg.Lo, -1) && !drains {
		return cfg, fmt.Errorf("sketch: Lo = -Inf needs a Decay that drains; got Lo=%v with %v decay", cfg.Lo, kindName(cfg.Decay))
	}
	if cfg.Aggregator > Mean {
		return cfg, fmt.Errorf("sketch: Aggregator must be Min, Max or Mean; got %v", cfg.Aggregator)
	}
	if cfg.Hasher == nil {
		cfg.Hasher = XXH3()
	}
	return cfg, nil
}

func kindName(d decay.Decay) string {
	k, _ := decay.Params(d)
	return k.String()
}

// FalsePositiveRate is the probability that a cold key shares all L cells
// with at least one of hotKeys concurrently hot keys, in a sketch of L
// levels of m cells: (1 - (1 - 1/m)^hotKeys)^L. Under Min aggregation that
// is the chance a cold key is scored like a hot one.
func FalsePositiveRate(levels, m uint32, hotKeys uint64) float64 {
	if m == 0 {
		return 1
	}
	perLevel := -math.Expm1(float64(hotKeys) * math.Log1p(-1/float64(m)))
	return math.Pow(perLevel, float64(levels))
}

// SuggestLevels returns the smallest L in 1..MaxLevels whose
// FalsePositiveRate for hotKeys hot keys in rows of m cells (0 means
// DefaultCellsPerLevel) is at most target, and MaxLevels when none is.
// Each level costs one cell access per operation.
func SuggestLevels(m uint32, hotKeys uint64, target float64) uint32 {
	if m == 0 {
		m = DefaultCellsPerLevel
	}
	for l := uint32(1); l < MaxLevels; l++ {
		if FalsePositiveRate(l, m, hotKeys) <= target {
			return l
		}
	}
	return MaxLevels
}

// CheckTryUpdate panics, with a message that starts "sketch:", if delta
// or limit is NaN or ±Inf, or if limit is above Hi (or above the float32
// range when Hi is +Inf): scores are clamped at Hi, so such a limit could
// never deny. cfg must be normalized. Both implementations call it.
func (cfg Config) CheckTryUpdate(delta, limit float64) {
	checkFinite("TryUpdate", "delta", delta)
	checkFinite("TryUpdate", "limit", limit)
	if limit > cfg.Hi || limit > math.MaxFloat32 {
		panicLimitAboveHi(limit, cfg.Hi)
	}
}
