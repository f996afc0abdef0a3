package ref

import (
	"fmt"
	"math"
	"sync"
	"time"
	"unsafe"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/conv"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/internal/law"
	"github.com/lfgrudge/grudge/sketch"
)

// Compile-time check that the reference is a drop-in Scorer.
var _ sketch.Scorer = (*Sketch)(nil)

// cell is one counter, laid out as grudge lays it out: 24 bytes with the
// lock.
//
// Invariants, whenever mu is not held: score is finite (or an infinite
// bound reached by overflow, see the package doc) and lies in [Lo, Hi];
// last never decreases. score is the value as of time last, not yet
// decayed to the present.
type cell struct {
	mu    sync.Mutex // guards score and last
	score float64    // raw score as of last
	last  int64      // ms of the last decay step; the sketch's creation time until first decayed
}

// wallClock is the default clock when Config.Clock is nil: wall-clock
// milliseconds, as grudge reads time.Now().UnixMilli().
type wallClock struct{}

func (wallClock) NowMillis() int64 { return time.Now().UnixMilli() }

// Sketch is the mutex reference: L rows of M cells, each cell a float64
// score, an int64 millisecond timestamp and a sync.Mutex, as grudge has it.
// It maps keys to cells exactly as sketch.Sketch does (see sketch.Index),
// so the two can be compared cell for cell.
//
// Use it as the oracle in differential tests and as the baseline in
// benchmarks; production code should prefer the lock-free sketch.Sketch.
// The zero value is not usable: build one with New. All methods are safe
// for concurrent use. Update, Query, UpdateAndQuery and QueryDetailed are
// linearizable per cell, not per key (they lock one cell at a time);
// TryUpdate is atomic with respect to every other operation on the key's
// L cells.
type Sketch struct {
	cfg    sketch.Config           // normalized; Clock nil when the caller left it nil
	hasher core.Hasher             // cfg.Hasher(cfg.Seed)
	tb     *core.Timebase          // cfg.Clock (or wallClock{}) and the high-water mark of time
	decay  decay.Decay             // cfg.Decay, never nil
	custom bool                    // decay is a custom law: its results are sanitized
	lo, hi float64                 // clamp bounds, lo < hi, both finite (an infinite bound saturates at ±MaxFloat64, so a sum that overflows is clamped back and no cell holds Inf)
	agg    core.Aggregator         // cfg.Aggregator, valid
	aggFn  func([]float64) float64 // cfg.AggregateFunc; when non-nil it replaces agg
	levels uint32                  // L, 1..sketch.MaxLevels
	m      uint32                  // M, 1..sketch.MaxCellsPerLevel
	cells  []cell                  // L*M cells; row l is cells[l*M : (l+1)*M]
}

// New builds a reference sketch for cfg, or returns the *sketch.ConfigError
// sketch.New would.
func New(cfg sketch.Config) (*Sketch, error) {
	n, cfg, err := conv.Normalize(cfg)
	if err != nil {
		return nil, err
	}
	s := &Sketch{
		cfg:    cfg,
		hasher: n.Hasher(n.Seed),
		decay:  cfg.Decay,
		custom: isCustom(cfg.Decay),
		lo:     math.Max(cfg.Lo, -math.MaxFloat64),
		hi:     math.Min(cfg.Hi, math.MaxFloat64),
		agg:    n.Aggregator,
		aggFn:  cfg.AggregateFunc,
		levels: cfg.Levels,
		m:      cfg.CellsPerLevel,
	}
	if core.IsNil(s.hasher) {
		// As sketch.New (audit 145): a nil or typed-nil Hasher from the
		// factory would be a nil dereference at the first hash.
		return nil, core.NilHasherErr("sketch", n.Seed)
	}
	clk := cfg.Clock
	if clk == nil {
		clk = wallClock{}
	}
	s.tb = core.NewTimebase(clk)
	// Creation time is the earliest time the sketch uses, as for the
	// lock-free sketch (its epoch): a clock that starts behind it reads
	// as standing still at it. Every cell starts there, so a clock that
	// reads negative decays like any other (a cell starting at 0 would
	// not decay until the clock passed 0).
	born := s.now()
	s.cells = make([]cell, uint64(cfg.Levels)*uint64(cfg.CellsPerLevel))
	for i := range s.cells {
		s.cells[i].last = born
	}
	return s, nil
}

// now reads the clock through a high-water mark (sketch.Timebase), as the
// lock-free sketch does, so a backwards step holds time still for every
// cell instead of letting a cell stamped earlier decay less: the two
// implementations keep one time semantics and stay comparable cell for
// cell.
func (s *Sketch) now() int64 { return s.tb.NowMillis() }

// Config returns the normalized configuration (defaults filled in). Clock
// is nil when New was given nil; the sketch then reads the wall clock.
func (s *Sketch) Config() sketch.Config { return s.cfg }

// Sizes reports the footprint: Cells is L*M*24 bytes, Total adds the
// Sketch struct itself.
func (s *Sketch) Sizes() sketch.Sizes {
	cells := len(s.cells) * int(unsafe.Sizeof(cell{}))
	return sketch.Sizes{Cells: cells, Total: cells + int(unsafe.Sizeof(Sketch{}))}
}

// CellScore returns the raw stored score of cell index in row level,
// without decaying it to the present and without changing it. It is meant
// for cell-for-cell comparisons in tests. It panics if level >= L or
// index >= M.
func (s *Sketch) CellScore(level, index uint32) float64 {
	c := s.cellAtIndex(level, index)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.score
}

// KeyCell returns the raw stored score and timestamp of key's cell in
// row level, under the cell's lock, without decaying it: the view a
// model-based test compares with its model. It panics if level >= L.
func (s *Sketch) KeyCell(key []byte, level uint32) (score float64, last int64) {
	if level >= s.levels {
		panic(fmt.Sprintf("sketch: level %d out of range; have %d levels", level, s.levels))
	}
	c := s.cellFor(s.hasher.Sum64(key), level)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.score, c.last
}

// cellAtIndex returns the cell at index of row level; it panics when
// either is out of range.
func (s *Sketch) cellAtIndex(level, index uint32) *cell {
	if level >= s.levels || index >= s.m {
		panic(fmt.Sprintf("sketch: cell (%d, %d) out of range; have %d levels of %d cells", level, index, s.levels, s.m))
	}
	return &s.cells[uint64(level)*uint64(s.m)+uint64(index)]
}

// cellFor returns the cell of level for a key whose hash is h.
// Precondition: level < L.
func (s *Sketch) cellFor(h uint64, level uint32) *cell {
	return &s.cells[uint64(level)*uint64(s.m)+uint64(core.Index(h, level, s.m))]
}

// decayLocked brings c to time now. Caller holds c.mu. A clock that reads
// earlier than c.last counts as zero elapsed time: the score is left as
// is and last does not move back.
//
// A custom law's result is sanitized as the lock-free sketch's is
// (law.Sanitize: NaN, ±Inf or growth read as no decay, a crossing of 0
// as 0), so that no cell holds NaN, Inf or a score above Hi whatever the
// law (audit 41: the reference stored all three).
func (s *Sketch) decayLocked(c *cell, now int64) {
	if dt := now - c.last; dt > 0 {
		v := s.decay.Apply(c.score, dt)
		if s.custom {
			v = law.Sanitize(c.score, v)
		}
		c.score = v
		c.last = now
	}
}

// isCustom reports whether d is a custom law (not one package decay
// builds).
func isCustom(d decay.Decay) bool {
	k, _ := law.Params(d)
	return k == law.KindCustom
}

// addLocked adds delta to c's (already decayed) score and clamps the sum
// to [Lo, Hi]. Caller holds c.mu and has called decayLocked.
func (s *Sketch) addLocked(c *cell, delta float64) {
	v := c.score + delta
	if v < s.lo {
		v = s.lo
	} else if v > s.hi {
		v = s.hi
	}
	c.score = v
}

// checkFinite panics if v is NaN or ±Inf. It is called before any cell is
// touched, so a bad argument never changes state.
func checkFinite(op, what string, v float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		panicNotFinite(op, what, v)
	}
}

// panicNotFinite is kept out of line so that formatting v never makes the
// hot paths allocate.
//
//go:noinline
func panicNotFinite(op, what string, v float64) {
	panic(fmt.Sprintf("sketch: %s %s must be finite; got %v", op, what, v))
}

// Update adds delta to the key's L cells, each decayed to now first and
// clamped to [Lo, Hi] after. It locks one cell at a time, in ascending
// level order. It panics if delta is NaN or ±Inf.
func (s *Sketch) Update(key []byte, delta float64) {
	checkFinite("Update", "delta", delta)
	s.update(s.hasher.Sum64(key), delta, s.now())
}

// UpdateString is Update for a string key, without allocating.
func (s *Sketch) UpdateString(key string, delta float64) {
	checkFinite("Update", "delta", delta)
	s.update(s.hasher.Sum64String(key), delta, s.now())
}

func (s *Sketch) update(h uint64, delta float64, now int64) {
	for l := uint32(0); l < s.levels; l++ {
		s.addCell(s.cellFor(h, l), now, delta)
	}
}

// addCell decays c to now, adds delta (clamped) and returns the new
// score, under c's lock. The unlock is deferred: a custom decay law that
// panics must not leave the cell locked for every later operation.
func (s *Sketch) addCell(c *cell, now int64, delta float64) float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	s.decayLocked(c, now)
	s.addLocked(c, delta)
	return c.score
}

// readCell decays c to now (written back, as grudge does) and returns its
// score, under c's lock (deferred, as in addCell).
func (s *Sketch) readCell(c *cell, now int64) float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	s.decayLocked(c, now)
	return c.score
}

// Query returns the aggregate of the key's L cells, each decayed to now.
// As in grudge, the decayed score is written back. It locks one cell at a
// time, in ascending level order.
func (s *Sketch) Query(key []byte) float64 {
	return s.query(s.hasher.Sum64(key), s.now())
}

// QueryString is Query for a string key, without allocating.
func (s *Sketch) QueryString(key string) float64 {
	return s.query(s.hasher.Sum64String(key), s.now())
}

func (s *Sketch) query(h uint64, now int64) float64 {
	var scores [sketch.MaxLevels]float64
	for l := uint32(0); l < s.levels; l++ {
		scores[l] = s.readCell(s.cellFor(h, l), now)
	}
	return s.aggregate(scores[:s.levels])
}

// UpdateAndQuery is Update followed by the aggregate of the post-update
// cell scores, in one pass: each cell is locked once. It panics if delta
// is NaN or ±Inf.
func (s *Sketch) UpdateAndQuery(key []byte, delta float64) float64 {
	checkFinite("UpdateAndQuery", "delta", delta)
	return s.updateAndQuery(s.hasher.Sum64(key), delta, s.now())
}

// UpdateAndQueryString is UpdateAndQuery for a string key, without
// allocating.
func (s *Sketch) UpdateAndQueryString(key string, delta float64) float64 {
	checkFinite("UpdateAndQuery", "delta", delta)
	return s.updateAndQuery(s.hasher.Sum64String(key), delta, s.now())
}

func (s *Sketch) updateAndQuery(h uint64, delta float64, now int64) float64 {
	var scores [sketch.MaxLevels]float64
	for l := uint32(0); l < s.levels; l++ {
		scores[l] = s.addCell(s.cellFor(h, l), now, delta)
	}
	return s.aggregate(scores[:s.levels])
}

// QueryDetailed returns the aggregate and, per level, the cell index and
// its score decayed to now (written back, as Query does). It allocates the
// Levels slice.
func (s *Sketch) QueryDetailed(key []byte) sketch.Detail {
	return s.queryDetailed(s.hasher.Sum64(key), s.now())
}

func (s *Sketch) queryDetailed(h uint64, now int64) sketch.Detail {
	var scores [sketch.MaxLevels]float64
	d := sketch.Detail{Levels: make([]sketch.LevelDetail, s.levels)}
	for l := uint32(0); l < s.levels; l++ {
		idx := core.Index(h, l, s.m)
		scores[l] = s.readCell(s.cellFor(h, l), now)
		d.Levels[l] = sketch.LevelDetail{Level: l, Index: idx, Score: scores[l]}
	}
	d.Score = s.aggregate(scores[:s.levels])
	return d
}

// aggregate combines per-level scores with Config.AggregateFunc when set
// (through sketch.CustomAggregate, as the lock-free sketch does), else
// with the built-in Aggregator.
func (s *Sketch) aggregate(scores []float64) float64 {
	if s.aggFn != nil {
		return core.CustomAggregate(s.aggFn, scores)
	}
	// Scores stay clamped at Hi: a Mean of levels at Hi can round one
	// ulp above it, and is capped, as the lock-free sketch caps it.
	return min(s.agg.Aggregate(scores), s.hi)
}
