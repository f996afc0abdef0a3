package core

import (
	"math"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/lfgrudge/grudge/internal/atom"
)

// Sketch is the lock-free decaying count-min sketch: L rows of M packed
// cells (float32 score + 32-bit age in one atomic word), each row aligned
// to and padded to whole cache lines.
//
// Create one with New; the zero Sketch is not usable. A Sketch is safe for
// concurrent use by any number of goroutines; no method takes a lock,
// starts a goroutine or allocates, except QueryDetailed, which allocates
// its result. Update, UpdateAndQuery and Query are lock-free; Query and a
// denied TryUpdate only read. The package documentation states the
// guarantees; [Sketch.TryUpdate] the protocol's contract.
type Sketch struct {
	// Everything but due is written once by New and only read after, so
	// these lines are shared read-only by all cores; the fields every
	// operation reads come first (the first two cache lines).
	cells     []atom.Cell // levels*stride cells; row l starts at l*stride, on a cache-line boundary
	rules     *atom.Rules // decay law and clamp bounds
	hasher    Hasher
	xxSeed    uint64    // the seed of the default hasher (XXH3), when xx
	xx        bool      // hasher is the default XXH3: sum64 calls it directly
	tb        *Timebase // the clock, its anchor and the high-water mark of time (shared by a rotator's generations)
	epoch     int64     // clock reading at New; stamps count ms from here, mod 2^32
	stride    int       // cells between row starts, a multiple of cellsPerLine
	levels    uint32
	m         uint32
	due       atomic.Int64            // when the next horizon sweep is due (horizon.go); written once per sweep
	low       atomic.Int64            // an operation at a time below low is stale (horizon.go, fresh); written once per sweep
	negative  atomic.Bool             // a negative delta has been applied: roll-backs only restore exactly (tryupdate.go, rollback); written once
	resets    atomic.Uint64           // Reset and snapshot loads so far: a Receipt from before one is void
	aggFunc   func([]float64) float64 // cfg.AggregateFunc; when non-nil it replaces agg (slow path)
	hi32      float32                 // Hi as cells store it (rules.Hi()): a stored score at Hi is never rolled back
	hiOver    bool                    // hi32 > cfg.Hi (a Hi no float32 holds, stored rounded up): every score read is capped at cfg.Hi (capped)
	hiCap     float64                 // cfg.Hi when hiOver, else +Inf: capped's bound
	cu        bool                    // Config.Conservative: every write goes through conservative.go
	final     bool                    // Config.FinalAdmission: a retry reads a held level unchanged since this call wrote it at its value before the call (commitConflict)
	conserved bool                    // SetConserved: a roll-back may always subtract its increment (tryupdate.go, rollback)
	minAgg    bool                    // the built-in Min aggregator: the aggregate is ValueN's result (aggregateOf)
	hooks     *testHooks              // nil except in tests (export_test.go)
	stripes   []stripe                // numStripes TryUpdate sequence stripes, one per cache line
	agg       Aggregator
	cfg       Config // normalized, as given to New
	bytes     int    // bytes allocated for cells and stripes

	// sweep is the rest of the horizon state (horizon.go), written only by
	// sweeps; on its own lines.
	_     [cacheLine]byte
	sweep sweeper
	_     [cacheLine]byte
}

// New returns a lock-free sketch for cfg, or an error naming the first
// invalid field (see Config.Normalize).
func New(cfg Config) (*Sketch, error) {
	s := new(Sketch)
	if err := s.Init(cfg); err != nil {
		return nil, err
	}
	return s, nil
}

// Init makes the zero Sketch s a sketch for cfg (New is new(Sketch) and
// Init; a face that holds the engine by value calls Init on it). It
// returns an error naming the first invalid field (see Config.Normalize)
// and leaves s unusable then. Init must not be called on a sketch in use.
func (s *Sketch) Init(cfg Config) error { return s.initAt(cfg, nil) }

// initAt is Init with the epoch at *epoch when epoch is not nil (a
// rotator's generation built by a promotion at that time, which must not
// read the clock: a read would move the shared high-water mark past the
// operation's time), at the clock's reading otherwise.
func (s *Sketch) initAt(cfg Config, epoch *int64) error {
	cfg, err := cfg.Normalize()
	if err != nil {
		return err
	}
	s.rules = atom.NewRules(cfg.Decay, cfg.Lo, cfg.Hi)
	s.hasher = cfg.Hasher(cfg.Seed)
	if IsNil(s.hasher) { // a typed nil too: its first hash would be a nil dereference (audit 140)
		return NilHasherErr("sketch", cfg.Seed)
	}
	if h, ok := s.hasher.(xxh3Hasher); ok {
		s.xx, s.xxSeed = true, uint64(h)
	}
	s.tb = NewTimebase(cfg.Clock)
	s.stride = rowStride(cfg.CellsPerLevel)
	s.levels = cfg.Levels
	s.m = cfg.CellsPerLevel
	s.agg = cfg.Aggregator
	s.aggFunc = cfg.AggregateFunc
	s.minAgg = cfg.Aggregator == Min && cfg.AggregateFunc == nil
	s.cfg = cfg
	var n int
	s.cells, n = allocRows(int(s.levels), s.stride)
	s.stripes = allocStripes()
	s.bytes = n + (numStripes+3)*cacheLine
	s.hi32 = float32(s.rules.Hi())
	s.hiOver = float64(s.hi32) > cfg.Hi
	s.hiCap = math.Inf(1)
	if s.hiOver {
		s.hiCap = cfg.Hi
	}
	s.cu = cfg.Conservative
	s.final = cfg.FinalAdmission
	if epoch != nil {
		s.epoch = *epoch
	} else {
		s.epoch = s.nowMillis()
	}
	s.low.Store(math.MinInt64)
	s.initHorizon(s.epoch)
	return nil
}

// aggregate combines the per-level scores v with the configured
// aggregator: the built-in one, or Config.AggregateFunc through
// CustomAggregate (v does not escape either way).
func (s *Sketch) aggregate(v []float64) float64 {
	if s.hiOver {
		return s.aggregateCapped(v)
	}
	if s.aggFunc != nil {
		return CustomAggregate(s.aggFunc, v)
	}
	return s.agg.Aggregate(v)
}

// aggregateOf is aggregate for values from Rules.ValueN, whose result
// lowest is their minimum: with the built-in Min aggregator that is the
// aggregate, with no second pass over v. It inlines.
func (s *Sketch) aggregateOf(v []float64, lowest float64) float64 {
	if s.minAgg {
		return s.capped(lowest)
	}
	return s.aggregate(v)
}

// capped is a score as the sketch reads it: at most cfg.Hi. Cells store
// scores rounded up to float32, so with a Hi that no float32 holds a
// score at the clamp is stored one float32 step above Hi (hi32); every
// read (aggregates, per-level scores, TryUpdate's decision) caps it back
// at Hi, which never reads below a key's true score (at most Hi, as the
// clamp makes it). It inlines: one compare with hiCap (+Inf when Hi is a
// float32).
func (s *Sketch) capped(v float64) float64 {
	if v > s.hiCap {
		return s.hiCap
	}
	return v
}

// aggregateCapped is aggregate over the level scores capped at Hi
// (capped), as QueryDetailed reports them. v is not modified.
//
//go:noinline
func (s *Sketch) aggregateCapped(v []float64) float64 {
	var c [MaxLevels]float64
	n := copy(c[:], v)
	for i := range c[:n] {
		c[i] = s.capped(c[i])
	}
	if s.aggFunc != nil {
		return CustomAggregate(s.aggFunc, c[:n])
	}
	// The Mean of capped levels can round one ulp above Hi.
	return s.capped(s.agg.Aggregate(c[:n]))
}

// Config returns the normalized configuration the sketch was built with.
func (s *Sketch) Config() Config { return s.cfg }

// Sizes reports the sketch's memory: Cells is the cell block as allocated
// (alignment and guard lines included), Total adds the stripes, the decay
// tables, the time high-water mark and the struct.
func (s *Sketch) Sizes() Sizes {
	cells := (len(s.cells) + 3*cellsPerLine) * int(unsafe.Sizeof(atom.Cell{}))
	return Sizes{
		Cells: cells,
		Total: s.bytes + int(unsafe.Sizeof(*s)) + s.rules.Bytes() + int(unsafe.Sizeof(Timebase{})),
	}
}

// nowMillis reads the clock through the Timebase's high-water mark.
func (s *Sketch) nowMillis() int64 { return s.tb.NowMillis() }

// ZeroSketch panics for an operation on a Sketch that Init never built
// (the zero sketch.Sketch). The keyed operations reach it from the hash
// (a zero Sketch has no hasher), off the default hasher's path; the
// others call built.
//
//go:noinline
func ZeroSketch() { panic("sketch: zero Sketch; use New") }

// built panics unless Init built s: the check of the operations that do
// not hash a key (Reset, Merge, the snapshots).
func (s *Sketch) built() {
	if s.tb == nil {
		ZeroSketch()
	}
}

// stamp converts a clock reading to a cell stamp: ms since epoch mod 2^32.
func (s *Sketch) stamp(ms int64) uint32 { return uint32(ms - s.epoch) }

// offsets fills off[:L] with the positions in s.cells of the key's cells,
// one per level, in level order.
func (s *Sketch) offsets(h uint64, off *[MaxLevels]int) {
	for l := uint32(0); l < s.levels; l++ {
		off[l] = int(l)*s.stride + int(Index(h, l, s.m))
	}
}

// cellsOf fills c[:L] with the key's cells, one per level, in level
// order, and returns c[:L]: each address computed once, so the loads and
// CASes that follow index nothing.
func (s *Sketch) cellsOf(h uint64, c *[MaxLevels]*atom.Cell) []*atom.Cell {
	cs := c[:s.levels]
	cells, stride, m := s.cells, s.stride, uint64(s.m)
	// Index(h, l, m), with g = h1 + l*h2 stepped rather than multiplied.
	g, h2 := uint32(h), uint32(h>>32)|1
	base := 0
	for l := range cs {
		cs[l] = &cells[base+int((uint64(g)*m)>>32)]
		base += stride
		g += h2
	}
	return cs
}

// CheckFinite panics if v is NaN or ±Inf. v-v is 0 for every finite v and
// NaN otherwise, so the hot path pays one subtraction and one compare.
func CheckFinite(op, name string, v float64) {
	if v-v != 0 {
		panicNotFinite(op, name, v)
	}
}

//go:noinline
func panicNotFinite(op, name string, v float64) {
	panic("sketch: " + op + " " + name + " must be finite; got " + formatFloat(v))
}

func formatFloat(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	}
	return "finite"
}

// Update adds delta to the key's score at every level: per cell, decay for
// the cell's age, add, clamp to [Lo, Hi], round up to float32, one CAS.
// It panics if delta is NaN or ±Inf, before touching any cell.
func (s *Sketch) Update(key []byte, delta float64) {
	CheckFinite("Update", "delta", delta)
	s.update(s.sum64(key), delta, s.nowMillis())
}

// UpdateString is Update for a string key, without allocating.
func (s *Sketch) UpdateString(key string, delta float64) {
	CheckFinite("Update", "delta", delta)
	s.update(s.sum64String(key), delta, s.nowMillis())
}

func (s *Sketch) update(h uint64, delta float64, ms int64) {
	if s.cu {
		s.cuAdd("Update", h, delta, ms)
		return
	}
	s.maintain(ms)
	var c [MaxLevels]*atom.Cell
	var w [MaxLevels]atom.Word
	cs := s.cellsOf(h, &c)
	// Load every cell before the first CAS: the loads are independent, so
	// their cache misses overlap instead of queueing behind each locked
	// CAS.
	if s.hooks != nil {
		s.hooks.call(s.hooks.load, 0)
	}
	for l, p := range cs {
		w[l] = p.Load()
	}
	if ms < s.low.Load() {
		s.reloadWords(cs, &w, &ms)
	}
	now := s.stamp(ms)
	// Compute every new word before the first CAS too: a locked
	// instruction keeps later loads (the decay tables) from passing it,
	// so interleaving compute and CAS would serialise L table lookups.
	var nw [MaxLevels]atom.Word
	s.rules.NextN(&w, uint32(len(cs)), now, delta, &nw)
	for l, p := range cs {
		// A write that changes nothing does not write: the cell held
		// w[l] at its load, inside this call, and the add leaves it as
		// it is (a score pinned at Hi or Lo at the same stamp), so the
		// add takes effect at that load (docs/design.md, "No write when
		// nothing changes"). Many cores on a saturated key then share
		// its lines instead of passing them round.
		if nw[l] == w[l] {
			if s.hooks != nil {
				s.hooks.call(s.hooks.skip, uint32(l))
			}
			continue
		}
		s.markNegative(delta) // before the first write that changes a cell
		if p.CompareAndSwap(w[l], nw[l]) {
			continue
		}
		// Lost a race: the key is hot. Back off so the winner keeps the
		// line for a few operations (atom.ContentionBackoff), then
		// CAS-loop on a fresh word. The words computed for the remaining
		// cells are likely stale too, and a failed CAS costs a cache-line
		// transfer, so they go straight to the CAS loop on fresh words.
		s.addLoop(p, &ms, delta, true)
		for _, q := range cs[l+1:] {
			s.addLoop(q, &ms, delta, false)
		}
		return
	}
}

// The operations load their L words inline (a call here would cost more
// than the check), then check the time against the horizon:
//
//	for l, p := range cs { w[l] = p.Load() }
//	if ms < s.low.Load() { s.reloadWords(cs, &w, &ms) }
//
// See fresh (horizon.go) for why a stale time must not be used.

// reloadWords is the stale path of an operation's loads: a fresh time,
// then the loads again, until the time is fresh after them.
//
//go:noinline
func (s *Sketch) reloadWords(cs []*atom.Cell, w *[MaxLevels]atom.Word, ms *int64) {
	for !s.fresh(ms) {
		for l, p := range cs {
			w[l] = p.Load()
		}
	}
}

// addLoop adds delta to c by a CAS loop for an operation at *ms: load,
// compute, CAS until it wins. With lost set (the caller has just lost a
// CAS race on c) it backs off one round first, so the winner keeps the
// line a while; after each lost round it backs off again. Every word it
// loads is checked against the horizon (fresh), so a stale *ms is moved
// to the clock's reading rather than used on a re-stamped word. It
// returns the word it replaced and the word it stored; when the add
// leaves the freshly loaded word as it is, it stores nothing and returns
// that word twice.
func (s *Sketch) addLoop(c *atom.Cell, ms *int64, delta float64, lost bool) (old, nw atom.Word) {
	bo := atom.ContentionBackoff()
	for {
		if lost {
			atom.Backoff(&bo)
		}
		lost = true
		old = c.Load()
		s.fresh(ms)
		nw = s.rules.Next(old, s.stamp(*ms), delta)
		if nw == old || c.CompareAndSwap(old, nw) {
			return old, nw
		}
	}
}

// UpdateAndQuery adds delta as Update does and returns the aggregate of the
// scores it stored. It panics if delta is NaN or ±Inf.
func (s *Sketch) UpdateAndQuery(key []byte, delta float64) float64 {
	CheckFinite("UpdateAndQuery", "delta", delta)
	return s.updateAndQuery(s.sum64(key), delta, s.nowMillis())
}

// UpdateAndQueryString is UpdateAndQuery for a string key, without
// allocating.
func (s *Sketch) UpdateAndQueryString(key string, delta float64) float64 {
	CheckFinite("UpdateAndQuery", "delta", delta)
	return s.updateAndQuery(s.sum64String(key), delta, s.nowMillis())
}

func (s *Sketch) updateAndQuery(h uint64, delta float64, ms int64) float64 {
	if s.cu {
		return s.cuAdd("UpdateAndQuery", h, delta, ms)
	}
	s.maintain(ms)
	var c [MaxLevels]*atom.Cell
	var w, nw [MaxLevels]atom.Word
	cs := s.cellsOf(h, &c)
	if s.hooks != nil {
		s.hooks.call(s.hooks.load, 0)
	}
	for l, p := range cs {
		w[l] = p.Load()
	}
	if ms < s.low.Load() {
		s.reloadWords(cs, &w, &ms)
	}
	// As update: every new word before the first CAS, no write when
	// nothing changes, and after a lost race a CAS loop on fresh words
	// for the rest.
	s.rules.NextN(&w, uint32(len(cs)), s.stamp(ms), delta, &nw)
	for l, p := range cs {
		if nw[l] == w[l] {
			if s.hooks != nil {
				s.hooks.call(s.hooks.skip, uint32(l))
			}
			continue
		}
		s.markNegative(delta) // before the first write that changes a cell
		if p.CompareAndSwap(w[l], nw[l]) {
			continue
		}
		_, nw[l] = s.addLoop(p, &ms, delta, true)
		for j, q := range cs[l+1:] {
			_, nw[l+1+j] = s.addLoop(q, &ms, delta, false)
		}
		break
	}
	if s.minAgg {
		// The built-in Min over the stored scores as Aggregate takes it
		// (the first of equal scores), in float32, whose order float64
		// keeps: no value array and no call.
		r := nw[0].Score()
		for _, x := range nw[1:len(cs)] {
			if f := x.Score(); f < r {
				r = f
			}
		}
		return s.capped(float64(r))
	}
	var v [MaxLevels]float64
	for l := range cs {
		v[l] = float64(nw[l].Score())
	}
	return s.aggregate(v[:len(cs)])
}

// Query returns the key's aggregated score, decayed to now. It only reads:
// it loads the L words and decays in registers, so any number of cores can
// query a hot key without moving its cache lines.
func (s *Sketch) Query(key []byte) float64 { return s.query(s.sum64(key), s.nowMillis()) }

// QueryString is Query for a string key, without allocating.
func (s *Sketch) QueryString(key string) float64 {
	return s.query(s.sum64String(key), s.nowMillis())
}

func (s *Sketch) query(h uint64, ms int64) float64 {
	s.maintain(ms)
	var c [MaxLevels]*atom.Cell
	var w [MaxLevels]atom.Word
	var v [MaxLevels]float64
	cs := s.cellsOf(h, &c)
	if s.hooks != nil {
		s.hooks.call(s.hooks.load, 0)
	}
	for l, p := range cs {
		w[l] = p.Load()
	}
	if ms < s.low.Load() {
		s.reloadWords(cs, &w, &ms)
	}
	now := s.stamp(ms)
	lowest := s.rules.ValueN(&w, uint32(len(cs)), now, &v) // one decay dispatch per key, as update does
	return s.aggregateOf(v[:len(cs)], lowest)
}

// Outlook is a key's words loaded once, at the sketch's time then: the
// estimate they give (Value, what Query reads) and the waits after which
// TryUpdate would admit (FitsIn), all from the same load. It only reads.
type Outlook struct {
	s   *Sketch
	w   [MaxLevels]atom.Word
	now uint32
}

// OutlookString loads key's words at the sketch's time now.
func (s *Sketch) OutlookString(key string) Outlook {
	return s.outlook(s.sum64String(key), s.nowMillis())
}

func (s *Sketch) outlook(h uint64, ms int64) Outlook {
	s.maintain(ms)
	o := Outlook{s: s}
	var c [MaxLevels]*atom.Cell
	cs := s.cellsOf(h, &c)
	for l, p := range cs {
		o.w[l] = p.Load()
	}
	if ms < s.low.Load() {
		s.reloadWords(cs, &o.w, &ms)
	}
	o.now = s.stamp(ms)
	return o
}

// Value is the key's estimate at the load: what Query read then.
func (o *Outlook) Value() float64 { return o.after(0) }

// after is the estimate x >= 0 ms after the load, from the loaded words:
// each decayed x ms further (atom.Rules.ValueLater, the arithmetic every
// read uses) and aggregated capped at Hi, as every read is.
func (o *Outlook) after(x int64) float64 {
	s := o.s
	var v [MaxLevels]float64
	lowest := math.Inf(1)
	for l := range s.levels {
		v[l] = s.rules.ValueLater(o.w[l], o.now, x)
		if v[l] < lowest {
			lowest = v[l]
		}
	}
	return s.aggregateOf(v[:s.levels], lowest)
}

// FitsIn returns the least whole number of ms x >= 0 after the load at
// which TryUpdate(key, delta, limit) would admit, were nothing written to
// the key's cells in between: the estimate x ms later plus delta is <=
// limit. It returns -1 when no x up to 2^62 ms does (delta above limit
// less the lowest score the law reaches). guess, a closed form's
// estimate of x, saves steps; any value gives the same answer.
//
// So a wait computed by it is exact where one computed by draining
// Value further is not: that value is already rounded, and rounds again,
// so the two can differ from the cell's own decay by a float64 ulp either
// way (docs/distributed.md, "The LocalFallback"). The answer is the least
// such x when the estimate never grows with time (a decaying law over
// scores >= 0, as a limiter's Linear on [0, Burst]); for other laws it is
// an x that fits with x - 1 not fitting. It does not foresee the horizon
// sweep, which may re-stamp a cell older than SweepKeep with its value
// rounded up (a caller adds the sweep's slack), nor writes made after the
// load.
func (o *Outlook) FitsIn(delta, limit float64, guess int64) int64 {
	return leastFit(func(x int64) bool { return o.after(x)+delta <= limit }, min(max(guess, 0), maxFitWait))
}

// RemainsIn is FitsIn for the Remaining a limiter reports: the least
// whole number of ms x >= 0 after the load at which limit less the
// estimate x ms later is at least n, computed as that Remaining is (a
// subtraction rounds otherwise than FitsIn's sum: 12.7 - 7.7000000000000002
// is below 5 where 7.7000000000000002 + 5 is not above 12.7). -1 when no x
// up to 2^62 ms does.
func (o *Outlook) RemainsIn(n, limit float64, guess int64) int64 {
	return leastFit(func(x int64) bool { return limit-o.after(x) >= n }, min(max(guess, 0), maxFitWait))
}

// maxFitWait bounds FitsIn's search.
const maxFitWait = int64(1) << 62

// leastFit returns the least x in [0, maxFitWait] with fits(x), fits
// monotone (false, then true), starting from the estimate g; -1 when
// fits(maxFitWait) is false. From g it gallops (steps of 1, 2, 4, ...)
// to a bracket, then bisects it: two calls when g is right.
func leastFit(fits func(int64) bool, g int64) int64 {
	lo, hi := int64(-1), g // fits(lo) false (-1 stands for "before 0"), fits(hi) true
	if fits(g) {
		for step := int64(1); hi > 0; step *= 2 {
			x := max(hi-step, 0)
			if !fits(x) {
				lo = x
				break
			}
			hi = x
		}
	} else {
		lo = g
		for step := int64(1); ; step *= 2 {
			if step >= maxFitWait-lo {
				if !fits(maxFitWait) {
					return -1
				}
				hi = maxFitWait
				break
			}
			if x := lo + step; fits(x) {
				hi = x
				break
			} else {
				lo = x
			}
		}
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if fits(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// Detailed is QueryDetailed: the aggregate of key's cells, decayed to
// now, and each level's cell as mk builds it from the level, the cell's
// index in its row and its decayed score (each face builds its own
// per-level type). It only reads; it allocates the slice of levels.
func Detailed[L any](s *Sketch, key []byte, mk func(level, index uint32, score float64) L) (float64, []L) {
	return detailed(s, s.sum64(key), s.nowMillis(), mk)
}

// DetailedAt is Detailed at time t for a string key.
func DetailedAt[L any](s *Sketch, t time.Time, key string, mk func(level, index uint32, score float64) L) (float64, []L) {
	return detailed(s, s.sum64String(key), s.tb.Millis(t), mk)
}

func detailed[L any](s *Sketch, h uint64, ms int64, mk func(level, index uint32, score float64) L) (float64, []L) {
	s.maintain(ms)
	var off [MaxLevels]int
	var v [MaxLevels]float64
	s.offsets(h, &off)
	levels := make([]L, s.levels)
	for l := range s.levels {
		// One level at a time: load, check the time (fresh), decay.
		w := s.cells[off[l]].Load()
		s.fresh(&ms)
		v[l] = s.capped(s.rules.Value(w, s.stamp(ms)))
		levels[l] = mk(l, uint32(off[l]-int(l)*s.stride), v[l])
	}
	return s.aggregate(v[:s.levels]), levels
}

// Reset sets every cell to score 0. It is not atomic: an operation that
// runs concurrently may see some cells reset and others not, and its
// writes may survive the reset. Call it on a sketch nobody else is using.
// It does not allocate, but costs an atomic store per cell (milliseconds
// at the default size). The epoch and seed stay as they were.
func (s *Sketch) Reset() {
	s.built()
	ms := s.nowMillis()
	s.sweep.mu.Lock()
	defer s.sweep.mu.Unlock()
	w := atom.Pack(0, s.stamp(ms))
	for i := range s.cells {
		s.cells[i].Store(w)
	}
	s.resets.Add(1)
	s.sweep.active = false
	s.initHorizon(ms)
}
