package sketch

import (
	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/core"
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
// other zero field takes the default its comment names. An invalid Config
// is a *ConfigError naming the field and the value.
type Config struct {
	Levels        uint32      // L; 0 means 4; at most 8
	CellsPerLevel uint32      // M; 0 means 100_000; at most 2^30
	Decay         decay.Decay // nil means decay.None()
	Lo, Hi        float64     // clamp bounds; Lo <= 0 <= Hi, Lo < Hi, within the float32 range; ±Inf only with a decay that drains
	Aggregator    Aggregator  // zero value means Min; Min, Max, Mean provided
	// AggregateFunc, when non-nil, replaces Aggregator: it combines the L
	// per-level scores of a key (len(scores) == L >= 1) into its estimate.
	// It must be safe for concurrent use and must not retain or modify
	// scores beyond the call. It is the slow path (an indirect call on a
	// pooled copy of the scores per operation); Min, Max and Mean are
	// faster as Aggregator. It must return a finite value for finite
	// scores; TryUpdate compares its result with the limit. The scores
	// it gets are capped at Hi; its result is used as it returns it (not
	// capped: a float64 mean of scores at Hi may round an ulp above it).
	AggregateFunc func(scores []float64) float64
	Hasher        HasherFactory // nil means XXH3(); SipHash() is the keyed PRF
	Seed          uint64        // hash seed (SipHash key is expanded from it)
	Clock         Clock         // nil means the runtime's monotonic clock
	MaxBytes      int64         // cap on the cell block in bytes; 0 means DefaultMaxBytes
}

// engine returns cfg as the engine's configuration.
func (cfg Config) engine() core.Config {
	return core.Config{
		Levels: cfg.Levels, CellsPerLevel: cfg.CellsPerLevel, Decay: cfg.Decay,
		Lo: cfg.Lo, Hi: cfg.Hi,
		Aggregator: core.Aggregator(cfg.Aggregator), AggregateFunc: cfg.AggregateFunc,
		Hasher: engineHasher(cfg.Hasher), Seed: cfg.Seed, Clock: cfg.Clock, MaxBytes: cfg.MaxBytes,
	}
}

// normalized returns cfg with the defaults the engine filled in (n is
// cfg.engine() normalized).
func (cfg Config) normalized(n core.Config) Config {
	cfg.Levels, cfg.CellsPerLevel, cfg.Decay, cfg.MaxBytes = n.Levels, n.CellsPerLevel, n.Decay, n.MaxBytes
	if cfg.Hasher == nil {
		cfg.Hasher = XXH3()
	}
	return cfg
}

// engineHasher returns f as the engine's hasher factory (nil stays nil:
// the engine's default, XXH3). The hashers it builds are f's own, so the
// engine still recognises XXH3 and SipHash in snapshot headers.
func engineHasher(f HasherFactory) core.HasherFactory {
	if f == nil {
		return nil
	}
	return func(seed uint64) core.Hasher { return f(seed) }
}

// SuggestLevels returns the smallest L in 1..MaxLevels whose
// false-positive rate for hotKeys hot keys in rows of cellsPerLevel cells
// (0 means DefaultCellsPerLevel) is at most targetP, and MaxLevels when
// none is. The rate is the chance that a cold key shares all L cells with
// at least one hot key, (1 - (1 - 1/M)^hotKeys)^L for M = cellsPerLevel:
// under Min aggregation, the chance it is scored like a hot one. Each
// level costs one cell access per operation. Its arguments are the root
// package's SuggestLevels' (hot keys first); that one refuses degenerate
// inputs with an error (its second result), while here no hot keys need
// one level and a NaN target MaxLevels.
func SuggestLevels(hotKeys, cellsPerLevel uint32, targetP float64) uint32 {
	return core.SuggestLevels(cellsPerLevel, uint64(hotKeys), targetP)
}
