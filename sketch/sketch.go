package sketch

import (
	"io"
	"strconv"
	"time"

	"github.com/lfgrudge/grudge/internal/core"
)

// Sketch is the lock-free decaying count-min sketch: L rows of M packed
// cells (float32 score + 32-bit age in one atomic word), each row aligned
// to and padded to whole cache lines.
//
// Create one with New; the zero Sketch is not usable (its methods but
// Config and Sizes panic with "sketch: zero Sketch; use New"). A Sketch is
// safe for concurrent use by any number of goroutines; no method starts a
// goroutine or allocates, except QueryDetailed, which allocates its result,
// and none takes a lock but in one case: the first operations after 2^31 ms
// (24.8 days) of sketch time without a sweep (an idle sketch, a jumped
// clock) wait while one of them re-bases every cell (the package
// documentation, "No locks"). A write that would leave a cell as it is (a
// score pinned at Hi or Lo, or a zero delta, at a stamp no older than the
// call's millisecond) does not write it, and an admitted TryUpdate that
// changes no cell writes nothing at all, so many cores on a saturated key
// only read its cache lines (docs/design.md, "No write when nothing
// changes").
type Sketch struct {
	e   core.Sketch
	cfg Config // normalized, as given to New
}

var _ Scorer = (*Sketch)(nil)

// New returns a sketch for cfg, or a *ConfigError naming the first
// invalid field.
func New(cfg Config) (*Sketch, error) {
	s := new(Sketch)
	if err := s.e.Init(cfg.engine()); err != nil {
		return nil, err
	}
	s.cfg = cfg.normalized(s.e.Config())
	return s, nil
}

// Config returns the configuration the sketch was built with, defaults
// filled in (Clock stays nil when it was nil).
func (s *Sketch) Config() Config { return s.cfg }

// Sizes reports the sketch's memory: Cells is the cell block as
// allocated (alignment and guard lines included), Total adds the stripes,
// the decay tables, the time high-water mark and the struct.
func (s *Sketch) Sizes() Sizes { return Sizes(s.e.Sizes()) }

// Update adds delta to the key's score at every level: per cell, decay
// for the cell's age, add, clamp to [Lo, Hi], round up to float32, one
// CAS. It panics if delta is NaN or ±Inf, before touching any cell.
func (s *Sketch) Update(key []byte, delta float64) { s.e.Update(key, delta) }

// UpdateString is Update for a string key.
func (s *Sketch) UpdateString(key string, delta float64) { s.e.UpdateString(key, delta) }

// UpdateAt is Update at time t.
func (s *Sketch) UpdateAt(t time.Time, key string, delta float64) { s.e.UpdateStringAt(t, key, delta) }

// Query returns the key's aggregated score, decayed to now. It only
// reads.
func (s *Sketch) Query(key []byte) float64 { return s.e.Query(key) }

// QueryString is Query for a string key.
func (s *Sketch) QueryString(key string) float64 { return s.e.QueryString(key) }

// QueryAt is Query at time t.
func (s *Sketch) QueryAt(t time.Time, key string) float64 { return s.e.QueryStringAt(t, key) }

// UpdateAndQuery adds delta as Update does and returns the aggregate of
// the scores it stored.
func (s *Sketch) UpdateAndQuery(key []byte, delta float64) float64 {
	return s.e.UpdateAndQuery(key, delta)
}

// UpdateAndQueryString is UpdateAndQuery for a string key.
func (s *Sketch) UpdateAndQueryString(key string, delta float64) float64 {
	return s.e.UpdateAndQueryString(key, delta)
}

// UpdateAndQueryAt is UpdateAndQuery at time t.
func (s *Sketch) UpdateAndQueryAt(t time.Time, key string, delta float64) float64 {
	return s.e.UpdateAndQueryStringAt(t, key, delta)
}

// TryUpdate adds delta to the key's score at every level only if the
// aggregate plus delta is at most limit, and reports whether it did:
// atomically with respect to every other TryUpdate of any key that shares
// cells with it. It panics if delta or limit is NaN or ±Inf.
func (s *Sketch) TryUpdate(key []byte, delta, limit float64) bool {
	return s.e.TryUpdate(key, delta, limit)
}

// TryUpdateString is TryUpdate for a string key.
func (s *Sketch) TryUpdateString(key string, delta, limit float64) bool {
	return s.e.TryUpdateString(key, delta, limit)
}

// TryUpdateAt is TryUpdate at time t.
func (s *Sketch) TryUpdateAt(t time.Time, key string, delta, limit float64) bool {
	return s.e.TryUpdateStringAt(t, key, delta, limit)
}

// QueryDetailed returns the aggregate and each level's cell index and
// decayed score. It only reads; it allocates the Levels slice.
func (s *Sketch) QueryDetailed(key []byte) Detail {
	score, levels := core.Detailed(&s.e, key, levelDetail)
	return Detail{Score: score, Levels: levels}
}

// Reset sets every cell to score 0. It is not atomic: call it on a
// sketch nobody else is using. The epoch and seed stay as they were.
func (s *Sketch) Reset() { s.e.Reset() }

// Merge adds other into s under the additive law, cell by cell, both
// decayed to s's current time: exact for the None and Exponential laws,
// up to the clamp at Hi (docs/snapshots.md, "Merge", says what a clamp,
// a 0 or a replica's clock ahead cost).
// For Linear, overlap (at least the time both replicas may have held a
// positive score) raises every cell by rate x overlap (overlap rounded
// up to whole ms, as clocks count) so that no key reads below the union
// of both streams; other laws ignore it, so under a custom law that
// drains as Linear does (a fixed amount a millisecond) a merged key can
// read below the union, by up to that drain over the time both held it:
// Merge promises the union for None, Exponential and Linear only. overlap
// is optional: Merge(other) is Merge(other, 0); a negative overlap or
// more than one panics, as does a nil other. It refuses (ErrSnapshotMismatch) a sketch
// of another configuration, or s itself. Writes that land on either
// sketch during the merge are on the safe side for positive scores; a
// credit (a negative score) written then can read below the union, by
// up to what it decays over the merge's lead on it, a gap that shrinks
// as it decays (docs/snapshots.md, "Merge").
func (s *Sketch) Merge(other *Sketch, overlap ...time.Duration) error {
	if other == nil {
		panic("sketch: Merge of a nil *Sketch")
	}
	var d time.Duration
	switch len(overlap) {
	case 0:
	case 1:
		d = overlap[0]
		if d < 0 {
			panic("sketch: Merge overlap must be >= 0; got " + d.String())
		}
	default:
		panic("sketch: Merge takes at most one overlap; got " + strconv.Itoa(len(overlap)))
	}
	return s.e.MergeWithin(&other.e, d)
}

// MarshalBinary returns a snapshot of the sketch
// (encoding.BinaryMarshaler); see WriteTo.
func (s *Sketch) MarshalBinary() ([]byte, error) { return s.e.MarshalBinary() }

// UnmarshalBinary restores a snapshot of a sketch of the same
// configuration (encoding.BinaryUnmarshaler), every score aged by the
// time since it was taken. A refused snapshot leaves s as it was, except
// a well-checksummed one holding an invalid score, which leaves s reset.
// Like Reset, call it on a sketch nobody else is using.
func (s *Sketch) UnmarshalBinary(data []byte) error { return s.e.UnmarshalBinary(data) }

// WriteTo writes a checksummed snapshot of the sketch to w (io.WriterTo).
// It may run concurrently with any operation: each cell is one atomic
// load, the cells together are not an atomic snapshot; a cell written
// during the encode is read back to the snapshot instant by the decay
// law. It fails if the clock jumps during the encode and a cell written
// or re-stamped after the jump can only be stated by a stamp more than
// 2^24 ms (4.66 hours) after the instant (its value read back passes Hi:
// a score near Hi, or, after a jump of hours or days, almost any score,
// a drained one and one the horizon sweep rounded up included; a credit;
// a custom law's), or if the stamps read span over 2^31 ms (a jump of
// weeks; docs/snapshots.md): take the snapshot again.
func (s *Sketch) WriteTo(w io.Writer) (int64, error) { return s.e.WriteTo(w) }

// ReadFrom is UnmarshalBinary streaming from r (io.ReaderFrom), reading
// exactly the snapshot's bytes. A refused header leaves s as it was; an
// error past the header leaves s reset (empty), never half restored.
func (s *Sketch) ReadFrom(r io.Reader) (int64, error) { return s.e.ReadFrom(r) }
