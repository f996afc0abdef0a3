package core

import "time"

// DefaultGenerations is the number of generations when
// RotatorConfig.Generations is 0.
const DefaultGenerations = 2

// MaxGenerations bounds RotatorConfig.Generations: every generation is a
// whole sketch built up front (its cells and 16 KiB of TryUpdate
// stripes), so a count in the millions would allocate for minutes or
// exhaust memory instead of failing; forgetting spans Generations x
// Period, which a longer Period stretches as well.
const MaxGenerations = 1024

// RotatorConfig describes a Rotator.
type RotatorConfig struct {
	// Sketch configures every generation. Its Seed is the base seed: each
	// generation hashes under its own seed derived from it (see GenerationSeed).
	// Its Clock (nil means the sketch's default monotonic clock) is read
	// once per operation and drives both decay and rotation.
	Sketch Config
	// Generations is N, the number of live generations; 0 means 2; at
	// least 2 and at most MaxGenerations.
	Generations uint32
	// Period is how long each generation stays the primary; at least one
	// millisecond (clocks count whole milliseconds), and counted in whole
	// ms rounded up (2.9 ms is 3). A score lives at most Generations x
	// Period after its last write.
	Period time.Duration
	// Manual turns rotation on access off: generations rotate only when
	// Rotate is called (grudge's ticker-driven rotation is built on it).
	Manual bool
	// Prefetch makes every write and every TryUpdate hash the key for
	// all generations first and prefetch their cells (Sketch.Hash,
	// Prefetch) before acting, so the cache misses of the N generations
	// overlap instead of queueing: for keys whose cells are not in cache
	// (many distinct keys, each seen now and then: a limiter over all
	// clients) an admitted TryUpdate or an Update waits for about one
	// generation's misses instead of N. For keys whose cells are cached
	// (a few hot keys) it only adds work (the younger generations'
	// hashes and the prefetch calls), and a TryUpdate denial pays it
	// too. Off by default; packages limit and meter turn it on.
	// docs/design.md, section 6, has the numbers. Results are the same
	// either way. The reference rotator ignores it.
	Prefetch bool
}

// Normalize returns cfg with defaults filled in and validated (the
// reference rotator validates with it too). Errors are *ConfigError
// naming the field and the offending value, prefixed "rotator: " (or
// "sketch: " for a field of cfg.Sketch, as New reports it).
func (cfg RotatorConfig) Normalize() (RotatorConfig, error) {
	sc, err := cfg.Sketch.Normalize()
	if err != nil {
		return cfg, err
	}
	cfg.Sketch = sc
	if cfg.Generations == 0 {
		cfg.Generations = DefaultGenerations
	}
	if cfg.Generations < 2 {
		return cfg, ConfigErr("rotator", "Generations", cfg.Generations, "Generations must be >= 2; got %d", cfg.Generations)
	}
	if cfg.Generations > MaxGenerations {
		return cfg, ConfigErr("rotator", "Generations", cfg.Generations, "Generations must be <= %d; got %d", MaxGenerations, cfg.Generations)
	}
	if cfg.Period <= 0 {
		return cfg, ConfigErr("rotator", "Period", cfg.Period, "Period must be > 0; got %v", cfg.Period)
	}
	if cfg.Period < time.Millisecond {
		return cfg, ConfigErr("rotator", "Period", cfg.Period, "Period must be at least 1ms (the clock counts milliseconds); got %v", cfg.Period)
	}
	return cfg, nil
}

// GenerationSeed returns the hash seed of generation gen (0 for the first
// generation New builds, then 1, 2, ... in order of creation) of a
// rotator whose Config.Sketch.Seed is base: output gen of the splitmix64
// stream seeded with base (SplitMix64). Consecutive generations
// therefore hash under unrelated seeds, so two keys that collide in one
// generation almost surely do not in the next. The reference rotator
// derives its seeds with it too, so both map a key to the same cells
// generation by generation.
func GenerationSeed(base, gen uint64) uint64 {
	const golden = 0x9e3779b97f4a7c15
	st := base + gen*golden
	return SplitMix64(&st)
}
