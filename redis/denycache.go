package redis

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
)

// denyCache is the local view of the server's debt for keys the server
// has answered: a lock-free sketch (sketch.Sketch) with the limiter's own
// law and bounds, in its units (Linear, [0, Hi]), and Min aggregation, fed with the
// debt the server reported. Because it decays at the server's rate from
// the moment the answer arrived (no earlier than the server computed it),
// its estimate is >= the server's debt at every later instant, counting
// only the debt already reported: it can only over-estimate (collisions
// under Min raise, never lower, and a racing double feed raises too, up
// to Burst). So a request it denies, the server would have denied: the
// cache never admits, and it is stale only toward denial, by at most the
// round trip times Rate plus collision over-estimates, which drain at
// Rate (so never longer than Burst/Rate).
//
// A clock that steps back behind the cache's time (LimiterConfig.Clock)
// ends that argument: the cache would date what the server reports at
// its own later time and drain it late, and it misses what is admitted
// meanwhile. So while the clock is behind, the cache is empty (a fresh
// sketch the first call that sees the lag swaps in), answers nothing and
// learns nothing: every call asks the server, until the clock passes the
// cache's time again.
//
// Constant memory: L x M cells whatever the number of keys. Safe for
// concurrent use; no lock, no goroutine.
type denyCache struct {
	sk      atomic.Pointer[sketch.Sketch]
	cleared atomic.Int64 // the cache's time when a step back last emptied it
	lt      *localTime
	cfg     sketch.Config
	rate    float64 // units per second
	burst   float64
}

func newDenyCache(rate, burst float64, cells uint32, seed uint64, lt *localTime) (*denyCache, error) {
	d := &denyCache{lt: lt, rate: rate, burst: burst, cfg: sketch.Config{
		Levels: 4, CellsPerLevel: cells, Decay: decay.Linear(rate), Lo: 0, Hi: burst,
		Aggregator: sketch.Min, Seed: seed ^ 0xD1E5CAC4E, Clock: lt.tb,
	}}
	sk, err := sketch.New(d.cfg)
	if err != nil {
		return nil, err
	}
	d.sk.Store(sk)
	d.cleared.Store(math.MinInt64)
	return d, nil
}

// behind reports whether the clock is behind the cache's time, and then
// empties the cache once per high-water time.
func (d *denyCache) behind() bool {
	if d.lt.lag() == 0 {
		return false
	}
	hw := d.lt.tb.HighWater()
	if c := d.cleared.Load(); c != hw && d.cleared.CompareAndSwap(c, hw) {
		if sk, err := sketch.New(d.cfg); err == nil { // d.cfg was accepted once
			d.sk.Store(sk)
		}
	}
	return true
}

// observe records that the server's debt for key was debt (just now).
// Raising the min to debt: adding debt-q to every cell makes the min at
// least debt (cells above the min rise too, which only over-estimates).
func (d *denyCache) observe(key string, debt float64) {
	if d.behind() {
		return
	}
	sk := d.sk.Load()
	if q := sk.QueryString(key); q < debt {
		sk.UpdateString(key, debt-q)
	}
}

// refresh is observe for a key the cache holds (its estimate is above 0),
// a no-op for the others: an admission (without PreCheck) updates what a
// denial put there, and adds nothing else.
func (d *denyCache) refresh(key string, debt float64) {
	if d.behind() {
		return
	}
	sk := d.sk.Load()
	if q := sk.QueryString(key); q > 0 && q < debt {
		sk.UpdateString(key, debt-q)
	}
}

// check reports whether a request of n is certainly denied by the server,
// and then the local debt's RetryAfter and ResetAfter (never while the
// clock is behind the cache's time).
func (d *denyCache) check(key string, n float64) (denied bool, debt float64, retry, reset time.Duration) {
	debt = d.sk.Load().QueryString(key)
	if debt+n <= d.burst || d.behind() {
		return false, debt, 0, 0
	}
	return true, debt, retryAfter(debt, n, d.burst, d.rate), resetAfter(debt, d.rate)
}

// retryAfter is the exact wait for debt, draining at rate per second, to
// leave room for n under burst: rounded up to the ms and never early
// (-1 when n > burst: never).
func retryAfter(debt, n, burst, rate float64) time.Duration {
	if n > burst {
		return -1
	}
	need := debt + n - burst
	if need <= 0 {
		return 0
	}
	// The closed form is a first guess (its quotient may round either
	// way); then the smallest ms at which the debt, drained as the law
	// drains it (rate x ms / 1000), leaves room for n.
	ms := math.Ceil(need / rate * 1000)
	for ms > 1 && debt-rate*(ms-1)/1000+n <= burst {
		ms--
	}
	for debt-rate*ms/1000+n > burst {
		ms++
	}
	return time.Duration(ms) * time.Millisecond
}

// resetAfter is the exact time for debt, draining at rate per second, to
// reach 0: rounded up to the ms, never early.
func resetAfter(debt, rate float64) time.Duration { return retryAfter(debt, 0, 0, rate) }
