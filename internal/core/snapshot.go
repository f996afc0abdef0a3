package core

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"time"

	"github.com/lfgrudge/grudge/internal/atom"
	"github.com/lfgrudge/grudge/internal/law"
)

// Snapshots (docs/snapshots.md has the byte table and the guarantees).
//
// A snapshot is a fixed 88-byte header, L*M cell records of 8 bytes and a
// CRC-32C (Castagnoli) of everything before it, all little-endian. A cell
// record is the float32 score bits and the cell's age in ms at the
// snapshot instant. The header carries the snapshot instant as a wall
// time (Unix ms), so a restore on another process clock decays every cell
// by its age at the snapshot plus the downtime, never by a difference of
// two unrelated epochs.

// maxAhead bounds how far after the snapshot instant a restored cell may
// be stamped (a cell written during the encode, a few ms at most; a forged
// record cannot stop a cell's decay for longer). WriteTo fails rather
// than write a cell stamped further ahead (the clock jumped hours during
// the encode): the restore would cap its lead and decay it before it was
// written (audit 49).
const maxAhead = int64(1) << 24

// farWall bounds the wall times a decoder reads (+-2^61 ms, 73 million
// years), so that forged ones cannot overflow the differences taken.
const farWall = int64(1) << 61

// boundWall clamps a wall time (Unix ms) to +-farWall.
func boundWall(x int64) int64 { return max(-farWall, min(x, farWall)) }

// WallMillis returns t's Unix millisecond saturated at the int64 range,
// without the wrap of t.UnixMilli past 292 million years (a clock that
// crossed the int64 ms range reads times that far off: audit 152).
// Snapshot headers store it; their decoders bound what they read
// (boundWall).
func WallMillis(t time.Time) int64 {
	// s*1000 + m, m in [0, 999], fits in int64 unless one of these
	// holds; where it fits, UnixMilli's (modular) arithmetic is exact.
	// No allocation: WriteTo allocates its one buffer only.
	s, m := t.Unix(), int64(t.Nanosecond()/1e6)
	switch {
	case s > math.MaxInt64/1000 || s == math.MaxInt64/1000 && m > math.MaxInt64%1000:
		return math.MaxInt64
	case s < math.MinInt64/1000-1 || s == math.MinInt64/1000-1 && m < 1000+math.MinInt64%1000:
		return math.MinInt64
	}
	return t.UnixMilli()
}

// Snapshot format constants.
const (
	// SnapshotMagic opens every snapshot (sketch and rotator).
	SnapshotMagic = "GRDG"
	// SnapshotVersion is the format version this package writes and reads.
	SnapshotVersion = 1
	// SnapshotKindSketch and SnapshotKindRotator tell the two payloads
	// apart; the others are the snapshots of the bucket engine
	// (internal/bucket), of a limit.Limiter and of a meter, which share
	// the magic and the version byte's place.
	SnapshotKindSketch  = 1
	SnapshotKindRotator = 2
	SnapshotKindBucket  = 3
	SnapshotKindLimiter = 4
	SnapshotKindMeter   = 5

	snapHeaderSize = 88
	snapCellSize   = 8
	snapCRCSize    = 4
	// snapChunk is the buffer of the streaming encoder and decoder, in
	// cell records.
	snapChunk = 8192
)

// Hash kinds in the header. A custom hasher is recorded as 0; every kind
// is also checked through the fingerprint (the hash of snapProbe).
const (
	hashKindCustom = 0
	hashKindXXH3   = 1
	hashKindSip    = 2
)

// snapProbe is the fixed key whose hash is the hasher's fingerprint.
const snapProbe = "github.com/lfgrudge/grudge snapshot probe"

// crcTable is the CRC-32C table of the snapshot checksum.
var crcTable = crc32.MakeTable(crc32.Castagnoli)

// CRC32C returns the CRC-32C (Castagnoli) of b, the snapshot checksum.
func CRC32C(b []byte) uint32 { return crc32.Checksum(b, crcTable) }

// SnapshotError reports a refused snapshot or merge: which header field,
// the value found and the value expected. errors.Is matches it against
// ErrCorruptSnapshot or ErrSnapshotMismatch (one of them), and Unwrap
// gives the cause (io.ErrUnexpectedEOF for a truncated stream), if any.
type SnapshotError struct {
	Field     string // header field, e.g. "CellsPerLevel", "Checksum"
	Got, Want any    // found in the snapshot (or the other sketch), expected
	msg       string
	kind      error // ErrCorruptSnapshot or ErrSnapshotMismatch
	err       error
}

// NewSnapshotError returns a *SnapshotError of kind (ErrCorruptSnapshot or
// ErrSnapshotMismatch) with message prefix + ": " + the formatted text.
// cause may be nil.
func NewSnapshotError(kind error, prefix, field string, got, want any, cause error, format string, args ...any) *SnapshotError {
	return &SnapshotError{Field: field, Got: got, Want: want, kind: kind, err: cause,
		msg: prefix + ": " + fmt.Sprintf(format, args...)}
}

func (e *SnapshotError) Error() string { return e.msg }

// Is reports whether target is the error's kind.
func (e *SnapshotError) Is(target error) bool { return target == e.kind }

// Unwrap returns the cause, if any.
func (e *SnapshotError) Unwrap() error { return e.err }

func corrupt(field string, got, want any, cause error, format string, args ...any) *SnapshotError {
	return NewSnapshotError(ErrCorruptSnapshot, "sketch", field, got, want, cause, "snapshot "+format, args...)
}

func mismatch(what, field string, got, want any) *SnapshotError {
	return NewSnapshotError(ErrSnapshotMismatch, "sketch", field, got, want, nil,
		"%s %s differs: got %v, the sketch has %v", what, field, got, want)
}

// snapHeader is the decoded header.
type snapHeader struct {
	version, kind     uint8
	decayKind, agg    uint8
	hashKind          uint8
	levels, m         uint32
	param, lo, hi     float64
	seed, fingerprint uint64
	epochWall, atWall int64 // Unix ms: the sketch's epoch, the snapshot instant
	cells             uint64
}

// header returns s's header for a snapshot taken at wall time atWall.
func (s *Sketch) header(atWall int64) snapHeader {
	k, p := law.Params(s.cfg.Decay)
	return snapHeader{
		version: SnapshotVersion, kind: SnapshotKindSketch,
		decayKind: uint8(k), agg: s.aggByte(), hashKind: hashKindOf(s.hasher),
		levels: s.levels, m: s.m,
		param: p, lo: s.cfg.Lo, hi: s.cfg.Hi,
		seed: s.cfg.Seed, fingerprint: s.hasher.Sum64String(snapProbe),
		epochWall: WallMillis(s.tb.Time(s.epoch)), atWall: atWall,
		cells: uint64(s.levels) * uint64(s.m),
	}
}

func hashKindOf(h Hasher) uint8 {
	switch h.(type) {
	case xxh3Hasher:
		return hashKindXXH3
	case sipHasher:
		return hashKindSip
	}
	return hashKindCustom
}

func (h *snapHeader) put(b []byte) {
	le := binary.LittleEndian
	copy(b[0:4], SnapshotMagic)
	b[4], b[5], b[6], b[7] = h.version, h.kind, h.decayKind, h.agg
	b[8], b[9], b[10], b[11] = h.hashKind, 0, 0, 0
	le.PutUint32(b[12:], h.levels)
	le.PutUint32(b[16:], h.m)
	le.PutUint32(b[20:], 0)
	le.PutUint64(b[24:], math.Float64bits(h.param))
	le.PutUint64(b[32:], math.Float64bits(h.lo))
	le.PutUint64(b[40:], math.Float64bits(h.hi))
	le.PutUint64(b[48:], h.seed)
	le.PutUint64(b[56:], h.fingerprint)
	le.PutUint64(b[64:], uint64(h.epochWall))
	le.PutUint64(b[72:], uint64(h.atWall))
	le.PutUint64(b[80:], h.cells)
}

// parseHeader decodes b (snapHeaderSize bytes) and checks what makes it
// well formed on its own: magic, version, kind, reserved bytes, cell count.
func parseHeader(b []byte) (snapHeader, error) {
	le := binary.LittleEndian
	var h snapHeader
	if string(b[0:4]) != SnapshotMagic {
		return h, corrupt("Magic", string(b[0:4]), SnapshotMagic, nil, "magic is %q, want %q", b[0:4], SnapshotMagic)
	}
	h.version, h.kind, h.decayKind, h.agg, h.hashKind = b[4], b[5], b[6], b[7], b[8]
	if h.version != SnapshotVersion {
		return h, corrupt("Version", h.version, SnapshotVersion, nil, "format version %d is not supported (this build reads %d)", h.version, SnapshotVersion)
	}
	if h.kind != SnapshotKindSketch {
		return h, corrupt("Kind", h.kind, SnapshotKindSketch, nil, "kind %d is not a sketch snapshot (%d)", h.kind, SnapshotKindSketch)
	}
	if b[9]|b[10]|b[11] != 0 || le.Uint32(b[20:]) != 0 {
		return h, corrupt("Reserved", nil, 0, nil, "reserved header bytes are not zero")
	}
	h.levels = le.Uint32(b[12:])
	h.m = le.Uint32(b[16:])
	h.param = math.Float64frombits(le.Uint64(b[24:]))
	h.lo = math.Float64frombits(le.Uint64(b[32:]))
	h.hi = math.Float64frombits(le.Uint64(b[40:]))
	h.seed = le.Uint64(b[48:])
	h.fingerprint = le.Uint64(b[56:])
	h.epochWall = int64(le.Uint64(b[64:]))
	h.atWall = int64(le.Uint64(b[72:]))
	h.cells = le.Uint64(b[80:])
	if h.cells != uint64(h.levels)*uint64(h.m) {
		return h, corrupt("Cells", h.cells, uint64(h.levels)*uint64(h.m), nil, "cell count %d is not Levels x CellsPerLevel = %d x %d", h.cells, h.levels, h.m)
	}
	return h, nil
}

// check compares a parsed header with s's own (mine), field by field.
// what names the other side in messages ("snapshot", "merged sketch").
func (h *snapHeader) check(mine *snapHeader, what string) error {
	f64 := func(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }
	switch {
	case h.levels != mine.levels:
		return mismatch(what, "Levels", h.levels, mine.levels)
	case h.m != mine.m:
		return mismatch(what, "CellsPerLevel", h.m, mine.m)
	case h.decayKind != mine.decayKind:
		return mismatch(what, "Decay", law.Kind(h.decayKind), law.Kind(mine.decayKind))
	case !f64(h.param, mine.param):
		return mismatch(what, "Decay parameter", h.param, mine.param)
	case !f64(h.lo, mine.lo):
		return mismatch(what, "Lo", h.lo, mine.lo)
	case !f64(h.hi, mine.hi):
		return mismatch(what, "Hi", h.hi, mine.hi)
	case h.agg != mine.agg:
		return mismatch(what, "Aggregator", aggName(h.agg), aggName(mine.agg))
	case h.hashKind != mine.hashKind:
		return mismatch(what, "Hasher", hashKindName(h.hashKind), hashKindName(mine.hashKind))
	case h.seed != mine.seed:
		return mismatch(what, "Seed", h.seed, mine.seed)
	case h.fingerprint != mine.fingerprint:
		return mismatch(what, "Hasher fingerprint", fmt.Sprintf("%#016x", h.fingerprint), fmt.Sprintf("%#016x", mine.fingerprint))
	}
	return nil
}

func hashKindName(k uint8) string {
	switch k {
	case hashKindXXH3:
		return "XXH3"
	case hashKindSip:
		return "SipHash"
	case hashKindCustom:
		return "custom"
	}
	return fmt.Sprintf("hash kind %d", k)
}

// SnapshotSize returns the exact length in bytes of s's snapshot.
func (s *Sketch) SnapshotSize() int64 {
	s.built()
	return snapHeaderSize + int64(s.levels)*int64(s.m)*snapCellSize + snapCRCSize
}

// aggCustom is the header's aggregator byte of a sketch with
// Config.AggregateFunc, which replaces the built-in Aggregator: it is
// only checked to be custom on both sides, as a custom decay law is.
const aggCustom = 255

// aggByte is s's aggregator byte in a header.
func (s *Sketch) aggByte() uint8 {
	if s.aggFunc != nil {
		return aggCustom
	}
	return uint8(s.agg)
}

// aggName names a header's aggregator byte in a mismatch.
func aggName(b uint8) string {
	if b == aggCustom {
		return "custom (AggregateFunc)"
	}
	return Aggregator(b).String()
}

// jumped is WriteTo's error for a cell stamped lead ms after the
// snapshot instant that only its stamp can state, beyond maxAhead.
func jumped(lead int64) error {
	return fmt.Errorf("sketch: the clock jumped during the encode and a cell was written or re-stamped %v after the snapshot instant, which only its stamp can state (at most %v after it); %w",
		msDuration(lead), msDuration(maxAhead), ErrTakeAgain)
}

// spanned is WriteTo's error when the stamps read span more than their
// 32 bits convert exactly: a re-base after a clock jump of weeks.
func spanned(span int64) error {
	return fmt.Errorf("sketch: the clock jumped during the encode and cells were re-stamped: the stamps read span %v, more than a snapshot can convert (%v); %w",
		msDuration(span), msDuration(horizonWindow), ErrTakeAgain)
}

func msDuration(ms int64) time.Duration {
	return time.Duration(min(ms, math.MaxInt64/int64(time.Millisecond))) * time.Millisecond
}

// MarshalBinary returns a snapshot of s (encoding.BinaryMarshaler). It is
// WriteTo into one buffer of SnapshotSize bytes; see WriteTo for what a
// snapshot taken under concurrent updates holds.
func (s *Sketch) MarshalBinary() ([]byte, error) {
	var b bytes.Buffer
	b.Grow(int(s.SnapshotSize()))
	if _, err := s.WriteTo(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// WriteTo writes a snapshot of s to w (io.WriterTo) through a fixed
// 64 KiB buffer, and returns the bytes written.
//
// It may run concurrently with any other operation, Merge included. What
// it then captures: the snapshot instant T is one clock reading taken at
// the start; each cell is read with one atomic load, so each record is a
// value the cell really held, at some moment during the encode, stated as
// its age at T. A cell written or re-stamped after T (during the
// encode) is read back to T by the decay law, rounded up, at age 0: at
// or above its value at every instant from T on (a loose bound between
// T and its stamp: up to e^(lambda x lead) above), and its own value
// again from its stamp on; where that would exceed Hi it is stated at
// Hi, stamped after T (a negative age) as little as lets Hi decay to its
// value by the stamp; a custom law's score, which has no inverse, and a
// credit keep the stamp (a negative age, restored that far after T: a
// credit whose last write during the encode was itself negative reads
// that newer value, below its truth, between T and its stamp, audit 88);
// restate has the details. The
// set of cells is not an atomic snapshot: cells are read one after the
// other, so each lies between its value at the start of the encode and
// its value at the end. With non-negative deltas, every update that
// completed before WriteTo was called is fully included (and decayed to
// T); an update in flight may be included at some of its L cells and not
// others, which under Min aggregation can only lower that key's estimate
// to what it was before the update, never below. A TryUpdate is likewise
// included or not per cell. If a cell would be stated more than 2^24 ms
// (4.66 hours) after T (the clock jumped during the encode and the cell
// was written or re-stamped after the jump: its value read back passes
// Hi, which after a jump of hours or days holds for almost any score,
// or it keeps its stamp), or if the stamps read span more than 2^31 ms
// (a re-base after a jump of weeks), WriteTo fails with an error saying
// so (it matches ErrTakeAgain): such a cell cannot be restored at its
// stamp, and a snapshot restored below the truth is worse than none.
// Take it again.
func (s *Sketch) WriteTo(w io.Writer) (int64, error) {
	s.built()
	return s.writeAt(w, s.nowMillis())
}

// writeAt is WriteTo with the snapshot instant T = ms, a reading of s's
// Timebase already taken: a rotator states every generation at its own
// one instant, so that a restore maps every generation's cells to the
// same times (each generation at its own instant, a restoring clock
// behind them clamped each one's downtime to 0 separately, and the later
// generations kept the encode's length as extra age: audit 58).
func (s *Sketch) writeAt(w io.Writer, ms int64) (int64, error) {
	s.maintain(ms) // after it, ms - floor < 2^31: every age fits 32 bits
	floor := s.sweep.floor.Load()
	fs := s.stamp(floor)
	h := s.header(WallMillis(s.tb.Time(ms)))

	buf := make([]byte, snapChunk*snapCellSize)
	h.put(buf[:snapHeaderSize])
	crc := crc32.Update(0, crcTable, buf[:snapHeaderSize])
	n, err := w.Write(buf[:snapHeaderSize])
	total := int64(n)
	if err != nil {
		return total, err
	}
	le := binary.LittleEndian
	pos := 0
	flush := func() error {
		crc = crc32.Update(crc, crcTable, buf[:pos])
		n, err := w.Write(buf[:pos])
		total += int64(n)
		pos = 0
		return err
	}
	for l := range int(s.levels) {
		row := s.cells[l*s.stride : l*s.stride+int(s.m)]
		for i := range row {
			c := row[i].Load()
			// The cell's absolute time: at or after floor (horizon
			// invariant), so the offset from floor's stamp is exact.
			age := ms - (floor + int64(c.Stamp()-fs))
			score := c.Score()
			if lead := -age; lead > 0 { // written after T, during the encode
				score, age = s.restate(score, lead)
				if age < -maxAhead {
					return total, jumped(lead)
				}
			}
			age = min(age, math.MaxInt32)
			le.PutUint32(buf[pos:], math.Float32bits(score))
			le.PutUint32(buf[pos+4:], uint32(int32(age)))
			pos += snapCellSize
			if pos == len(buf) {
				if err := flush(); err != nil {
					return total, err
				}
			}
		}
	}
	// Every stamp read is below low + 2^31 (low as it is now, after the
	// last load) and at or after floor: the conversion above was exact
	// if that span is within 2^32 ms, which only an urgent re-base past
	// a clock jump of over 24.8 days during the encode breaks.
	if span := subSat(s.low.Load(), floor); span > horizonWindow {
		return total, spanned(span)
	}
	if pos > 0 {
		if err := flush(); err != nil {
			return total, err
		}
	}
	le.PutUint32(buf[:4], crc)
	n, err = w.Write(buf[:4])
	return total + int64(n), err
}

// restate returns the record (score, age at T) of a cell that holds v
// stamped lead > 0 ms after the snapshot instant T: it was written
// during the encode. Stated at age 0 with v, its earlier mass would
// decay twice over the lead (audit 23); stamped lead ms after T (a
// negative age), it reads v before its stamp, below its earlier mass
// decayed to that instant (a restore on a clock at T read 15.95 where
// the updates before the encode summed to 16.56: audit 62). So a score
// of a law with an inverse (None, Exponential, Linear) is read back to T
// by it, rounded up, at age 0, as Merge does with a cell written during
// a merge: at or above the value at every instant from T on, for
// non-negative deltas, and v again from its stamp on. A 0 is read back
// too (Merge does not: there every empty cell of a replica ahead would),
// unless the law is None: a draining law may have brought a
// positive score to 0 by the stamp (Linear: at most rate x lead before;
// Exponential: a float64 underflow, read back from 2^-1022, far above
// what underflows; audit 65: a delta-0 write, or a horizon sweep after a
// jump, re-stamps a drained cell). Where the read-back value exceeds
// Hi, the cell is stated at Hi, stamped the least whole ms after T from
// which Hi decays to it or more by the stamp: never below a clamped
// score before it, and v or more from the stamp on. Other cells (a
// custom law, which has no inverse; a credit, which every provided law
// moves toward 0, so that v is at or above its earlier truth before its
// stamp) keep the negative age -lead.
func (s *Sketch) restate(v float32, lead int64) (float32, int64) {
	b := float64(v)
	switch kind := s.rules.Kind(); {
	case kind == law.KindCustom || v < 0:
		return v, -lead
	case v == 0 && kind == law.KindNone:
		return 0, 0
	case v == 0 && kind == law.KindExponential:
		b = 0x1p-1022
	}
	if up, _ := law.Undecay(s.cfg.Decay, b, lead); up <= s.rules.Hi() {
		return s.rules.Round(up), 0
	}
	return float32(s.rules.Hi()), -s.hiLead(0, 0, b, lead)
}

// hiLead returns the least a in (0, lead] such that rest, held until
// hold ms and decayed from there to a, plus b read back from lead to a
// (Undecay(b, lead-a)) is at most Hi: for a cell that will hold b at
// lead ms after an instant T (b positive, a law with an inverse) on top
// of rest at T (or held until T+hold), whose sum read back to T
// exceeds Hi, Hi stamped a ms after T reads Hi until then, at or above
// any clamped truth, and at or above both parts' decay from then on.
// Both terms fall as a grows, so a bisection finds it; lead where no
// smaller a qualifies (the None law, or a sum above Hi at lead still,
// where one sketch fed both would have held Hi too). WriteTo's restate
// (rest 0) and Merge use it.
func (s *Sketch) hiLead(rest float64, hold int64, b float64, lead int64) int64 {
	hi := s.rules.Hi()
	lo, a := int64(0), lead
	for a-lo > 1 {
		mid := lo + (a-lo)/2
		if up, _ := law.Undecay(s.cfg.Decay, b, lead-mid); s.rules.Decay(rest, max(mid-hold, 0))+up <= hi {
			a = mid
		} else {
			lo = mid
		}
	}
	return a
}

// UnmarshalBinary restores s from a snapshot (encoding.BinaryUnmarshaler).
// s must have been built by New with the configuration the snapshot was
// taken under: the header is checked against s's own Levels,
// CellsPerLevel, decay law and parameter, Lo, Hi, Aggregator, hasher kind,
// Seed and hasher fingerprint (the hash of a fixed probe key, so custom
// hashers are checked too, as far as one probe can). A custom decay law
// and a custom AggregateFunc are only checked to be custom on both sides:
// their parameters cannot be verified. The checksum and length are verified before any cell is
// touched; a refused snapshot leaves s unchanged, except for a
// well-checksummed snapshot holding an invalid score, which leaves s
// reset (empty).
//
// Every cell ages by its age at the snapshot instant plus the downtime:
// the wall time of s's current reading (s's Timebase) minus the
// snapshot's wall time, counted as 0 if negative (a restore clock behind
// the snapshot's never makes scores grow). A cell whose total age is
// below 2^29 ms (6.2 days) keeps its float32 score and is stamped that
// age before now, so the restored sketch answers every later Query
// exactly as the original would have at the same wall time, until a
// horizon sweep of either one re-stamps the cell (2^29 to 2^30 ms after
// its floor, 6.2 to 12.4 days: the sweep rounds the decayed value up to
// float32, and the two sketches sweep on their own schedules), and
// within one float32 ulp, upward, after it; an older cell is decayed
// once (Rules.Decay over the int64 age, years included), rounded up and
// stamped now. A negative total age (a record stated after the snapshot
// instant, capped at 2^24 ms: one WriteTo wrote before stop 47 for a
// cell written during the encode, or a forged one) is read back to now
// by the law as WriteTo now states such a cell (see WriteTo), or keeps
// its lead as a stamp after now. The horizon restarts 2^29 ms before now.
//
// Like Reset, it is not atomic: call it on a sketch nobody else is using.
// It allocates nothing in proportion to the header: lengths come from s's
// configuration.
func (s *Sketch) UnmarshalBinary(data []byte) error {
	s.built()
	if len(data) < snapHeaderSize+snapCRCSize {
		return corrupt("Length", len(data), s.SnapshotSize(), io.ErrUnexpectedEOF, "is truncated: %d bytes, shorter than a header", len(data))
	}
	body := data[:len(data)-snapCRCSize]
	if got, want := binary.LittleEndian.Uint32(data[len(body):]), crc32.Checksum(body, crcTable); got != want {
		if int64(len(data)) < s.SnapshotSize() {
			return corrupt("Length", len(data), s.SnapshotSize(), io.ErrUnexpectedEOF, "is truncated: %d bytes of %d", len(data), s.SnapshotSize())
		}
		return corrupt("Checksum", got, want, nil, "checksum mismatch: stored %#08x, computed %#08x", got, want)
	}
	if _, err := s.readHeader(data[:snapHeaderSize]); err != nil {
		return err
	}
	if int64(len(data)) != s.SnapshotSize() {
		return corrupt("Length", len(data), s.SnapshotSize(), nil, "is %d bytes, want %d for Levels x CellsPerLevel = %d x %d", len(data), s.SnapshotSize(), s.levels, s.m)
	}
	_, err := s.ReadFrom(bytes.NewReader(data))
	return err
}

// readHeader parses b and checks it against s.
func (s *Sketch) readHeader(b []byte) (snapHeader, error) {
	h, err := parseHeader(b)
	if err != nil {
		return h, err
	}
	mine := s.header(0)
	return h, h.check(&mine, "snapshot")
}

// ReadFrom restores s from a snapshot read from r (io.ReaderFrom), reading
// exactly the snapshot's bytes and no more, and returns the bytes read.
// It checks and restores as UnmarshalBinary does, but streams the cells
// through a fixed 64 KiB buffer into s as they arrive, so the checksum is
// known only at the end: a refused header leaves s unchanged, and any
// error after the header (truncation, an invalid score, a checksum
// mismatch) leaves s reset (empty), never half restored, as does a
// custom decay law that panics while a cell is restored (the panic goes
// on to the caller). Not concurrent with other use of s.
func (s *Sketch) ReadFrom(r io.Reader) (int64, error) {
	s.built()
	return s.readFrom(r, 0, false)
}

// readFrom is ReadFrom; in a rotator snapshot (rot), inst is the
// rotator's snapshot instant (wall ms, bounded to +-2^61), the one its
// generations are mapped to the restoring clock by: a generation stated
// after it (its own encode's start, as rotators before stop 46 wrote
// them), restored on a clock behind its own instant, has its cells'
// ages shifted by the difference from max(now, inst), at most 2^24 ms,
// so that every generation's cells land at the same times (audit 58's
// skew, for the old format too); on a clock at or past its instant its
// downtime is counted from it, as always; one stated before inst (only
// a forged snapshot) is taken at it.
func (s *Sketch) readFrom(r io.Reader, inst int64, rot bool) (int64, error) {
	buf := make([]byte, snapChunk*snapCellSize)
	var total int64
	read := func(b []byte) error {
		n, err := io.ReadFull(r, b)
		total += int64(n)
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return corrupt("Length", total, s.SnapshotSize(), io.ErrUnexpectedEOF, "is truncated after %d bytes of %d", total, s.SnapshotSize())
		}
		return err
	}
	if err := read(buf[:snapHeaderSize]); err != nil {
		return total, err
	}
	h, err := s.readHeader(buf[:snapHeaderSize])
	if err != nil {
		return total, err
	}
	crc := crc32.Update(0, crcTable, buf[:snapHeaderSize])

	ms := s.nowMillis()
	// downtime >= 0, saturated: a forged instant near the ends of int64
	// must not overflow it. In a rotator, max(now, inst) - at: negative
	// (at most 2^24 ms) for a generation stated after the rotator's
	// instant and restored on a clock behind it.
	var downtime int64
	nowWall := WallMillis(s.tb.Time(ms))
	if rot {
		// now - at on a clock at or past the generation's own instant
		// (as before stop 47, whatever the skew: audit 67), and mapped
		// by the rotator's instant behind it; at is bounded so that a
		// forged one cannot overflow.
		at := min(max(h.atWall, inst), farWall)
		downtime = max(max(min(nowWall, farWall), inst)-at, -maxAhead)
	} else if nowWall > h.atWall {
		downtime = nowWall - h.atWall
		if downtime < 0 {
			downtime = math.MaxInt64
		}
	}
	now := s.stamp(ms)
	lo, hi := s.rules.Lo(), s.rules.Hi()
	s.sweep.mu.Lock()
	defer s.sweep.mu.Unlock()
	s.resets.Add(1) // receipts issued before the load are void
	empty := func() {
		w := atom.Pack(0, now)
		for i := range s.cells {
			s.cells[i].Store(w)
		}
		s.sweep.active = false
		s.initHorizon(ms)
	}
	// A custom law that panics in the loop below (Rules.Decay of an old
	// cell) leaves s empty, as an error would, not half restored; the
	// panic goes on to the caller.
	finished := false
	defer func() {
		if !finished {
			empty()
		}
	}()
	fail := func(err error) (int64, error) {
		finished = true
		empty()
		return total, err
	}
	le := binary.LittleEndian
	left := int(s.levels) * int(s.m)
	l, i := 0, 0 // next cell: row l, index i
	for left > 0 {
		k := min(left, snapChunk)
		b := buf[:k*snapCellSize]
		if err := read(b); err != nil {
			return fail(err)
		}
		crc = crc32.Update(crc, crcTable, b)
		for j := 0; j < len(b); j += snapCellSize {
			score := math.Float32frombits(le.Uint32(b[j:]))
			age := int64(int32(le.Uint32(b[j+4:]))) // < 0: written after T
			age = max(age, -maxAhead)
			v := float64(score)
			if !(v >= lo && v <= hi) { // NaN fails both
				return fail(corrupt("Cell", v, nil, nil, "cell %d of level %d holds %v, outside [%v, %v]", i, l, v, lo, hi))
			}
			total := age + downtime
			if age > 0 && downtime > math.MaxInt64-age {
				total = math.MaxInt64 // a forged instant decades back
			}
			if total < 0 {
				// Stated after the instant the restore maps to now: a
				// record of a snapshot older than stop 47, or of an old
				// rotator's later generation. Read back by the law as
				// WriteTo now states such a cell (a record WriteTo
				// restated already is unchanged by it).
				score, total = s.restate(score, -total)
				total = max(total, -maxAhead)
				v = float64(score)
			}
			s.markNegative(v)
			w := atom.Pack(score, s.stamp(ms-total))
			if total >= sweepKeep || total > subSat(ms, math.MinInt64) {
				// Too old to keep its stamp inside the horizon, or
				// older than the scale's first millisecond (a clock
				// near MinInt64: ms - total would wrap, and the cell
				// read as from the future: audit 145): decay it once,
				// round up, stamp it now.
				w = atom.Pack(s.rules.Round(s.rules.Decay(v, total)), now)
			}
			s.cells[l*s.stride+i].Store(w)
			if i++; i == int(s.m) {
				// The row's padding cells are never used, but the
				// sweeper visits them: stamp them now too, so every
				// cell keeps the horizon invariant.
				for p := l*s.stride + i; p < (l+1)*s.stride; p++ {
					s.cells[p].Store(atom.Pack(0, now))
				}
				l, i = l+1, 0
			}
		}
		left -= k
	}
	if err := read(buf[:snapCRCSize]); err != nil {
		return fail(err)
	}
	if got := le.Uint32(buf[:snapCRCSize]); got != crc {
		return fail(corrupt("Checksum", got, crc, nil, "checksum mismatch: stored %#08x, computed %#08x", got, crc))
	}
	finished = true
	s.sweep.active = false
	s.initHorizon(subSat(ms, sweepKeep)) // every stamp is at or after ms - sweepKeep
	return total, nil
}
