package bucket

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"

	"github.com/lfgrudge/grudge/internal/core"
)

/*
Snapshots. A bucket snapshot is a 104-byte header, the Lines lines as
they are in memory (8 little-endian words each: the header word, then
the seven entry words), a 16-byte trailer and a CRC-32C (Castagnoli, as
the sketch's) of everything before it, all little-endian:

	0   "GRDG"   magic (core.SnapshotMagic)
	4   u8       format version (snapVersion)
	5   u8       kind (core.SnapshotKindBucket)
	6   u8       law kind
	7   u8       hasher kind (core.HasherID: 0 custom, 1 XXH3, 2 SipHash)
	8   u64      Lines
	16  u64      gn   ticks per ms, numerator   } the quantized law (quant):
	24  u64      gd   ticks per ms, denominator } every field must match
	32  f64      u    ticks per load unit       } the restoring engine's,
	40  u64      span the largest load in ticks } bit for bit
	48  f64      rate effective linear rate     }
	56  f64      max  the clamp                 }
	64  f64      kappa (exponential)            }
	72  f64      eps   (exponential)            }
	80  u64      the seed
	88  u64      the hasher's fingerprint under that seed (core.HasherID)
	96  u64      reserved, 0
	104 lines    Lines x 64 bytes
	... u64      the snapshot instant on the engine's scale (ms after its
	             epoch), read at the END of the encode
	    i64      the same instant as a wall time (Unix ms)
	    u32      CRC-32C

Time. Nothing in a line depends on the engine's epoch but through lw,
the ms (after the epoch) of the line's latest write: stamps are ticks of
that scale. A restore therefore copies the lines verbatim and moves the
restoring engine's epoch so that its clock reads, on the old scale, the
snapshot instant plus the downtime (the restoring clock's wall time minus
the snapshot's, 0 if negative): the restored engine is the saved one
after an idle time equal to the downtime, which the engine handles as
any idle line (docs/design.md, "The bucket engine"), so every load has
drained by the real elapsed time and none grows. The instant is read
after the last line, so every lw in the snapshot is at most it (every
write time passes through the Timebase's high-water mark): a line whose
lw is later is refused as corrupt.

Consistency. Each line is read as an operation reads it, its entry words
first and its header last, each word with one atomic load; lines are read
one after the other. A snapshot taken under traffic is therefore not a
global cut: each line is a state a reader could have seen at some moment
of the encode (its header read before and after its entries, as
loadLine reads it), so every key's restored load is at least its load
when its lines were read, decayed (the one-sided argument of a Query); a
write in flight may or may not be in it. A line saved while a move
of its lw into a later epoch was on keeps its moving bit; the first
writer after the restore finishes that move. Empty slots are written
as 0, whatever version they carry (docs/design.md, "Moving a line's
time").
*/

const (
	snapVersion     = 1
	snapHeaderBytes = 104
	snapTrailer     = 16
	snapCRC         = 4
	// snapChunk is the number of lines encoded or decoded per buffer.
	snapChunk = 1024
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// SnapshotSize returns the exact length in bytes of e's snapshot.
func (e *Engine) SnapshotSize() int64 {
	return snapHeaderBytes + int64(e.n)*LineBytes + snapTrailer + snapCRC
}

// header returns e's snapshot header (with e's seed and fingerprint).
func (e *Engine) header() [snapHeaderBytes]byte {
	var b [snapHeaderBytes]byte
	le := binary.LittleEndian
	hk, fp := core.HasherID(e.hasher)
	copy(b[0:4], core.SnapshotMagic)
	b[4], b[5], b[6], b[7] = snapVersion, core.SnapshotKindBucket, uint8(e.q.kind), hk
	le.PutUint64(b[8:], e.n)
	le.PutUint64(b[16:], e.q.gn)
	le.PutUint64(b[24:], e.q.gd)
	le.PutUint64(b[32:], math.Float64bits(e.q.u))
	le.PutUint64(b[40:], e.q.span)
	le.PutUint64(b[48:], math.Float64bits(e.q.rate))
	le.PutUint64(b[56:], math.Float64bits(e.q.max))
	le.PutUint64(b[64:], math.Float64bits(e.q.kappa))
	le.PutUint64(b[72:], math.Float64bits(e.q.eps))
	le.PutUint64(b[80:], e.seed)
	le.PutUint64(b[88:], fp)
	return b
}

// WriteTo writes a snapshot of e to w (io.WriterTo) and returns the bytes
// written. It may run concurrently with any operation and never blocks
// one: each line is read as a Query reads it, one line after the other
// (not a global cut; see the design block above). It allocates a
// 64 KiB buffer, and the header's and trailer's small arrays, which
// escape through w.Write (3 allocations a call, whatever the engine's
// size).
func (e *Engine) WriteTo(w io.Writer) (int64, error) {
	hdr := e.header()
	crc := crc32.Update(0, crcTable, hdr[:])
	n, err := w.Write(hdr[:])
	total := int64(n)
	if err != nil {
		return total, err
	}
	le := binary.LittleEndian
	buf := make([]byte, snapChunk*LineBytes)
	for i := uint64(0); i < e.n; {
		k := min(e.n-i, snapChunk)
		b := buf[:k*LineBytes]
		for j := range k {
			ln := &e.lines[i+j]
			o := b[j*LineBytes:]
			var lw [wordsPerLine]uint64
			e.loadLine(ln, &lw)
			le.PutUint64(o, lw[0])
			for x := 1; x < wordsPerLine; x++ {
				// An empty slot is written as 0, whatever its version.
				wd := lw[x]
				for sh := uint(0); sh < 64; sh += 32 {
					if isEmpty(uint32(wd >> sh)) {
						wd = withEntry(wd, sh, 0)
					}
				}
				le.PutUint64(o[8*x:], wd)
			}
		}
		crc = crc32.Update(crc, crcTable, b)
		n, err := w.Write(b)
		total += int64(n)
		if err != nil {
			return total, err
		}
		i += k
	}
	ms := e.tb.NowMillis()
	var tr [snapTrailer + snapCRC]byte
	le.PutUint64(tr[0:], e.rel(ms))
	le.PutUint64(tr[8:], uint64(core.WallMillis(e.tb.Time(ms))))
	crc = crc32.Update(crc, crcTable, tr[:snapTrailer])
	le.PutUint32(tr[snapTrailer:], crc)
	n, err = w.Write(tr[:])
	return total + int64(n), err
}

func snapCorrupt(field string, got, want any, cause error, format string, args ...any) error {
	return core.NewSnapshotError(core.ErrCorruptSnapshot, "bucket", field, got, want, cause, "snapshot "+format, args...)
}

func snapMismatch(field string, got, want any) error {
	return core.NewSnapshotError(core.ErrSnapshotMismatch, "bucket", field, got, want, nil,
		"snapshot %s differs: got %v, the engine has %v", field, got, want)
}

// ReadFrom restores e from a snapshot read from r (io.ReaderFrom),
// reading exactly its bytes, and returns the bytes read. e must have been
// built with the configuration the snapshot was taken under: Lines, the
// law's quantization (kind, ticks, unit, span, rate, clamp), the hasher
// kind and the Seed (with the hasher's fingerprint under it); a
// difference is an error matching core.ErrSnapshotMismatch, and leaves e
// unchanged. Loads drain by the downtime (see the design block above).
// Any error after the header (truncation, a line out of bounds, a
// checksum mismatch: core.ErrCorruptSnapshot) leaves e empty, never half
// restored. Not concurrent with other use of e.
func (e *Engine) ReadFrom(r io.Reader) (int64, error) { return e.readFrom(r, false) }

// ReadFromAdopt is ReadFrom that adopts the snapshot's seed instead of
// requiring e's: on success e hashes under the snapshot's seed, so every
// key maps to the lines and fingerprint it had. The hasher's kind and its
// fingerprint under that seed are still checked.
func (e *Engine) ReadFromAdopt(r io.Reader) (int64, error) { return e.readFrom(r, true) }

func (e *Engine) readFrom(r io.Reader, adopt bool) (int64, error) {
	var total int64
	size := e.SnapshotSize()
	read := func(b []byte) error {
		n, err := io.ReadFull(r, b)
		total += int64(n)
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return snapCorrupt("Length", total, size, io.ErrUnexpectedEOF, "is truncated after %d bytes of %d", total, size)
		}
		return err
	}
	var hdr [snapHeaderBytes]byte
	if err := read(hdr[:]); err != nil {
		return total, err
	}
	h, err := e.checkHeader(&hdr, adopt)
	if err != nil {
		return total, err
	}
	crc := crc32.Update(0, crcTable, hdr[:])

	// Stream the lines into place; any error from here on empties e.
	// Either way every entry is rewritten: receipts issued before are void.
	e.resets.Add(1)
	fail := func(err error) (int64, error) {
		e.clear()
		return total, err
	}
	le := binary.LittleEndian
	buf := make([]byte, snapChunk*LineBytes)
	for i := uint64(0); i < e.n; {
		k := min(e.n-i, snapChunk)
		b := buf[:k*LineBytes]
		if err := read(b); err != nil {
			return fail(err)
		}
		crc = crc32.Update(crc, crcTable, b)
		for j := range k {
			ln := &e.lines[i+j]
			o := b[j*LineBytes:]
			for x := range wordsPerLine {
				ln.w[x].Store(le.Uint64(o[8*x:]))
			}
		}
		i += k
	}
	var tr [snapTrailer + snapCRC]byte
	if err := read(tr[:]); err != nil {
		return fail(err)
	}
	crc = crc32.Update(crc, crcTable, tr[:snapTrailer])
	if got := le.Uint32(tr[snapTrailer:]); got != crc {
		return fail(snapCorrupt("Checksum", got, crc, nil, "checksum mismatch: stored %#08x, computed %#08x", got, crc))
	}
	atRel := le.Uint64(tr[0:])
	atWall := int64(le.Uint64(tr[8:]))
	if atRel > lwMask {
		return fail(snapCorrupt("Instant", atRel, uint64(lwMask), nil, "instant %d ms is beyond the engine's 47-bit scale", atRel))
	}
	// Every line must be one the engine could have written by the
	// snapshot instant: lw at most it, the floor within a load of lw,
	// no entry without a fingerprint.
	for i := range e.lines {
		ln := &e.lines[i]
		hw := ln.w[0].Load()
		if lw := hdrLW(hw); lw > atRel {
			return fail(snapCorrupt("Line", lw, atRel, nil, "line %d was written at %d ms, after the snapshot instant %d ms", i, lw, atRel))
		}
		if fo := hdrFO(hw); fo > e.q.span+1 {
			return fail(snapCorrupt("Line", fo, e.q.span+1, nil, "line %d has a floor %d ticks above its time, above the span %d", i, fo, e.q.span))
		}
		for x := 1; x < wordsPerLine; x++ {
			w := ln.w[x].Load()
			for sh := uint(0); sh < 64; sh += 32 {
				if ent := uint32(w >> sh); ent != 0 && entFP(ent) == 0 {
					return fail(snapCorrupt("Line", ent, nil, nil, "line %d holds an entry %#08x without a fingerprint", i, ent))
				}
			}
		}
	}

	// The downtime, >= 0, saturated against forged instants; the engine's
	// clock then reads atRel + downtime on the old scale (at most the
	// scale's end, where the engine's own clock saturates too).
	ms := e.tb.NowMillis()
	var down int64
	if nowWall := core.WallMillis(e.tb.Time(ms)); nowWall > atWall {
		if down = nowWall - atWall; down < 0 {
			down = math.MaxInt64
		}
	}
	target := atRel + uint64(min(down, lwMask))
	target = min(target, lwMask)
	e.base, e.off = ms, target // ms is target on the scale
	if adopt {
		e.seed, e.hasher = h.seed, h.hasher
	}
	e.floors.reset()
	for i := range e.lines {
		hw := e.lines[i].w[0].Load()
		if fl := floorOf(hw, e.q.lo(hdrLW(hw))); fl != 0 {
			e.floors.add(fl, true)
		}
	}
	return total, nil
}

// snapSeed is what a checked header gives the restore: the seed and the
// hasher under it.
type snapSeed struct {
	seed   uint64
	hasher core.Hasher
}

// checkHeader checks a snapshot header against e (adopting its seed when
// adopt is set, still checking the hasher under it).
func (e *Engine) checkHeader(b *[snapHeaderBytes]byte, adopt bool) (snapSeed, error) {
	le := binary.LittleEndian
	switch {
	case string(b[0:4]) != core.SnapshotMagic:
		return snapSeed{}, snapCorrupt("Magic", string(b[0:4]), core.SnapshotMagic, nil, "magic is %q, want %q", b[0:4], core.SnapshotMagic)
	case b[4] != snapVersion:
		return snapSeed{}, snapCorrupt("Version", b[4], snapVersion, nil, "format version %d is not supported (this build reads %d)", b[4], snapVersion)
	case b[5] != core.SnapshotKindBucket:
		return snapSeed{}, snapCorrupt("Kind", b[5], core.SnapshotKindBucket, nil, "kind %d is not a bucket snapshot (%d)", b[5], core.SnapshotKindBucket)
	case le.Uint64(b[96:]) != 0:
		return snapSeed{}, snapCorrupt("Reserved", nil, 0, nil, "reserved header bytes are not zero")
	}
	mine := e.header()
	f64 := func(off int) (got, want float64) {
		return math.Float64frombits(le.Uint64(b[off:])), math.Float64frombits(le.Uint64(mine[off:]))
	}
	u64 := func(off int) (got, want uint64) { return le.Uint64(b[off:]), le.Uint64(mine[off:]) }
	for _, f := range []struct {
		name string
		off  int
		f    bool
	}{{"Lines", 8, false}, {"Law.Kind", 6, false}, {"Ticks.Num", 16, false}, {"Ticks.Den", 24, false},
		{"Unit", 32, true}, {"Span", 40, false}, {"Rate", 48, true}, {"Max", 56, true}, {"Kappa", 64, true}, {"Resolution", 72, true}} {
		switch {
		case f.off == 6:
			if b[6] != mine[6] {
				return snapSeed{}, snapMismatch(f.name, LawKind(b[6]), LawKind(mine[6]))
			}
		case f.f:
			if g, w := f64(f.off); math.Float64bits(g) != math.Float64bits(w) {
				return snapSeed{}, snapMismatch(f.name, g, w)
			}
		default:
			if g, w := u64(f.off); g != w {
				return snapSeed{}, snapMismatch(f.name, g, w)
			}
		}
	}
	if b[7] != mine[7] {
		return snapSeed{}, snapMismatch("Hasher", core.HashKindName(b[7]), core.HashKindName(mine[7]))
	}
	s := snapSeed{seed: le.Uint64(b[80:]), hasher: e.hasher}
	if s.seed != e.seed {
		if !adopt {
			return snapSeed{}, snapMismatch("Seed", s.seed, e.seed)
		}
		if s.hasher = e.hf(s.seed); core.IsNil(s.hasher) {
			return snapSeed{}, snapMismatch("Hasher", "nil (the HasherFactory returned nil for the snapshot's seed)", core.HashKindName(mine[7]))
		}
	}
	if _, fp := core.HasherID(s.hasher); fp != le.Uint64(b[88:]) {
		return snapSeed{}, snapMismatch("Hasher fingerprint", fmt.Sprintf("%#016x", le.Uint64(b[88:])), fmt.Sprintf("%#016x", fp))
	}
	return s, nil
}

// clear empties e: every line zero (never written, no entry), no floor.
func (e *Engine) clear() {
	for i := range e.lines {
		for x := range wordsPerLine {
			e.lines[i].w[x].Store(0)
		}
	}
	e.floors.reset()
}

// reset empties the histogram.
func (h *floorHist) reset() {
	for i := range h.b {
		h.b[i].Store(0)
		h.top[i].Store(0)
	}
	h.last.Store(0)
	h.sw.Store(nil)
}
