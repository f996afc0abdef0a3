package core

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"

	"github.com/lfgrudge/grudge/asm"
)

// A rotator snapshot (docs/snapshots.md) is a 56-byte header, the N
// generations' sketch snapshots oldest first (each complete, with its own
// checksum), and a CRC-32C of everything before it:
//
//	0  "GRDG"          magic
//	4  u8              format version (SnapshotVersion)
//	5  u8              kind (SnapshotKindRotator)
//	6  u16             reserved, 0
//	8  u32             N, the generations
//	12 u32             reserved, 0
//	16 u64             next: the creation counter of the next generation
//	24 i64             Period in ms
//	32 i64             the rotation deadline, Unix ms (wall time)
//	40 i64             the snapshot instant, Unix ms (wall time)
//	48 u64             the base seed (Config.Sketch.Seed)
//
// Generation i (0 = the primary) was created as number next-N+i and
// hashes under GenerationSeed(base seed, next-N+i); its own header records that
// seed, so a restore rebuilds it under the same seed and every key maps to
// the same cells.
const rotHeaderSize = 56

func rotCorrupt(field string, got, want any, cause error, format string, args ...any) error {
	return NewSnapshotError(ErrCorruptSnapshot, "rotator", field, got, want, cause, "snapshot "+format, args...)
}

func rotMismatch(field string, got, want any) error {
	return NewSnapshotError(ErrSnapshotMismatch, "rotator", field, got, want, nil,
		"snapshot %s differs: got %v, the rotator has %v", field, got, want)
}

// SnapshotSize returns the exact length in bytes of the rotator's
// snapshot.
func (r *Rotator) SnapshotSize() int64 {
	r.built()
	gs := r.cur.Load()
	return rotHeaderSize + int64(len(gs.gens))*gs.gens[0].SnapshotSize() + 4
}

// MarshalBinary returns a snapshot of the rotator (encoding.BinaryMarshaler);
// see WriteTo.
func (r *Rotator) MarshalBinary() ([]byte, error) {
	var b bytes.Buffer
	b.Grow(int(r.SnapshotSize()))
	if _, err := r.WriteTo(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// WriteTo writes a snapshot of the rotator to w (io.WriterTo). It may run
// concurrently with any operation: it encodes the generation set current
// when it starts (a promotion already under way is waited for), each
// generation as Sketch.WriteTo does (each cell one atomic load; the cells
// together are not an atomic snapshot), every one stated at the
// rotator's snapshot instant, the one clock reading taken at the start
// (a cell written after it is read back to it, or keeps its stamp as a
// negative age: Sketch.restate), so that a restore maps
// every generation's cells to the same times. If the set is promoted
// during the encode (a deadline passed, or a Rotate), it fails with an
// error saying so: writes after the promotion went to a generation the
// snapshot does not hold, and the restored rotator would forget them a
// Period early (audit 53). Take the snapshot again; an encode shorter
// than the Period rarely meets a deadline.
func (r *Rotator) WriteTo(w io.Writer) (int64, error) {
	r.built()
	var bo asm.Backoff
	gs := r.cur.Load()
	for gs.claimed.Load() { // a promotion is being built: wait for its publish
		bo.Spin()
		gs = r.cur.Load()
	}
	ms := r.tb.NowMillis()
	var hdr [rotHeaderSize]byte
	le := binary.LittleEndian
	copy(hdr[0:4], SnapshotMagic)
	hdr[4], hdr[5] = SnapshotVersion, SnapshotKindRotator
	le.PutUint32(hdr[8:], uint32(len(gs.gens)))
	le.PutUint64(hdr[16:], gs.next)
	le.PutUint64(hdr[24:], uint64(r.periodMs))
	// The deadline is written as the instant plus the time it has left
	// (at most a Period), so that their difference, which the decoder
	// reads, survives an instant that saturates: two walls saturated
	// apart both read MaxInt64, and a deadline a period away came out
	// due at once (audit 153). An instant within a Period of the end is
	// written that much earlier.
	inst := min(WallMillis(r.tb.Time(ms)), math.MaxInt64-r.periodMs)
	left := min(subSat(gs.deadline, ms), r.periodMs)
	le.PutUint64(hdr[32:], uint64(addSat(inst, left)))
	le.PutUint64(hdr[40:], uint64(inst))
	le.PutUint64(hdr[48:], r.cfg.Sketch.Seed)

	h := crc32.New(crcTable)
	cw := &countWriter{w: w}
	mw := io.MultiWriter(cw, h)
	if _, err := mw.Write(hdr[:]); err != nil {
		return cw.n, err
	}
	for _, g := range gs.gens {
		if _, err := g.writeAt(mw, ms); err != nil {
			return cw.n, err
		}
	}
	if r.cur.Load() != gs || gs.claimed.Load() {
		return cw.n, fmt.Errorf("rotator: the generation set was promoted during the encode (a Period ended, or a Rotate); %w", ErrTakeAgain)
	}
	le.PutUint32(hdr[:4], h.Sum32())
	_, err := cw.Write(hdr[:4])
	return cw.n, err
}

// UnmarshalBinary restores the rotator from a snapshot
// (encoding.BinaryUnmarshaler); see ReadFrom. The whole checksum and the
// length are verified first.
func (r *Rotator) UnmarshalBinary(data []byte) error {
	r.built()
	if len(data) < rotHeaderSize+4 {
		return rotCorrupt("Length", len(data), r.SnapshotSize(), io.ErrUnexpectedEOF, "is truncated: %d bytes, shorter than a header", len(data))
	}
	body := data[:len(data)-4]
	if got, want := binary.LittleEndian.Uint32(data[len(body):]), crc32.Checksum(body, crcTable); got != want {
		if int64(len(data)) < r.SnapshotSize() {
			return rotCorrupt("Length", len(data), r.SnapshotSize(), io.ErrUnexpectedEOF, "is truncated: %d bytes of %d", len(data), r.SnapshotSize())
		}
		return rotCorrupt("Checksum", got, want, nil, "checksum mismatch: stored %#08x, computed %#08x", got, want)
	}
	gs, n, err := r.decode(bytes.NewReader(data), false)
	if err != nil {
		return err
	}
	if n != int64(len(data)) {
		return rotCorrupt("Length", len(data), n, nil, "has %d trailing bytes", int64(len(data))-n)
	}
	r.cur.Store(gs)
	return nil
}

// ReadFrom restores the rotator from a snapshot read from rd
// (io.ReaderFrom), reading exactly its bytes. The rotator must have been
// built by New with the configuration the snapshot was taken under:
// Generations, Period and the base seed are checked here, everything else
// by each generation's header (Sketch.UnmarshalBinary). The
// generations are rebuilt with the creation counters and so the seeds
// they had, and restored as Sketch.ReadFrom restores (each cell
// aged by the downtime, on the rotator's own clock). The rotation deadline
// moves to the rotator's clock through its wall time: a deadline that
// passed during the downtime promotes on the next access, as it would
// have. On any error the rotator is left unchanged. Not atomic: call it
// on a rotator nobody else is using. It builds N new generations before
// it drops the old ones, so it needs the memory of 2N for a moment.
func (r *Rotator) ReadFrom(rd io.Reader) (int64, error) {
	r.built()
	gs, n, err := r.decode(rd, false)
	if err == nil {
		r.cur.Store(gs)
	}
	return n, err
}

// ReadFromAdopt is ReadFrom that adopts the snapshot's base seed instead
// of requiring the rotator's own: the generations are rebuilt under the
// seeds the snapshot's were created with, and on success the rotator's
// base seed becomes the snapshot's (later generations derive from it).
// Everything else is checked as ReadFrom checks it. It is for faces
// whose seed the user never sees (a limit.Limiter, a meter): the
// restoring process builds them with any seed.
func (r *Rotator) ReadFromAdopt(rd io.Reader) (int64, error) {
	r.built()
	gs, n, err := r.decode(rd, true)
	if err == nil {
		r.cfg.Sketch.Seed = gs.seed
		r.cur.Store(gs)
	}
	return n, err
}

// decode reads a snapshot from rd and returns the generation set it
// describes, not yet published. With adopt, the snapshot's base seed is
// taken instead of checked (and returned in the set's seed).
func (r *Rotator) decode(rd io.Reader, adopt bool) (*genSet, int64, error) {
	h := crc32.New(crcTable)
	cr := &countReader{r: rd}
	tr := io.TeeReader(cr, h)
	truncated := func() error {
		return rotCorrupt("Length", cr.n, r.SnapshotSize(), io.ErrUnexpectedEOF, "is truncated after %d bytes", cr.n)
	}
	var hdr [rotHeaderSize]byte
	if _, err := io.ReadFull(tr, hdr[:]); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil, cr.n, truncated()
		}
		return nil, cr.n, err
	}
	le := binary.LittleEndian
	switch {
	case string(hdr[0:4]) != SnapshotMagic:
		return nil, cr.n, rotCorrupt("Magic", string(hdr[0:4]), SnapshotMagic, nil, "magic is %q, want %q", hdr[0:4], SnapshotMagic)
	case hdr[4] != SnapshotVersion:
		return nil, cr.n, rotCorrupt("Version", hdr[4], SnapshotVersion, nil, "format version %d is not supported (this build reads %d)", hdr[4], SnapshotVersion)
	case hdr[5] != SnapshotKindRotator:
		return nil, cr.n, rotCorrupt("Kind", hdr[5], SnapshotKindRotator, nil, "kind %d is not a rotator snapshot (%d)", hdr[5], SnapshotKindRotator)
	case hdr[6]|hdr[7] != 0 || le.Uint32(hdr[12:]) != 0:
		return nil, cr.n, rotCorrupt("Reserved", nil, 0, nil, "reserved header bytes are not zero")
	}
	n := le.Uint32(hdr[8:])
	next := le.Uint64(hdr[16:])
	period := int64(le.Uint64(hdr[24:]))
	deadlineWall := int64(le.Uint64(hdr[32:]))
	seed := le.Uint64(hdr[48:])
	switch {
	case n != r.cfg.Generations:
		return nil, cr.n, rotMismatch("Generations", n, r.cfg.Generations)
	case period != r.periodMs:
		return nil, cr.n, rotMismatch("Period", fmt.Sprintf("%dms", period), fmt.Sprintf("%dms", r.periodMs))
	case seed != r.cfg.Sketch.Seed && !adopt:
		return nil, cr.n, rotMismatch("Seed", seed, r.cfg.Sketch.Seed)
	case next < uint64(n):
		return nil, cr.n, rotCorrupt("Next", next, n, nil, "creation counter %d is below Generations %d", next, n)
	}
	instWall := boundWall(int64(le.Uint64(hdr[40:])))
	gs := &genSet{gens: make([]*Sketch, n), next: next, seed: seed}
	for i := range gs.gens {
		// buildErr fails on a HasherFactory that returns nil for this
		// generation's seed.
		g, err := r.buildErr(seed, next-uint64(n)+uint64(i), nil)
		if err == nil {
			_, err = g.readFrom(tr, instWall, true)
		}
		if err != nil {
			return nil, cr.n, fmt.Errorf("rotator: snapshot generation %d of %d: %w", i, n, err)
		}
		gs.gens[i] = g
	}
	want := h.Sum32()
	var sum [4]byte
	if _, err := io.ReadFull(cr, sum[:]); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil, cr.n, truncated()
		}
		return nil, cr.n, err
	}
	if got := le.Uint32(sum[:]); got != want {
		return nil, cr.n, rotCorrupt("Checksum", got, want, nil, "checksum mismatch: stored %#08x, computed %#08x", got, want)
	}
	ms := r.tb.NowMillis()
	// The deadline is restored as the time it had left at the snapshot
	// instant, less the downtime: 0 when the restoring clock is behind
	// (as for the cells: a clock behind never extends a generation's
	// life), and at most one Period (a snapshot's deadline is at most one
	// Period after its instant; a forged one cannot stop rotation).
	// The time left is the snapshot's own difference, not one of wall
	// times bounded to +-2^61 ms: past that bound both read 2^61, and a
	// deadline 9 ms away came out due at once (audit 100).
	nowWall := boundWall(WallMillis(r.tb.Time(ms)))
	left := max(min(subSat(deadlineWall, int64(le.Uint64(hdr[40:]))), r.periodMs), -farWall)
	d := max(left-max(nowWall-instWall, 0), -farWall)
	gs.deadline, gs.endless = deadlineAfter(ms, d)
	return gs, cr.n, nil
}

// countReader counts the bytes read through it.
type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
