package ref

import (
	"time"

	"github.com/lfgrudge/grudge/internal/core"
)

// The At twins take the time first, as the lock-free sketch's do, and
// convert it through the same Timebase rules.

// Timebase returns the sketch's time scale.
func (s *Sketch) Timebase() *core.Timebase { return s.tb }

// UpdateAt is Update at time t.
func (s *Sketch) UpdateAt(t time.Time, key string, delta float64) {
	checkFinite("Update", "delta", delta)
	s.update(s.hasher.Sum64String(key), delta, s.tb.Millis(t))
}

// QueryAt is Query at time t.
func (s *Sketch) QueryAt(t time.Time, key string) float64 {
	return s.query(s.hasher.Sum64String(key), s.tb.Millis(t))
}

// UpdateAndQueryAt is UpdateAndQuery at time t.
func (s *Sketch) UpdateAndQueryAt(t time.Time, key string, delta float64) float64 {
	checkFinite("UpdateAndQuery", "delta", delta)
	return s.updateAndQuery(s.hasher.Sum64String(key), delta, s.tb.Millis(t))
}

// TryUpdateAt is TryUpdate at time t.
func (s *Sketch) TryUpdateAt(t time.Time, key string, delta, limit float64) bool {
	core.CheckTry(delta, limit)
	return s.tryUpdate(s.hasher.Sum64String(key), delta, limit, s.tb.Millis(t))
}
