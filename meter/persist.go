package meter

import (
	"encoding/binary"
	"fmt"
	"io"
	"time"

	"github.com/lfgrudge/grudge/internal/core"
)

/*
Snapshot format of Rate and Novelty: a 32-byte header, then the
rotator's snapshot (internal/core/rotator_snapshot.go: its generations'
cells, each cell's age, the rotation deadline and the base seed), all
little-endian:

	0  "GRDG"  magic (the sketch's)
	4  u8      format version (meterSnapVersion)
	5  u8      kind (core.SnapshotKindMeter)
	6  u8      meter: 1 Rate, 2 Novelty
	7  u8      reserved, 0
	8  i64     the window (Rate) or T (Novelty), in ns
	16 i64     the rotation Period, in ms
	24 u32     reserved, 0
	28 u32     CRC-32C of bytes 0..27

The header is checked (checksum, then every field against the restoring
meter's) before the rotator is touched; the rotator's snapshot checks the
rest (generations, period, every sketch's levels, cells, decay, clamp and
hasher) and its base seed is adopted.
*/

const (
	meterSnapVersion = 1
	meterSnapHeader  = 32
	meterRate        = 1
	meterNovelty     = 2
)

func meterHeader(kind byte, window time.Duration, r *core.Rotator) [meterSnapHeader]byte {
	var b [meterSnapHeader]byte
	le := binary.LittleEndian
	copy(b[0:4], core.SnapshotMagic)
	b[4], b[5], b[6] = meterSnapVersion, core.SnapshotKindMeter, kind
	le.PutUint64(b[8:], uint64(window))
	le.PutUint64(b[16:], uint64(r.Config().Period.Milliseconds()))
	le.PutUint32(b[28:], core.CRC32C(b[:28]))
	return b
}

func writeMeter(w io.Writer, kind byte, window time.Duration, r *core.Rotator) (int64, error) {
	hdr := meterHeader(kind, window, r)
	n, err := w.Write(hdr[:])
	if err != nil {
		return int64(n), err
	}
	m, err := r.WriteTo(w)
	return int64(n) + m, err
}

func readMeter(rd io.Reader, kind byte, window time.Duration, r *core.Rotator) (int64, error) {
	var b [meterSnapHeader]byte
	n, err := io.ReadFull(rd, b[:])
	if err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return int64(n), snapCorrupt("Length", n, meterSnapHeader+r.SnapshotSize(), io.ErrUnexpectedEOF, "is truncated after %d bytes", n)
		}
		return int64(n), err
	}
	le := binary.LittleEndian
	mine := meterHeader(kind, window, r)
	switch {
	case string(b[0:4]) != core.SnapshotMagic:
		return int64(n), snapCorrupt("Magic", string(b[0:4]), core.SnapshotMagic, nil, "magic is %q, want %q", b[0:4], core.SnapshotMagic)
	case b[4] != meterSnapVersion:
		return int64(n), snapCorrupt("Version", b[4], meterSnapVersion, nil, "format version %d is not supported (this build reads %d)", b[4], meterSnapVersion)
	case b[5] != core.SnapshotKindMeter:
		return int64(n), snapCorrupt("Kind", b[5], core.SnapshotKindMeter, nil, "kind %d is not a meter snapshot (%d)", b[5], core.SnapshotKindMeter)
	case le.Uint32(b[28:]) != core.CRC32C(b[:28]):
		return int64(n), snapCorrupt("Checksum", le.Uint32(b[28:]), core.CRC32C(b[:28]), nil, "header checksum mismatch")
	case b[7] != 0 || le.Uint32(b[24:]) != 0:
		return int64(n), snapCorrupt("Reserved", nil, 0, nil, "reserved header bytes are not zero")
	case b[6] != kind:
		return int64(n), snapMismatch("Meter", meterName(b[6]), meterName(kind))
	case le.Uint64(b[8:]) != le.Uint64(mine[8:]):
		return int64(n), snapMismatch("Window", time.Duration(le.Uint64(b[8:])), window)
	case le.Uint64(b[16:]) != le.Uint64(mine[16:]):
		return int64(n), snapMismatch("Period", fmt.Sprintf("%dms", int64(le.Uint64(b[16:]))), fmt.Sprintf("%dms", int64(le.Uint64(mine[16:]))))
	}
	m, err := r.ReadFromAdopt(rd)
	if err != nil {
		err = fmt.Errorf("meter: %w", err)
	}
	return int64(n) + m, err
}

func meterName(k byte) string {
	switch k {
	case meterRate:
		return "Rate"
	case meterNovelty:
		return "Novelty"
	}
	return fmt.Sprintf("meter kind %d", k)
}

func snapCorrupt(field string, got, want any, cause error, format string, args ...any) error {
	return core.NewSnapshotError(core.ErrCorruptSnapshot, "meter", field, got, want, cause, "snapshot "+format, args...)
}

func snapMismatch(field string, got, want any) error {
	return core.NewSnapshotError(core.ErrSnapshotMismatch, "meter", field, got, want, nil,
		"snapshot %s differs: got %v, the meter has %v", field, got, want)
}

// SnapshotSize returns the exact length in bytes of r's snapshot.
func (r *Rate) SnapshotSize() int64 { return meterSnapHeader + r.rot().SnapshotSize() }

// WriteTo writes a snapshot of r to w (io.WriterTo: snapshot.Saver and
// snapshot.WriteFile take a *Rate): a header, then the rotator's cells
// with their ages, its rotation deadline and its hash seed. It may run
// concurrently with every other method and never blocks them (but as any
// operation it may be the first after 2^31 ms without a sweep, which
// re-bases the sketch under its lock: package sketch, "No locks"): each
// cell is read with one atomic load, so the snapshot is not a global cut
// (the sketch's WriteTo says what it holds). It fails with an error
// matching sketch.ErrTakeAgain when a Period ended during the encode (or
// the clock jumped during the encode and a cell written or re-stamped
// after the jump, by a write or by a read that runs a horizon sweep after
// a jump of days, can only be stated over 2^24 ms after the instant: a
// Novelty's mark past 2^24 ms, a Rate's count once its value read back
// passes its Hi; docs/snapshots.md): take it again (snapshot.Saver does,
// at once); an encode longer than the Period, under traffic, is never
// taken: raise WithPeriodWindows.
func (r *Rate) WriteTo(w io.Writer) (int64, error) {
	return writeMeter(w, meterRate, r.window, r.rot())
}

// ReadFrom restores r from a snapshot read from rd (io.ReaderFrom:
// snapshot.Load takes a *Rate), reading exactly its bytes. r must be
// freshly built with the window, Period (window x PeriodWindows, in
// whole milliseconds) and size the snapshot was taken under, whatever its seed: the snapshot's seed replaces r's. A
// different configuration is an error matching sketch.ErrSnapshotMismatch,
// a corrupt or truncated snapshot one matching sketch.ErrCorruptSnapshot;
// either way r is left unchanged. Every counter decays by the wall time
// elapsed since the snapshot. Not safe for concurrent use: restore before
// serving.
func (r *Rate) ReadFrom(rd io.Reader) (int64, error) {
	return readMeter(rd, meterRate, r.window, r.rot())
}

// SnapshotSize returns the exact length in bytes of n's snapshot.
func (n *Novelty) SnapshotSize() int64 { return meterSnapHeader + n.rot().SnapshotSize() }

// WriteTo writes a snapshot of n to w; see Rate.WriteTo.
func (n *Novelty) WriteTo(w io.Writer) (int64, error) {
	return writeMeter(w, meterNovelty, n.t, n.rot())
}

// ReadFrom restores n from a snapshot read from rd; see Rate.ReadFrom. A
// key marked within T of the snapshot's instant is seen until T after
// its mark, the downtime counted.
func (n *Novelty) ReadFrom(rd io.Reader) (int64, error) {
	return readMeter(rd, meterNovelty, n.t, n.rot())
}
