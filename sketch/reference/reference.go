package reference

import (
	"time"

	"github.com/lfgrudge/grudge/internal/ref"
	"github.com/lfgrudge/grudge/sketch"
)

// New returns the mutex reference sketch for cfg, or the
// *sketch.ConfigError sketch.New would return. It maps a key to the same
// cells as sketch.New(cfg) does. Besides sketch.Scorer it has the At
// forms (UpdateAt, QueryAt, UpdateAndQueryAt, TryUpdateAt), as
// sketch.Sketch does.
func New(cfg sketch.Config) (sketch.Scorer, error) {
	s, err := ref.New(cfg)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// RotatorConfig describes a reference rotator, as rotator.Config does:
// every generation is configured by Sketch (its Seed the base seed, each
// generation hashing under the seed rotator.New derives), Generations is
// N (0 means 2; at least 2), Period the rotation period of the ticker
// (at least 1 ms).
type RotatorConfig struct {
	Sketch      sketch.Config
	Generations uint32
	Period      time.Duration
}

// Rotator is the reference rotator: grudge's design, N reference
// sketches behind one sync.RWMutex, rotated by a time.Ticker goroutine.
// Close stops the goroutine. The value NewRotator returns also has the At
// forms (UpdateAt, QueryAt, UpdateAndQueryAt, TryUpdateAt), as
// rotator.Rotator does.
type Rotator interface {
	sketch.Scorer
	Close()
}

// NewRotator returns the reference rotator for cfg, its N generations
// built and its ticker goroutine started, or the *sketch.ConfigError
// rotator.New would return (and then starts nothing).
func NewRotator(cfg RotatorConfig) (Rotator, error) {
	r, err := ref.NewRotator(ref.RotatorConfig{Sketch: cfg.Sketch, Generations: cfg.Generations, Period: cfg.Period})
	if err != nil {
		return nil, err
	}
	return r, nil
}
