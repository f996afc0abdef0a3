package ref

import (
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/lfgrudge/grudge/internal/conv"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch"
)

// RotatorConfig describes a Rotator: the fields of rotator.Config,
// validated as rotator.New validates them, with the same seed derivation,
// so the two rotators map a key to the same cells generation by
// generation. Period is the ticker period; Manual leaves the ticker out
// (rotation by Rotate only).
type RotatorConfig struct {
	Sketch      sketch.Config
	Generations uint32
	Period      time.Duration
	Manual      bool
}

// Rotator is grudge's rotator: N reference sketches under distinct seeds,
// read from the oldest, written to all, behind one sync.RWMutex. Every
// operation holds the read lock for its whole duration; a time.Ticker
// goroutine started by NewRotator retires the oldest generation every
// Period under the write lock. Close stops the goroutine.
//
// It is the baseline for package rotator (lock-free, rotation on access):
// use it for A/B benchmarks and differential tests. Unlike rotator.Rotator
// it does not read the clock once per operation: each generation reads
// its own clock, as grudge's generations do. All methods are safe for
// concurrent use. The zero value is not usable; build one with
// NewRotator and Close it.
type Rotator struct {
	mu   sync.RWMutex  // read-locked by every operation; write-locked to rotate
	gens []*Sketch     // guarded by mu; N generations, oldest (the primary) first
	next atomic.Uint64 // creation counter of the next generation
	cfg  RotatorConfig

	stop      chan struct{} // closed by Close
	done      chan struct{} // closed when the ticker goroutine has returned
	closeOnce sync.Once
}

// Compile-time check that the reference rotator is a drop-in Scorer.
var _ sketch.Scorer = (*Rotator)(nil)

// NewRotator builds N empty generations and starts the rotation goroutine.
// It returns an error naming the first invalid field ("sketch: " for a
// field of cfg.Sketch, "rotator: " for the others), and then starts
// nothing.
func NewRotator(cfg RotatorConfig) (*Rotator, error) {
	n, err := core.RotatorConfig{Sketch: conv.Config(cfg.Sketch), Generations: cfg.Generations, Period: cfg.Period}.Normalize()
	if err != nil {
		return nil, err
	}
	cfg.Sketch, cfg.Generations = conv.Normalized(cfg.Sketch, n.Sketch), n.Generations
	r := &Rotator{
		cfg:  cfg,
		gens: make([]*Sketch, cfg.Generations),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	for i := range r.gens {
		// The first builds report a Config error (a Hasher factory that
		// returns nil: audit 145) as New does, before any goroutine.
		if r.gens[i], err = r.newGeneration(); err != nil {
			return nil, err
		}
	}
	if cfg.Manual {
		close(r.done)
		return r, nil
	}
	t := time.NewTicker(cfg.Period)
	go r.run(t)
	return r, nil
}

// newGeneration returns a fresh generation and advances the creation
// counter.
func (r *Rotator) newGeneration() (*Sketch, error) {
	c := r.cfg.Sketch
	c.Seed = core.GenerationSeed(r.cfg.Sketch.Seed, r.next.Add(1)-1)
	return New(c)
}

// build is newGeneration for a rotation, which has no one to return an
// error to.
func (r *Rotator) build() *Sketch {
	s, err := r.newGeneration()
	if err != nil {
		panic("rotator: building a generation failed: " + err.Error())
	}
	return s
}

// run rotates on every tick until Close.
func (r *Rotator) run(t *time.Ticker) {
	defer close(r.done)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			r.Rotate()
		case <-r.stop:
			return
		}
	}
}

// Rotate retires the oldest generation and appends a fresh one; the ticker
// goroutine calls it every Period, and tests and benchmarks call it to
// force a rotation at a chosen point. The fresh generation is allocated
// before the write lock is taken, so operations wait only for the swap
// (the strongest form of the mutex design, not a strawman).
func (r *Rotator) Rotate() {
	fresh := r.build()
	r.mu.Lock()
	defer r.mu.Unlock()
	copy(r.gens, r.gens[1:])
	r.gens[len(r.gens)-1] = fresh
}

// Close stops the rotation goroutine and waits for it to return. It is
// idempotent. Operations keep working after Close; generations no longer
// rotate.
func (r *Rotator) Close() {
	r.closeOnce.Do(func() { close(r.stop) })
	<-r.done
}

// Config returns the normalized configuration.
func (r *Rotator) Config() RotatorConfig { return r.cfg }

// Sizes returns the sum of the generations' sizes; Total adds the
// Rotator struct.
func (r *Rotator) Sizes() sketch.Sizes {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var sz sketch.Sizes
	for _, s := range r.gens {
		g := s.Sizes()
		sz.Cells += g.Cells
		sz.Total += g.Total
	}
	sz.Total += int(unsafe.Sizeof(*r))
	return sz
}

// Update adds delta to the key in every generation.
func (r *Rotator) Update(key []byte, delta float64) {
	checkFinite("Update", "delta", delta)
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, s := range r.gens {
		s.Update(key, delta)
	}
}

// UpdateString is Update for a string key, without allocating.
func (r *Rotator) UpdateString(key string, delta float64) {
	checkFinite("UpdateString", "delta", delta)
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, s := range r.gens {
		s.UpdateString(key, delta)
	}
}

// Query returns the key's score in the oldest generation.
func (r *Rotator) Query(key []byte) float64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.gens[0].Query(key)
}

// QueryString is Query for a string key, without allocating.
func (r *Rotator) QueryString(key string) float64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.gens[0].QueryString(key)
}

// UpdateAndQuery updates every generation and returns the oldest
// generation's aggregate after its update.
func (r *Rotator) UpdateAndQuery(key []byte, delta float64) float64 {
	checkFinite("UpdateAndQuery", "delta", delta)
	r.mu.RLock()
	defer r.mu.RUnlock()
	v := r.gens[0].UpdateAndQuery(key, delta)
	for _, s := range r.gens[1:] {
		s.Update(key, delta)
	}
	return v
}

// UpdateAndQueryString is UpdateAndQuery for a string key, without
// allocating.
func (r *Rotator) UpdateAndQueryString(key string, delta float64) float64 {
	checkFinite("UpdateAndQueryString", "delta", delta)
	r.mu.RLock()
	defer r.mu.RUnlock()
	v := r.gens[0].UpdateAndQueryString(key, delta)
	for _, s := range r.gens[1:] {
		s.UpdateString(key, delta)
	}
	return v
}

// TryUpdate decides on the oldest generation (its atomic TryUpdate) and,
// if admitted, adds delta to every other generation.
func (r *Rotator) TryUpdate(key []byte, delta, limit float64) bool {
	checkFinite("TryUpdate", "delta", delta)
	checkFinite("TryUpdate", "limit", limit)
	r.mu.RLock()
	defer r.mu.RUnlock()
	if !r.gens[0].TryUpdate(key, delta, limit) {
		return false
	}
	for _, s := range r.gens[1:] {
		s.Update(key, delta)
	}
	return true
}

// TryUpdateString is TryUpdate for a string key, without allocating.
func (r *Rotator) TryUpdateString(key string, delta, limit float64) bool {
	checkFinite("TryUpdateString", "delta", delta)
	checkFinite("TryUpdateString", "limit", limit)
	r.mu.RLock()
	defer r.mu.RUnlock()
	if !r.gens[0].TryUpdateString(key, delta, limit) {
		return false
	}
	for _, s := range r.gens[1:] {
		s.UpdateString(key, delta)
	}
	return true
}

// QueryDetailed returns the oldest generation's per-level view of the key.
func (r *Rotator) QueryDetailed(key []byte) sketch.Detail {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.gens[0].QueryDetailed(key)
}
