package rotator

import (
	"io"
	"time"

	"github.com/lfgrudge/grudge/internal/conv"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch"
)

// Rotator is a sketch that forgets: N generations of sketch.Sketch under
// distinct seeds, read from the oldest (the primary), written to all, the
// oldest retired every Period. It has sketch.Sketch's Scorer methods,
// with their String twins and At forms, Config, Sizes and the snapshot
// methods (no Merge or Reset), plus Close and Stats. Code written for
// grudge's rotator moves to the grudge root package with an import
// change; to this package, without Config.Ticker and with Stats for
// Rotations (see the package doc, "Differences from grudge").
//
// Create one with New; the zero Rotator is not usable (its methods but
// Close, Config and Stats panic with "rotator: zero Rotator; use New"). A
// Rotator is safe for concurrent use by any number of goroutines. It starts
// no goroutine and takes no lock (but where N x Period >= 2^31 ms, package
// sketch's re-base after that long without a sweep, the package doc says):
// rotation happens on access, performed by the one operation that wins the
// promotion. Every operation reads the clock once, for decay and the
// rotation deadline alike (a TryUpdate that finds its stripe of the primary
// closed by a promotion reads it again, to decide on the new set). Update,
// Query, UpdateAndQuery, TryUpdate and their string twins do not allocate,
// except the one operation per Period that builds the new generation.
type Rotator struct {
	e   core.Rotator
	cfg Config // normalized, as given to New
}

var _ sketch.Scorer = (*Rotator)(nil)

func init() {
	core.RegisterRotatorFace(func(face any) *core.Rotator {
		if r, ok := face.(*Rotator); ok && r != nil {
			return &r.e
		}
		return nil
	})
}

// New returns a rotator for cfg, with all N generations built and empty
// and the first rotation due one Period from now, or a
// *sketch.ConfigError naming the first invalid field.
func New(cfg Config) (*Rotator, error) {
	r := new(Rotator)
	if err := r.e.Init(cfg.engine()); err != nil {
		return nil, err
	}
	r.cfg = cfg.normalized(r.e.Config())
	return r, nil
}

// Config returns the configuration the rotator was built with, defaults
// filled in (Clock nil if it was nil, Sketch.Seed the base seed).
func (r *Rotator) Config() Config { return r.cfg }

// Stats counts what the rotator has done since New. Counters only grow.
type Stats struct {
	// Promotions is the number of generation-set swaps: one per
	// operation that found the deadline passed and won the claim.
	Promotions uint64
	// Periods is the number of whole periods the promotions accounted
	// for: a clock jump of k periods counts k in one promotion.
	Periods uint64
	// Allocated is the number of sketches built, the N built by New
	// included, and those a refused restore built before refusing. Retired generations are never reused; the garbage
	// collector frees them.
	Allocated uint64
}

// Stats returns the rotation counters. Each counter is read atomically;
// the three together are not a snapshot.
func (r *Rotator) Stats() Stats { return Stats(r.e.Stats()) }

// Sizes returns the sum of the live generations' sizes, plus the
// rotator's own structs in Total.
func (r *Rotator) Sizes() sketch.Sizes { return sketch.Sizes(r.e.Sizes()) }

// Close does nothing and may be called any number of times: the rotator
// has no goroutine or ticker to stop. It exists so that code written for
// grudge's rotator (defer r.Close()) compiles unchanged.
func (r *Rotator) Close() {}

// Update adds delta to the key's score in every generation. It panics if
// delta is NaN or ±Inf, before touching any cell.
func (r *Rotator) Update(key []byte, delta float64) { r.e.Update(key, delta) }

// UpdateString is Update for a string key.
func (r *Rotator) UpdateString(key string, delta float64) { r.e.UpdateString(key, delta) }

// UpdateAt is Update at time t.
func (r *Rotator) UpdateAt(t time.Time, key string, delta float64) {
	r.e.UpdateStringAt(t, key, delta)
}

// Query returns the key's score in the primary (oldest) generation.
func (r *Rotator) Query(key []byte) float64 { return r.e.Query(key) }

// QueryString is Query for a string key.
func (r *Rotator) QueryString(key string) float64 { return r.e.QueryString(key) }

// QueryAt is Query at time t.
func (r *Rotator) QueryAt(t time.Time, key string) float64 { return r.e.QueryStringAt(t, key) }

// UpdateAndQuery adds delta as Update does and returns the primary's
// aggregate after its update.
func (r *Rotator) UpdateAndQuery(key []byte, delta float64) float64 {
	return r.e.UpdateAndQuery(key, delta)
}

// UpdateAndQueryString is UpdateAndQuery for a string key.
func (r *Rotator) UpdateAndQueryString(key string, delta float64) float64 {
	return r.e.UpdateAndQueryString(key, delta)
}

// UpdateAndQueryAt is UpdateAndQuery at time t.
func (r *Rotator) UpdateAndQueryAt(t time.Time, key string, delta float64) float64 {
	return r.e.UpdateAndQueryStringAt(t, key, delta)
}

// TryUpdate adds delta to the key's score in every generation only if
// the primary's aggregate plus delta is at most limit, and reports
// whether it did: sketch.Sketch's exact decision, kept exact across
// rotations. It panics if delta or limit is NaN or ±Inf.
func (r *Rotator) TryUpdate(key []byte, delta, limit float64) bool {
	return r.e.TryUpdate(key, delta, limit)
}

// TryUpdateString is TryUpdate for a string key.
func (r *Rotator) TryUpdateString(key string, delta, limit float64) bool {
	return r.e.TryUpdateString(key, delta, limit)
}

// TryUpdateAt is TryUpdate at time t.
func (r *Rotator) TryUpdateAt(t time.Time, key string, delta, limit float64) bool {
	return r.e.TryUpdateStringAt(t, key, delta, limit)
}

// QueryDetailed returns the primary's per-level view of the key. It
// allocates its result.
func (r *Rotator) QueryDetailed(key []byte) sketch.Detail {
	return conv.Detail(core.RotatorDetailed(&r.e, key, conv.LevelDetail))
}

// MarshalBinary returns a snapshot of the rotator
// (encoding.BinaryMarshaler); see WriteTo.
func (r *Rotator) MarshalBinary() ([]byte, error) { return r.e.MarshalBinary() }

// UnmarshalBinary restores a snapshot of a rotator of the same
// configuration (encoding.BinaryUnmarshaler). A refused snapshot leaves r
// unchanged (but Stats' Allocated). Call it on a rotator nobody else is
// using.
func (r *Rotator) UnmarshalBinary(data []byte) error { return r.e.UnmarshalBinary(data) }

// WriteTo writes a checksummed snapshot of the rotator to w (io.WriterTo):
// the generation set current when it starts, each generation in
// sketch.Sketch.WriteTo's format but every one stated at the rotator's
// snapshot instant, the one clock reading taken at the start (a cell
// written after it is read back to it by the law, or keeps its stamp: a
// negative age), so a restore maps every
// generation to the same times. It may run concurrently with any
// operation. It fails with an error matching sketch.ErrTakeAgain ("take
// the snapshot again") if the set rotates during the encode (a Period
// ends: writes after the rotation went to a generation the snapshot does
// not hold, and a restore would forget them a Period early), or if the
// clock jumps during the encode and a cell written or re-stamped after
// that can only be stated over 2^24 ms after the instant, as
// Sketch.WriteTo does.
func (r *Rotator) WriteTo(w io.Writer) (int64, error) { return r.e.WriteTo(w) }

// ReadFrom is UnmarshalBinary streaming from r (io.ReaderFrom). A refused
// snapshot leaves the rotator unchanged (but Stats' Allocated).
func (r *Rotator) ReadFrom(rd io.Reader) (int64, error) { return r.e.ReadFrom(rd) }
