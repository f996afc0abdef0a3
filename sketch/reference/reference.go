package reference

import (
	"time"

	"github.com/lfgrudge/grudge/internal/ref"
	"github.com/lfgrudge/grudge/sketch"
)

// Sketch is the mutex reference sketch: grudge's cells (a float64 score,
// an int64 timestamp and a sync.Mutex each) behind sketch.Sketch's
// Scorer methods and their At forms (no Config, Sizes, Merge, Reset or
// snapshots), with the same semantics. It is a sketch.Scorer and an
// sketchtest.AtScorer. Its zero value is not usable (its methods panic
// with "sketch: zero Sketch; use reference.New"); New builds one.
type Sketch struct{ e *ref.Sketch }

var _ sketch.Scorer = (*Sketch)(nil)

// New returns the mutex reference sketch for cfg, or the
// *sketch.ConfigError sketch.New would return. It maps a key to the same
// cells as sketch.New(cfg) does.
func New(cfg sketch.Config) (*Sketch, error) {
	e, err := ref.New(cfg)
	if err != nil {
		return nil, err
	}
	return &Sketch{e}, nil
}

// Update adds delta to the key's L cells (clamped to [Lo, Hi]).
func (s *Sketch) Update(key []byte, delta float64) { s.ref().Update(key, delta) }

// UpdateString is Update for a string key.
func (s *Sketch) UpdateString(key string, delta float64) { s.ref().UpdateString(key, delta) }

// UpdateAt is Update at time t.
func (s *Sketch) UpdateAt(t time.Time, key string, delta float64) { s.ref().UpdateAt(t, key, delta) }

// Query returns the key's aggregate score.
func (s *Sketch) Query(key []byte) float64 { return s.ref().Query(key) }

// QueryString is Query for a string key.
func (s *Sketch) QueryString(key string) float64 { return s.ref().QueryString(key) }

// QueryAt is Query at time t.
func (s *Sketch) QueryAt(t time.Time, key string) float64 { return s.ref().QueryAt(t, key) }

// UpdateAndQuery is Update then Query, cell by cell.
func (s *Sketch) UpdateAndQuery(key []byte, delta float64) float64 {
	return s.ref().UpdateAndQuery(key, delta)
}

// UpdateAndQueryString is UpdateAndQuery for a string key.
func (s *Sketch) UpdateAndQueryString(key string, delta float64) float64 {
	return s.ref().UpdateAndQueryString(key, delta)
}

// UpdateAndQueryAt is UpdateAndQuery at time t.
func (s *Sketch) UpdateAndQueryAt(t time.Time, key string, delta float64) float64 {
	return s.ref().UpdateAndQueryAt(t, key, delta)
}

// TryUpdate adds delta to the key's cells only if aggregate + delta <=
// limit, holding all L cell locks, as grudge does.
func (s *Sketch) TryUpdate(key []byte, delta, limit float64) bool {
	return s.ref().TryUpdate(key, delta, limit)
}

// TryUpdateString is TryUpdate for a string key.
func (s *Sketch) TryUpdateString(key string, delta, limit float64) bool {
	return s.ref().TryUpdateString(key, delta, limit)
}

// TryUpdateAt is TryUpdate at time t.
func (s *Sketch) TryUpdateAt(t time.Time, key string, delta, limit float64) bool {
	return s.ref().TryUpdateAt(t, key, delta, limit)
}

// QueryDetailed returns the aggregate and each level's cell index and
// decayed score.
func (s *Sketch) QueryDetailed(key []byte) sketch.Detail { return s.ref().QueryDetailed(key) }

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

// ref returns the engine, or panics on the zero Sketch (one New never
// built), as sketch.Sketch does.
func (s *Sketch) ref() *ref.Sketch {
	if s.e == nil {
		panic("sketch: zero Sketch; use reference.New")
	}
	return s.e
}
