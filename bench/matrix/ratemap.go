package matrix

import (
	"sync"
	"time"
	"unsafe"

	"golang.org/x/time/rate"
)

// RateMap is the peer most Go services write by hand: a sync.Map from
// string(key) to a *rate.Limiter (golang.org/x/time/rate), one token
// bucket per key, created on first sight. Its memory grows with the
// number of distinct keys (a limiter, a map entry and a copy of the key
// each) and nothing ever removes them; the matrix reports it as the
// live-heap delta after every key of the universe was filled.
//
// The mapping of the sketch methods onto a token bucket:
//
//	Update(k, d)          limiter(k).AllowN(now, int(d)): consume d tokens if there are d
//	Query(k)              limiter(k).TokensAt(now): tokens left (not a debt score)
//	UpdateAndQuery(k, d)  AllowN(now, int(d)), then TokensAt(now)
//	TryUpdate(k, d, _)    AllowN(now, int(d)); the limit is the bucket's burst, fixed at construction
//
// Lookups view the key's bytes as a string without copying; only the
// insert copies the key. Safe for concurrent use; build it with
// NewRateMap.
type RateMap struct {
	m     sync.Map         // string -> *rate.Limiter
	limit rate.Limit       // refill per second of every bucket
	burst int              // bucket size of every bucket
	drain bool             // Fill empties a new bucket instead of taking one token
	now   func() time.Time // the clock
}

// NewRateMap returns an empty map whose buckets refill at limit tokens per
// second up to burst. With drain, Fill leaves a key's bucket empty (the
// abuse set-up); otherwise Fill takes one token. now nil means time.Now.
func NewRateMap(limit rate.Limit, burst int, drain bool, now func() time.Time) *RateMap {
	if now == nil {
		now = time.Now
	}
	return &RateMap{limit: limit, burst: burst, drain: drain, now: now}
}

// limiter returns key's limiter, creating it on first sight.
func (r *RateMap) limiter(key []byte) *rate.Limiter {
	// The lookup does not retain its key, so a view of key's bytes will do.
	if v, ok := r.m.Load(unsafe.String(unsafe.SliceData(key), len(key))); ok {
		return v.(*rate.Limiter)
	}
	v, _ := r.m.LoadOrStore(string(key), rate.NewLimiter(r.limit, r.burst))
	return v.(*rate.Limiter)
}

// Update consumes int(delta) tokens if the bucket holds them.
func (r *RateMap) Update(key []byte, delta float64) {
	r.limiter(key).AllowN(r.now(), int(delta))
}

// Query returns the tokens left in key's bucket.
func (r *RateMap) Query(key []byte) float64 {
	return r.limiter(key).TokensAt(r.now())
}

// UpdateAndQuery is Update followed by Query on one clock reading.
func (r *RateMap) UpdateAndQuery(key []byte, delta float64) float64 {
	l, now := r.limiter(key), r.now()
	l.AllowN(now, int(delta))
	return l.TokensAt(now)
}

// TryUpdate reports whether int(delta) tokens were there and consumed
// them if so. limit is ignored: the bucket's burst is the limit.
func (r *RateMap) TryUpdate(key []byte, delta, _ float64) bool {
	return r.limiter(key).AllowN(r.now(), int(delta))
}

// Fill creates key's bucket before the timed region and takes one token
// from it, or every token when the map was built to drain.
func (r *RateMap) Fill(key []byte, _ float64) {
	l := r.limiter(key)
	n := 1
	if r.drain {
		n = r.burst
	}
	l.AllowN(r.now(), n)
}
