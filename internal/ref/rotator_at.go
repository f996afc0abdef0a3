package ref

import (
	"time"

	"github.com/lfgrudge/grudge/internal/core"
)

// The rotator's At twins take the time first, as rotator.Rotator's do:
// each generation converts t through its own Timebase (the rules of
// Sketch.UpdateAt and its siblings), under the read lock as the short
// forms run.

// UpdateAt is Update at time t.
func (r *Rotator) UpdateAt(t time.Time, key string, delta float64) {
	checkFinite("Update", "delta", delta)
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, s := range r.gens {
		s.UpdateAt(t, key, delta)
	}
}

// QueryAt is Query at time t: the oldest generation's estimate.
func (r *Rotator) QueryAt(t time.Time, key string) float64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.gens[0].QueryAt(t, key)
}

// UpdateAndQueryAt is UpdateAndQuery at time t.
func (r *Rotator) UpdateAndQueryAt(t time.Time, key string, delta float64) float64 {
	checkFinite("UpdateAndQuery", "delta", delta)
	r.mu.RLock()
	defer r.mu.RUnlock()
	v := r.gens[0].UpdateAndQueryAt(t, key, delta)
	for _, s := range r.gens[1:] {
		s.UpdateAt(t, key, delta)
	}
	return v
}

// TryUpdateAt is TryUpdate at time t: decided on the oldest generation,
// and if admitted, delta added to every other one.
func (r *Rotator) TryUpdateAt(t time.Time, key string, delta, limit float64) bool {
	core.CheckTry(delta, limit)
	r.mu.RLock()
	defer r.mu.RUnlock()
	if !r.gens[0].TryUpdateAt(t, key, delta, limit) {
		return false
	}
	for _, s := range r.gens[1:] {
		s.UpdateAt(t, key, delta)
	}
	return true
}
