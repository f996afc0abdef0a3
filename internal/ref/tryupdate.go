package ref

import (
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch"
)

// TryUpdate adds delta to the key's L cells only if the aggregate of their
// decayed scores plus delta is at most limit, and reports whether it did.
// It holds all L cell locks at once (taken in ascending level order, so
// two TryUpdates never deadlock), which makes the check and the update one
// atomic step: N goroutines racing TryUpdate(k, 1, 1000) with no decay
// admit exactly 1000. Scores are clamped to [Lo, Hi] after adding. Any
// finite limit is accepted (above Hi too, as in grudge). It panics if
// delta or limit is NaN or ±Inf.
func (s *Sketch) TryUpdate(key []byte, delta, limit float64) bool {
	core.CheckTry(delta, limit)
	return s.tryUpdate(s.hasher.Sum64(key), delta, limit, s.now())
}

// TryUpdateString is TryUpdate for a string key, without allocating.
func (s *Sketch) TryUpdateString(key string, delta, limit float64) bool {
	core.CheckTry(delta, limit)
	return s.tryUpdate(s.hasher.Sum64String(key), delta, limit, s.now())
}

func (s *Sketch) tryUpdate(h uint64, delta, limit float64, now int64) bool {
	var (
		cells  [sketch.MaxLevels]*cell
		scores [sketch.MaxLevels]float64
	)
	// Rows are distinct arrays, so the L cells are distinct and locking
	// them in level order is a total order shared by every caller. The
	// unlocks are deferred: a custom decay law or aggregator that panics
	// must not leave cells locked.
	locked := 0
	defer func() {
		for _, c := range cells[:locked] {
			c.mu.Unlock()
		}
	}()
	for l := uint32(0); l < s.levels; l++ {
		c := s.cellFor(h, l)
		c.mu.Lock()
		cells[l], locked = c, int(l)+1
		s.decayLocked(c, now)
		scores[l] = c.score
	}
	ok := s.aggregate(scores[:s.levels])+delta <= limit
	if ok {
		for _, c := range cells[:s.levels] {
			s.addLocked(c, delta)
		}
	}
	return ok
}
