package rotator

import (
	"time"

	"github.com/lfgrudge/grudge/internal/conv"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch"
)

// Config describes a Rotator. An invalid Config is a *sketch.ConfigError
// naming the field ("rotator: ", or "sketch: " for a field of Sketch).
type Config struct {
	// Sketch configures every generation. Its Seed is the base seed: each
	// generation hashes under its own seed derived from it. Its Clock
	// (nil means the sketch's default monotonic clock) is read once per
	// operation and drives both decay and rotation.
	Sketch sketch.Config
	// Generations is N, the number of live generations; 0 means 2; at
	// least 2 and at most 1024 (each is a whole sketch, built up front).
	Generations uint32
	// Period is how long each generation stays the primary; at least one
	// millisecond (clocks count whole milliseconds), and counted in whole
	// ms rounded up (2.9 ms is 3). A score lives at most Generations x
	// Period after its last write.
	Period time.Duration
	// Prefetch makes every write and every TryUpdate hash the key for
	// all generations and prefetch their cells before acting, so the
	// cache misses of the N generations overlap instead of queueing: a
	// gain for many distinct keys whose cells are not in cache (a limiter
	// over all clients), extra work for a few hot keys. Off by default;
	// packages limit and meter turn it on. Results are the same either
	// way.
	Prefetch bool
}

// engine returns cfg as the engine's configuration.
func (cfg Config) engine() core.RotatorConfig {
	return core.RotatorConfig{Sketch: conv.Config(cfg.Sketch), Generations: cfg.Generations, Period: cfg.Period, Prefetch: cfg.Prefetch}
}

// normalized returns cfg with the defaults the engine filled in (n is
// cfg.engine() normalized).
func (cfg Config) normalized(n core.RotatorConfig) Config {
	cfg.Sketch = conv.Normalized(cfg.Sketch, n.Sketch)
	cfg.Generations = n.Generations
	return cfg
}
