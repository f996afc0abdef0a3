package core

import "time"

// The At twins take the time as their first argument instead of reading
// the sketch's clock, as golang.org/x/time/rate's AllowN(t, n) does. t is
// converted to the sketch's scale by its Timebase: through the monotonic
// reading when t has one (time.Now()), through the wall clock otherwise (a
// fake clock's Now(), a stored time.UnixMilli), so each means what it
// says. A t earlier than a time the sketch has already used counts as that
// time (zero elapsed, never growth); a t later than the sketch's clock
// counts as the clock's current reading, so a time in the future can
// neither decay a key early nor stop decay for the others.

// Timebase returns the sketch's time scale (shared with the other
// generations of a rotator).
func (s *Sketch) Timebase() *Timebase { return s.tb }

// NowMillis returns the sketch's clock reading through its high-water
// mark: the time the plain methods use.
func (s *Sketch) NowMillis() int64 { return s.nowMillis() }

// UpdateAt is Update at time t.
func (s *Sketch) UpdateAt(t time.Time, key []byte, delta float64) {
	CheckFinite("Update", "delta", delta)
	s.update(s.sum64(key), delta, s.tb.Millis(t))
}

// UpdateStringAt is UpdateString at time t.
func (s *Sketch) UpdateStringAt(t time.Time, key string, delta float64) {
	CheckFinite("Update", "delta", delta)
	s.update(s.sum64String(key), delta, s.tb.Millis(t))
}

// QueryAt is Query at time t.
func (s *Sketch) QueryAt(t time.Time, key []byte) float64 {
	return s.query(s.sum64(key), s.tb.Millis(t))
}

// QueryStringAt is QueryString at time t.
func (s *Sketch) QueryStringAt(t time.Time, key string) float64 {
	return s.query(s.sum64String(key), s.tb.Millis(t))
}

// UpdateAndQueryAt is UpdateAndQuery at time t.
func (s *Sketch) UpdateAndQueryAt(t time.Time, key []byte, delta float64) float64 {
	CheckFinite("UpdateAndQuery", "delta", delta)
	return s.updateAndQuery(s.sum64(key), delta, s.tb.Millis(t))
}

// UpdateAndQueryStringAt is UpdateAndQueryString at time t.
func (s *Sketch) UpdateAndQueryStringAt(t time.Time, key string, delta float64) float64 {
	CheckFinite("UpdateAndQuery", "delta", delta)
	return s.updateAndQuery(s.sum64String(key), delta, s.tb.Millis(t))
}

// TryUpdateAt is TryUpdate at time t.
func (s *Sketch) TryUpdateAt(t time.Time, key []byte, delta, limit float64) bool {
	CheckTry(delta, limit)
	return s.tryUpdate(s.sum64(key), delta, limit, s.tb.Millis(t))
}

// TryUpdateStringAt is TryUpdateString at time t.
func (s *Sketch) TryUpdateStringAt(t time.Time, key string, delta, limit float64) bool {
	CheckTry(delta, limit)
	return s.tryUpdate(s.sum64String(key), delta, limit, s.tb.Millis(t))
}
