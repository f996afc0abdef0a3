package core

import (
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/lfgrudge/grudge/internal/atom"
)

// Rotator is a sketch that forgets: N generations of Sketch under
// distinct seeds, read from the oldest (the primary), written to all, the
// oldest retired every Period. It has the methods of Sketch plus
// Close, so it replaces grudge's rotator without other changes.
//
// Create one with New; the zero Rotator is not usable. A Rotator is safe
// for concurrent use by any number of goroutines. It starts no goroutine
// and takes no lock (but where N x Period >= 2^31 ms, package sketch's
// re-base after that long without a sweep, the package doc says): rotation
// happens on access, performed by the one operation that wins the
// promotion (see the package doc). Every operation reads the clock once,
// through the one Timebase its generations share, for decay and the
// rotation deadline alike. Update, Query, UpdateAndQuery, TryUpdate and
// their string twins do not allocate, except the one operation per Period
// that performs a promotion and allocates the new generation.
//
// Each generation is linearizable as Sketch is; an operation that
// races a promotion may act on the generation set of just before it (the
// package documentation), except [Rotator.TryUpdate], which is exact
// across promotions (docs/design.md, "TryUpdate across promotions").
type Rotator struct {
	// cur is the current generation set; replaced (never mutated) by the
	// operation that claims its promotion.
	cur      atomic.Pointer[genSet]
	tb       *Timebase     // the one time scale and high-water mark of every generation
	periodMs int64         // cfg.Period in ms, >= 1
	cfg      RotatorConfig // normalized, as given to NewRotator

	// Counters, written only by the operation performing a promotion.
	promotions atomic.Uint64
	periods    atomic.Uint64
	created    atomic.Uint64
}

// genSet is an immutable set of live generations. Only claimed changes,
// once, from false to true.
type genSet struct {
	// gens holds the N live generations, oldest first: gens[0] is the
	// primary. Never modified after the set is published.
	gens []*Sketch
	// deadline is the clock reading (ms) at which gens[0] retires. Always
	// creation time + a whole number of periods.
	deadline int64
	// endless marks a deadline that saturated at MaxInt64 ms (the true
	// one lies past int64 time): it is never crossed. A deadline that is
	// exactly MaxInt64 on the grid is crossed as any other (audit 100).
	endless bool
	// next is the creation counter of the next generation to build; it
	// picks that generation's seed (GenerationSeed).
	next uint64
	// claimed is set by the one operation that promotes this set.
	claimed atomic.Bool
	// seed is the base seed a decoded set was built under (decode only).
	seed uint64
}

// Stats counts what the rotator has done since New. Counters only grow.
type Stats struct {
	// Promotions is the number of generation-set swaps: one per
	// operation that found the deadline passed and won the claim.
	Promotions uint64
	// Periods is the number of whole periods the promotions accounted
	// for: a clock jump of k periods counts k in one promotion.
	Periods uint64
	// Allocated is the number of sketches built, the N built by New
	// included. Retired generations are never reused; the garbage
	// collector frees them.
	Allocated uint64
}

// NewRotator returns a rotator for cfg, with all N generations built and
// empty, and the first rotation due one Period after the clock's current
// reading. It returns an error naming the first invalid field (see
// RotatorConfig.Normalize).
func NewRotator(cfg RotatorConfig) (*Rotator, error) {
	r := new(Rotator)
	if err := r.Init(cfg); err != nil {
		return nil, err
	}
	return r, nil
}

// Init makes the zero Rotator r a rotator for cfg (NewRotator is
// new(Rotator) and Init; a face that holds the engine by value calls Init
// on it). It must not be called on a rotator in use.
func (r *Rotator) Init(cfg RotatorConfig) error {
	cfg, err := cfg.Normalize()
	if err != nil {
		return err
	}
	r.tb, r.periodMs, r.cfg = NewTimebase(cfg.Sketch.Clock), PeriodMillis(cfg.Period), cfg
	n := int(cfg.Generations)
	gs := &genSet{gens: make([]*Sketch, n)}
	for i := range gs.gens {
		// The first generations are built here, so a configuration the
		// sketch refuses only when built (a HasherFactory returning nil)
		// is an error, not the panic of a later promotion's build.
		if gs.gens[i], err = r.buildErr(r.cfg.Sketch.Seed, gs.next, nil); err != nil {
			return err
		}
		gs.next++
	}
	gs.deadline, gs.endless = deadlineAfter(r.tb.NowMillis(), r.periodMs)
	r.cur.Store(gs)
	return nil
}

// GenSet is a view of a rotator's current generation set, for tests: the
// live generations oldest first (Gens[0] is the primary), the rotation
// deadline (ms on the rotator's clock) and the creation counter of the
// next generation to build.
type GenSet struct {
	Gens     []*Sketch
	Deadline int64
	Next     uint64
}

// Current returns the current generation set. Its Gens must not be
// modified.
func (r *Rotator) Current() GenSet {
	r.built()
	gs := r.cur.Load()
	return GenSet{Gens: gs.gens, Deadline: gs.deadline, Next: gs.next}
}

// SetManual turns rotation on access off, as RotatorConfig.Manual does,
// on a rotator nobody else uses yet: grudge's ticker-driven rotator
// builds its face with rotator.New, then calls it.
func (r *Rotator) SetManual() { r.cfg.Manual = true }

// buildSeeded returns a fresh, empty generation hashing under the seed
// of creation counter gen from base seed base, with its epoch at *epoch
// when epoch is not nil (a promotion's time: see Sketch.initAt), at the
// clock's reading otherwise.
func (r *Rotator) buildSeeded(base, gen uint64, epoch *int64) *Sketch {
	s, err := r.buildErr(base, gen, epoch)
	if err != nil {
		// c is cfg.Sketch, validated by New, and Init built the first
		// generations with it; only the seed differs (a HasherFactory
		// that returns nil for some seeds only).
		panic("rotator: building a generation failed: " + err.Error())
	}
	return s
}

// buildErr is buildSeeded returning the sketch's error instead of
// panicking.
func (r *Rotator) buildErr(base, gen uint64, epoch *int64) (*Sketch, error) {
	c := r.cfg.Sketch
	c.Clock = r.tb // one time scale for every generation
	c.Seed = GenerationSeed(base, gen)
	s := new(Sketch)
	if err := s.initAt(c, epoch); err != nil {
		return nil, err
	}
	r.created.Add(1)
	return s, nil
}

// acquire returns the generation set to operate on and the time of the
// operation: one clock read, and a promotion when the deadline has passed.
func (r *Rotator) acquire() (*genSet, time.Time) {
	r.built()
	return r.settle(r.cur.Load(), r.tb.NowMillis())
}

// ZeroRotator panics for an operation on a Rotator that Init never built
// (the zero rotator.Rotator).
//
//go:noinline
func ZeroRotator() { panic("rotator: zero Rotator; use New") }

// built panics unless Init built r. Every operation but Close, Config
// and Stats (which read only counters and a copy) calls it first.
func (r *Rotator) built() {
	if r.tb == nil {
		ZeroRotator()
	}
}

// Settle brings rotation up to date at the clock's reading, as the start
// of every operation does, without a key: no hash, no aggregate, no cell
// read (the root package's Rotations, which grudge answers from a
// counter).
func (r *Rotator) Settle() { r.acquire() }

// settle returns the set to operate on at time now (promoting gs when its
// deadline has passed) and now as the Timebase's time.Time, which every
// generation converts back without reading the clock again.
func (r *Rotator) settle(gs *genSet, now int64) (*genSet, time.Time) {
	// A deadline saturated at MaxInt64 ms (the end of int64 time) is
	// never crossed: a clock that reads it would otherwise promote for
	// ever, each successor's deadline saturating again (audit 99).
	for now >= gs.deadline && !gs.endless && !r.cfg.Manual {
		gs = r.promote(gs, now)
	}
	return gs, r.tb.Time(now)
}

// Config returns the normalized configuration: defaults filled in, Clock
// nil if it was nil, Sketch.Seed the base seed.
func (r *Rotator) Config() RotatorConfig { return r.cfg }

// Sizes returns the sum of the live generations' sizes, plus the rotator's
// own structs in Total. A retired generation still referenced by an
// operation in flight is not counted; it is garbage once that operation
// returns.
func (r *Rotator) Sizes() Sizes {
	r.built()
	gs := r.cur.Load()
	var sz Sizes
	for _, s := range gs.gens {
		g := s.Sizes()
		sz.Cells += g.Cells
		sz.Total += g.Total
	}
	sz.Total += int(unsafe.Sizeof(*r)) + int(unsafe.Sizeof(*gs)) + len(gs.gens)*int(unsafe.Sizeof(gs.gens[0]))
	return sz
}

// Stats returns the rotation counters. Each counter is read atomically;
// the three together are not a snapshot.
func (r *Rotator) Stats() Stats {
	return Stats{
		Promotions: r.promotions.Load(),
		Periods:    r.periods.Load(),
		Allocated:  r.created.Load(),
	}
}

// Close does nothing and may be called any number of times: the rotator
// has no goroutine or ticker to stop. It exists so that code written for
// grudge's rotator (defer r.Close()) compiles unchanged. The rotator
// stays usable after Close.
func (r *Rotator) Close() {}

// Update adds delta to the key's score in every generation, at one time.
// It panics if delta is NaN or ±Inf, before touching any cell.
func (r *Rotator) Update(key []byte, delta float64) {
	gs, t := r.acquire()
	r.update(gs, t, bytesView(key), delta)
}

// UpdateString is Update for a string key, without allocating.
func (r *Rotator) UpdateString(key string, delta float64) {
	gs, t := r.acquire()
	r.update(gs, t, key, delta)
}

// update adds delta to key in every generation of gs at t, through the
// hashes r.hashed prefetched when Config.Prefetch is on. The first
// generation's check panics on a non-finite delta before any cell is
// written.
func (r *Rotator) update(gs *genSet, t time.Time, key string, delta float64) {
	CheckFinite("Update", "delta", delta)
	var buf [maxInlineGens]Hashed
	ks := r.hashed(gs, key, &buf)
	ms := r.tb.Millis(t) // once: every generation at the same time
	for i := range gs.gens {
		updateGen(gs, i, ks, ms, key, delta)
	}
}

// updateAndQuery is update returning the primary's aggregate after its
// update.
func (r *Rotator) updateAndQuery(gs *genSet, t time.Time, key string, delta float64) float64 {
	CheckFinite("UpdateAndQuery", "delta", delta)
	var buf [maxInlineGens]Hashed
	ks := r.hashed(gs, key, &buf)
	ms := r.tb.Millis(t) // once: every generation at the same time
	p := gs.gens[0]
	var v float64
	if ks != nil {
		v = p.updateAndQuery(p.mine("UpdateAndQuery", ks[0]), delta, ms)
	} else {
		v = p.updateAndQuery(p.sum64String(key), delta, ms)
	}
	for i := 1; i < len(gs.gens); i++ {
		updateGen(gs, i, ks, ms, key, delta)
	}
	return v
}

// Query returns the key's score in the primary (oldest) generation.
func (r *Rotator) Query(key []byte) float64 {
	gs, t := r.acquire()
	return gs.gens[0].QueryAt(t, key)
}

// QueryString is Query for a string key, without allocating.
func (r *Rotator) QueryString(key string) float64 {
	gs, t := r.acquire()
	return gs.gens[0].QueryStringAt(t, key)
}

// UpdateAndQuery adds delta as Update does and returns the primary's
// aggregate after its update. It panics if delta is NaN or ±Inf.
func (r *Rotator) UpdateAndQuery(key []byte, delta float64) float64 {
	gs, t := r.acquire()
	return r.updateAndQuery(gs, t, bytesView(key), delta)
}

// UpdateAndQueryString is UpdateAndQuery for a string key, without
// allocating.
func (r *Rotator) UpdateAndQueryString(key string, delta float64) float64 {
	gs, t := r.acquire()
	return r.updateAndQuery(gs, t, key, delta)
}

// TryUpdate adds delta to the key's score in every generation only if
// the primary's aggregate plus delta is at most limit, and reports
// whether it did; the decision is the primary's exact
// Sketch.TryUpdate (any finite limit, above Hi too). It stays exact
// across promotions: an admission holds its stripe of the primary until
// the increment is in every younger generation, and a promotion closes
// the primary's stripes before it publishes the new set, so the new
// primary holds every admission of the old one before it decides
// anything; a call that finds the primary retired decides again on the
// new set. A denial writes nothing, except as Sketch.TryUpdate's does
// after a commit conflict (a positive increment it could not roll back
// stays, an over-estimate). It panics if delta or limit is NaN or ±Inf.
func (r *Rotator) TryUpdate(key []byte, delta, limit float64) bool {
	return r.tryUpdate(nil, bytesView(key), delta, limit, nil, nil)
}

// TryUpdateString is TryUpdate for a string key, without allocating.
func (r *Rotator) TryUpdateString(key string, delta, limit float64) bool {
	return r.tryUpdate(nil, key, delta, limit, nil, nil)
}

// bytesView returns b's bytes as a string without copying. The sketches
// only hash their keys (a read), and hash both forms alike.
func bytesView(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// maxInlineGens is how many generations' hashed keys an operation keeps
// on the stack; with Config.Prefetch, the generations beyond it hash the
// key themselves, so no operation allocates.
const maxInlineGens = 4

// hashed returns nil without Config.Prefetch: the generations then hash
// the key themselves, each when it acts. With it, it hashes key for the
// first min(N, maxInlineGens) generations of gs, oldest first, and
// prefetches each generation's cells as soon as it has their hash, so
// the cache misses of those generations are in flight together, and the
// younger generations' hashing runs under the primary's misses, before
// any generation is read or written. It returns the hashes in buf.
func (r *Rotator) hashed(gs *genSet, key string, buf *[maxInlineGens]Hashed) []Hashed {
	if !r.cfg.Prefetch {
		return nil // inlined: the default path makes no call
	}
	return prefetchAll(gs, key, buf)
}

// prefetchAll is hashed with Config.Prefetch on.
func prefetchAll(gs *genSet, key string, buf *[maxInlineGens]Hashed) []Hashed {
	ks := buf[:min(len(gs.gens), len(buf))]
	for i := range ks {
		s := gs.gens[i]
		ks[i] = s.HashString(key)
		s.Prefetch(ks[i])
	}
	return ks
}

// updateGen is Update at ms on generation i of gs, through its hash in ks
// when hashed made one. ms is the operation's one time, converted once:
// converting t again per generation could land later (the high-water
// mark moved meanwhile), and a younger generation written later than the
// primary decided over-counts once it is promoted (audit22). The caller
// has checked delta.
func updateGen(gs *genSet, i int, ks []Hashed, ms int64, key string, delta float64) {
	s := gs.gens[i]
	if i < len(ks) {
		s.update(s.mine("Update", ks[i]), delta, ms)
	} else {
		s.update(s.sum64String(key), delta, ms)
	}
}

// tryUpdate is TryUpdate at *at (nil: the clock). When res is not nil
// and the call is admitted, it records every generation's receipt there.
// When after is not nil it sets *after to the key's estimate in the
// primary right after the call: for an admission, the words the call
// left (Sketch.Reserved: none of a later call's), for a denial a read
// of the primary at the call's time.
func (r *Rotator) tryUpdate(at *time.Time, key string, delta, limit float64, res *Reservation, after *float64) bool {
	CheckTry(delta, limit)
	var keys [maxInlineGens]Hashed
	bo := atom.ContentionBackoff()
	for {
		var gs *genSet
		var t time.Time
		if at == nil {
			gs, t = r.acquire()
		} else {
			gs, t = r.acquireAt(*at)
		}
		// With Config.Prefetch, every generation's cells are prefetched
		// before the primary decides, so that an admission finds the
		// younger ones arriving; a denial pays their hashing and
		// prefetch for nothing. Without it, the younger generations are
		// hashed only once the primary has admitted.
		p := gs.gens[0]
		ks := r.hashed(gs, key, &keys)
		var h uint64
		if ks != nil {
			h = p.mine("TryUpdate", ks[0])
		} else {
			h = p.sum64String(key)
		}
		var rc Receipt
		var rcp *Receipt
		if res != nil || after != nil {
			rcp = &rc
		}
		ms := p.tb.Millis(t)
		ts, st := p.tryHold(h, delta, limit, ms, rcp, true)
		switch ts {
		case tryDenied:
			// The primary's denial, read before it retired: nothing
			// written.
			if after != nil {
				*after = p.query(h, ms) // the key's hash and time, as decided
			}
			return false
		case tryRetired:
			// A promotion closed the primary: it is publishing the
			// next set, whose primary holds every admission of this one.
			bo.Spin()
			continue
		}
		r.addYounger(gs, st, ms, key, ks, delta, rc, res, after)
		return true
	}
}

// addYounger is the rest of an admitted TryUpdate: with after, it reads
// the primary's estimate as the admission left it (Reserved); it adds
// delta to every younger generation of gs at ms, the time the primary
// decided at; then it releases st, the primary's stripe the admission
// holds (nil: none held), even if a custom decay law or aggregator
// panics in any of those steps. With res, it records every generation's
// receipt there, rc the primary's.
func (r *Rotator) addYounger(gs *genSet, st *stripe, ms int64, key string, ks []Hashed, delta float64, rc Receipt, res *Reservation, after *float64) {
	if st != nil {
		defer atom.Release(&st.seq)
	}
	if after != nil {
		_, *after = gs.gens[0].Reserved(&rc)
	}
	if res == nil {
		for i := 1; i < len(gs.gens); i++ {
			updateGen(gs, i, ks, ms, key, delta)
		}
		return
	}
	*res = Reservation{gs: gs}
	if n := len(gs.gens) - len(res.first); n > 0 {
		res.rest = make([]Receipt, n)
	}
	*res.rc(0) = rc
	for i := 1; i < len(gs.gens); i++ {
		if s := gs.gens[i]; i < len(ks) {
			*res.rc(i) = s.add(s.mine("Add", ks[i]), delta, ms)
		} else {
			*res.rc(i) = s.add(s.sum64String(key), delta, ms)
		}
	}
}

// RotatorDetailed is Detailed on the primary (oldest) generation: its
// per-level view of the key. It allocates the slice of levels.
func RotatorDetailed[L any](r *Rotator, key []byte, mk func(level, index uint32, score float64) L) (float64, []L) {
	gs, t := r.acquire()
	s := gs.gens[0]
	return detailed(s, s.sum64(key), s.tb.Millis(t), mk)
}

// PeriodMillis is a Period in the whole ms the rotator counts, rounded
// up, so that a generation is the primary for at least Period (a Period
// of 2.9 ms was cut to 2: audit 40). It divides before rounding up: p +
// 999999 ns wrapped for a Period within a millisecond of MaxInt64, and
// the negative period it gave was hidden by a saturating add that
// overflowed on it.
func PeriodMillis(p time.Duration) int64 {
	ms := int64(p / time.Millisecond)
	if p%time.Millisecond > 0 {
		ms++
	}
	return ms
}
