package sketch

// The At twins take the time as an argument instead of reading the
// sketch's clock, in the manner of golang.org/x/time/rate's AllowN(t, n):
// a composite (the rotator reads the clock once and drives several
// sketches with it) and deterministic tests use them. nowMillis is on the
// same scale as the sketch's Clock (for the default clock: the runtime's
// monotonic milliseconds, as NowMillis returns them). A time earlier than
// one already seen (by any method) counts as zero elapsed time, as for the
// clock: the sketch keeps a high-water mark of time (see Monotonic).

// NowMillis returns the sketch's clock reading, the time the plain methods
// use.
func (s *Sketch) NowMillis() int64 { return s.nowMillis() }

// UpdateAt is Update at time nowMillis.
func (s *Sketch) UpdateAt(key []byte, delta float64, nowMillis int64) {
	checkFinite("Update", "delta", delta)
	s.update(s.hasher.Sum64(key), delta, s.mono.Observe(nowMillis))
}

// UpdateStringAt is UpdateString at time nowMillis.
func (s *Sketch) UpdateStringAt(key string, delta float64, nowMillis int64) {
	checkFinite("Update", "delta", delta)
	s.update(s.hasher.Sum64String(key), delta, s.mono.Observe(nowMillis))
}

// QueryAt is Query at time nowMillis.
func (s *Sketch) QueryAt(key []byte, nowMillis int64) float64 {
	return s.query(s.hasher.Sum64(key), s.mono.Observe(nowMillis))
}

// QueryStringAt is QueryString at time nowMillis.
func (s *Sketch) QueryStringAt(key string, nowMillis int64) float64 {
	return s.query(s.hasher.Sum64String(key), s.mono.Observe(nowMillis))
}

// UpdateAndQueryAt is UpdateAndQuery at time nowMillis.
func (s *Sketch) UpdateAndQueryAt(key []byte, delta float64, nowMillis int64) float64 {
	checkFinite("UpdateAndQuery", "delta", delta)
	return s.updateAndQuery(s.hasher.Sum64(key), delta, s.mono.Observe(nowMillis))
}

// UpdateAndQueryStringAt is UpdateAndQueryString at time nowMillis.
func (s *Sketch) UpdateAndQueryStringAt(key string, delta float64, nowMillis int64) float64 {
	checkFinite("UpdateAndQuery", "delta", delta)
	return s.updateAndQuery(s.hasher.Sum64String(key), delta, s.mono.Observe(nowMillis))
}

// TryUpdateAt is TryUpdate at time nowMillis.
func (s *Sketch) TryUpdateAt(key []byte, delta, limit float64, nowMillis int64) bool {
	checkFinite("TryUpdate", "delta", delta)
	checkFinite("TryUpdate", "limit", limit)
	return s.tryUpdate(s.hasher.Sum64(key), delta, limit, s.mono.Observe(nowMillis))
}

// TryUpdateStringAt is TryUpdateString at time nowMillis.
func (s *Sketch) TryUpdateStringAt(key string, delta, limit float64, nowMillis int64) bool {
	checkFinite("TryUpdate", "delta", delta)
	checkFinite("TryUpdate", "limit", limit)
	return s.tryUpdate(s.hasher.Sum64String(key), delta, limit, s.mono.Observe(nowMillis))
}

// QueryDetailedAt is QueryDetailed at time nowMillis.
func (s *Sketch) QueryDetailedAt(key []byte, nowMillis int64) Detail {
	return s.queryDetailed(s.hasher.Sum64(key), s.mono.Observe(nowMillis))
}
