package redis

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/atom"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch"
)

// denyCache is the local view of the server's debt for keys the server
// has answered: a lock-free sketch (sketch.Sketch) with the limiter's own
// law and bounds, in its units (Linear, [0, Hi]), and Min aggregation, fed with the
// debt the server reported. Because it decays at the server's rate from
// the moment the answer arrived (no earlier than the server computed it),
// its estimate is >= the server's debt at every later instant, counting
// only the debt already reported: it can only over-estimate (collisions
// under Min raise, never lower; racing feeds of one key raise it to the
// larger debt, see raise). So the cache never admits, and it is stale
// only toward denial, by at most the round trip times Rate plus
// collision over-estimates, which drain at Rate (so never longer than
// Burst/Rate after the last feed of the colliding keys: a key whose
// cells all hold another key's debt is denied for as long as that key
// keeps being fed, audit 90). A request it denies for a key's own
// learned debt, the server would have denied.
//
// The argument needs three more things, each kept below:
//
//   - The debt is dated at the server's time. A server whose time runs
//     ahead of its clock (TIME stepped back behind a generation's header,
//     or a cell stamped ahead) drains nothing until its clock catches
//     up; its ResetAfter says so (it is later than the debt's own drain
//     time). Such a debt is learned as the linear debt that drains to 0
//     exactly at that ResetAfter, which is >= the server's at every later
//     instant; one above Burst cannot be held, and a cache that may hold
//     the key lower empties itself.
//   - Replies learned out of order cannot lower anything (a feed only
//     raises), but one that is not learned can be overtaken by an older
//     one that is: an admission of a key the cache does not hold is
//     learned anyway while another call on its stripe of keys is in
//     flight (whose older reply may put the key there), and a call whose
//     cache was emptied while it was in flight learns nothing.
//   - A clock that steps back behind the cache's time
//     (LimiterConfig.Clock) ends the argument: the cache would date what
//     the server reports at its own later time and drain it late, and it
//     misses what is admitted meanwhile. So every time the clock is
//     behind, the cache is empty (a fresh sketch swapped in if anything
//     was learned since the last one), answers nothing and learns
//     nothing: every call asks the server, until the clock passes the
//     cache's time again.
//
// Constant memory: L x M cells whatever the number of keys, and a fixed
// array of in-flight counters. Safe for concurrent use; no goroutine.
// Answering and learning take no lock (but package sketch's re-base after
// 2^31 ms, 24.8 days, without a sweep: operations arriving meanwhile
// wait); emptying takes one.
type denyCache struct {
	sk      atomic.Pointer[sketch.Sketch]
	fed     atomic.Bool   // the current sketch has learned something
	epoch   atomic.Uint64 // bumped by every empty, whether it swaps or not
	mu      sync.Mutex    // serializes emptying
	pending [denyStripes]atomic.Int32
	lt      *localTime
	cfg     sketch.Config
	rate    float64 // units per second
	burst   float64
	slack   time.Duration // sweepSlack: added to the waits check answers
	learn   float64       // learnSlack: how far a learned debt may read above the server's
	excess  time.Duration // capExcess of burst: the drain a debt read at the cap may hide
	tokens  bool          // a limit counting tokens: the server's waits carry its rebase slack
	// rebaseAt is the server sketch's rebase threshold (ms), for the
	// slack the server adds to its waits (rebaseSlackBound).
	rebaseAt func() int64
}

// rebaseSlackBound bounds the ms the server adds to a wait of w ms so that it is
// never early across the rebases (every rebaseAt/2 ms at most) that can
// come before it ends (sketch.lua's rebaseSlack): at most
// 1 + (w + slack) / (rebaseAt/2), so 2 + w / (rebaseAt/2).
func rebaseSlackBound(w, rebaseAt int64) int64 {
	return 2 + max(w, 0)/max(rebaseAt/2, 1)
}

// denyStripes is the number of stripes of keys (by the server hash) whose
// server calls in flight the cache counts.
const denyStripes = 256

func newDenyCache(rate, burst float64, exact bool, cells uint32, hasher sketch.HasherFactory, seed uint64, lt *localTime, rebaseAt func() int64) (*denyCache, error) {
	d := &denyCache{lt: lt, rebaseAt: rebaseAt, rate: rate, burst: burst, slack: sweepSlack(rate, burst, exact), learn: learnSlack(burst, exact),
		excess: capExcess(burst, rate), tokens: !exact, cfg: sketch.Config{
			Levels: 4, CellsPerLevel: cells, Decay: decay.Linear(rate), Lo: 0, Hi: burst,
			Aggregator: sketch.Min, Hasher: hasher, Seed: seed ^ 0xD1E5CAC4E, Clock: lt.tb,
		}}
	sk, err := sketch.New(d.cfg)
	if err != nil {
		return nil, err
	}
	d.sk.Store(sk)
	return d, nil
}

// empty swaps in a fresh sketch if the current one has learned anything,
// and either way ends the epoch, so that no call in flight learns: its
// reply may predate an admission that was not learned (fed may be false
// because the cache learned nothing since it last emptied, not because
// nothing was admitted). fed is cleared before the swap, so a feed of the
// fresh sketch always leaves it set.
func (d *denyCache) empty() {
	d.epoch.Add(1)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fed.Load() {
		d.fed.Store(false)
		if sk, err := sketch.New(d.cfg); err == nil { // d.cfg was accepted once
			d.sk.Store(sk)
		}
	}
}

// behind reports whether the clock is behind the cache's time, and then
// empties the cache.
func (d *denyCache) behind() bool {
	if d.lt.lag() == 0 {
		return false
	}
	d.empty()
	return true
}

// call is one server call in flight for the cache: begin it before the
// request, observe its reply (or end it on a failure).
type call struct {
	n     *atomic.Int32 // the key's stripe's calls in flight
	epoch uint64        // the cache's epoch as the call began
}

// begin counts a server call for a key of server hash h in flight.
func (d *denyCache) begin(h uint64) call {
	c := call{n: &d.pending[h%denyStripes]}
	c.n.Add(1)
	c.epoch = d.epoch.Load()
	return c
}

// end ends a call that learned nothing (the server failed).
func (c call) end() { c.n.Add(-1) }

// observe ends c, learning that the server's debt for key is est units
// with ResetAfter resetMs (ms, the server's), just now: the key's cells
// are raised so their minimum is at least the learned debt (adding the
// difference to every cell; cells above the minimum rise too, which only
// over-estimates). hold is true for a denial (or any reply with
// PreCheck); an admission otherwise updates only a key the cache holds,
// or any key while another call on its stripe is in flight.
func (d *denyCache) observe(c call, key string, est float64, resetMs int64, hold bool) {
	defer c.end()
	if d.behind() {
		return
	}
	// The sketch before the epoch: empty bumps the epoch before it swaps,
	// so a sketch swapped in after c began is never the one written.
	sk := d.sk.Load()
	if d.epoch.Load() != c.epoch {
		return // emptied while the call was in flight
	}
	busy := c.n.Load() > 1 // before the Query: a racing feed ends after it writes
	q := sk.QueryString(key)
	if !hold && q == 0 && !busy {
		return
	}
	v, ok := d.dated(est, resetMs)
	if !ok {
		if q > 0 || busy {
			d.empty()
		}
		return
	}
	d.raise(sk, key, q, v)
}

// raise raises the key's minimum in sk from q (just read) to v: racing
// feeds of one key each read q before the other's write, and adding
// v - q each drove a hot key to Burst (audit 61: Every(13ms) x 7 waited
// 55 ms where the server said 10). TryUpdate adds v - q only while the
// minimum is still at most q (its limit v, exact under contention), so
// the racing feeds raise it to the larger v, not to their sum. After a
// few lost races it adds anyway: an over-estimate, the safe side.
func (d *denyCache) raise(sk *sketch.Sketch, key string, q, v float64) {
	limit := math.Nextafter(math.Nextafter(v, math.Inf(1)), math.Inf(1)) // q + (v-q) may round an ulp above v
	for range 4 {
		if q >= v {
			return
		}
		if sk.TryUpdateString(key, v-q, limit) {
			d.fed.Store(true)
			return
		}
		q = sk.QueryString(key)
	}
	if q < v {
		sk.UpdateString(key, v-q)
		d.fed.Store(true)
	}
}

// dated returns the debt to learn for a reply of est units whose server
// ResetAfter is resetMs: est itself when that ResetAfter is est's own
// linear drain time (the debt drains from now), else the linear debt
// that drains to 0 exactly at resetMs (the server's time is ahead of its
// clock); false when that is above Burst or there is no ResetAfter.
func (d *denyCache) dated(est float64, resetMs int64) (float64, bool) {
	if est <= 0 {
		return 0, true
	}
	if resetMs < 0 {
		return 0, false
	}
	// The server makes a ResetAfter later by 1 ms for each of its
	// rebases that can come before it (sketch.lua's rebaseSlack): that
	// much is not a lead of the server's time (audit 39: read as one, it
	// learned 3.3 tokens above the server's debt and denied a request
	// the server admits).
	own := int64(resetAfter(est, d.rate) / time.Millisecond)
	if est >= d.burst {
		// A debt at the cap is read capped at Burst while the server's
		// cells hold Burst rounded up to float32 and drain from there:
		// that drain is not a lead either (audit 60: for a Burst a
		// float32 does not hold, the abusive key at its cap was never
		// learned, and its reply emptied the cache).
		own += int64(d.excess / time.Millisecond)
	}
	if resetMs <= own+rebaseSlackBound(own, d.rebaseAt()) {
		return est, true
	}
	v := math.Nextafter(d.rate*float64(resetMs)/1000, math.Inf(1))
	if v > d.burst {
		return 0, false
	}
	return max(v, est), true
}

// check reports whether a request of n is certainly denied by the server,
// and then the local debt's RetryAfter and ResetAfter (never while the
// clock is behind the cache's time).
func (d *denyCache) check(key string, n float64) (denied bool, debt float64, retry, reset time.Duration) {
	if d.behind() {
		return false, 0, 0, 0
	}
	debt = d.sk.Load().QueryString(key)
	// Certainly denied only beyond what the learn's rounding and the
	// horizon sweeps may have added (d.learn, and d.slack of drain; see
	// learnSlack and sweepSlack): the server, with the same debt, may
	// admit.
	if debt-d.learn-float64(d.rate*d.slack.Seconds())+n <= d.burst { // rounded product: no FMA (docs/design.md)
		return false, debt, 0, 0
	}
	return true, debt, d.wait(retryAfter(debt, n, d.burst, d.rate), debt), d.wait(resetAfter(debt, d.rate), debt)
}

// wait is a wait w computed from the local debt, made never early
// against the server's: plus the drain a debt read at the cap hides
// (capExcess), the server's rebase slack for a limit counting tokens
// (the cache copies the server's debt, which its rebases may raise:
// audit 60), and the local sweeps' (sweepSlack).
func (d *denyCache) wait(w time.Duration, debt float64) time.Duration {
	if w <= 0 {
		return w
	}
	if debt >= d.burst {
		w += d.excess
	}
	if d.tokens {
		w += time.Duration(rebaseSlackBound(int64(w/time.Millisecond), d.rebaseAt())) * time.Millisecond
	}
	return withSlack(w, d.slack)
}

// capExcess is the time, rounded up to the ms, that rate per second
// takes to drain what a cell stored at the cap holds above burst: a
// sketch stores burst rounded up to float32 and reads it back capped at
// burst, so a debt read at the cap drains that much longer than the
// read says (0 when a float32 holds burst).
func capExcess(burst, rate float64) time.Duration {
	up := float64(atom.RoundUp(burst)) // what a cell stores at the cap
	if !(up > burst) || !(rate > 0) {
		return 0
	}
	return time.Duration(math.Ceil((up-burst)/rate*1000)) * time.Millisecond
}

// sweepSlack is what a local sketch's waits add so that they are never
// early across its horizon sweeps (and what the deny cache takes off a
// debt before it is certain of a denial): for a sketch counting in tokens
// (not exact: a decayed debt may be a fraction a float32 does not hold)
// whose full debt, burst at rate per second, takes D ms to drain, 1 ms
// per sweep the debt can meet, floor(D / core.SweepKeep) ms (0 below
// 2^29 ms, 6.2 days); else 0. A sweep re-stamps a cell older than
// core.SweepKeep with its value rounded up and stamped back by whole ms
// (never below the count), so it can leave up to 1 ms of drain above the
// linear drain a wait was computed from, one more at each sweep. A cell
// is first swept core.SweepKeep ms after its last write and sweeps start
// at least that far apart, so a debt of at most burst written at w, gone
// by w + D, meets at most floor(D / core.SweepKeep) of them.
func sweepSlack(rate, burst float64, exact bool) time.Duration {
	if exact {
		return 0
	}
	k := math.Floor(burst / rate * 1000 / float64(core.SweepKeep))
	if !(k >= 1) {
		return 0
	}
	return time.Duration(min(k, float64(math.MaxInt64/int64(time.Millisecond)))) * time.Millisecond
}

// learnSlack is how far above the server's debt a learned debt may be
// stored, in the cache's units: the cache stores the debt rounded up to
// float32 and stamped at the reply, so up to one float32 step of Burst
// (the debt is at most Burst) for a limiter counting tokens; 0 for exact
// units, whose debts a float32 holds.
func learnSlack(burst float64, exact bool) float64 {
	if exact {
		return 0
	}
	b := float32(burst)
	return float64(math.Nextafter32(b, float32(math.Inf(1))) - b)
}

// withSlack adds slack to a positive wait (0: none; -1: never).
func withSlack(d, slack time.Duration) time.Duration {
	if d > 0 {
		return d + slack
	}
	return d
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

// guessMs is a wait as whole ms, a search's first guess (-1 and 0: 0).
func guessMs(d time.Duration) int64 { return max(int64(d/time.Millisecond), 0) }

// resetAfter is the exact time for debt, draining at rate per second, to
// reach 0: rounded up to the ms, never early.
func resetAfter(debt, rate float64) time.Duration { return retryAfter(debt, 0, 0, rate) }
