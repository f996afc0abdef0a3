package limit

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"github.com/lfgrudge/grudge/internal/core"
)

/*
Snapshot format (see the package documentation, "Saving and restoring").
A limiter snapshot is a 64-byte header followed by the engine's own
snapshot (a bucket snapshot, internal/bucket/snapshot.go, or a rotator
snapshot, internal/core/rotator_snapshot.go; nothing for Inf), all
little-endian:

	0  "GRDG"  magic (the sketch's)
	4  u8      format version (limiterSnapVersion)
	5  u8      kind (core.SnapshotKindLimiter)
	6  u8      engine: 0 none (Inf), 1 Buckets, 2 CountMin
	7  u8      flags: bit 0 conservative update; others 0
	8  f64     unit: engine units per token          } the engine's base
	16 f64     drain: units drained per ms            } units (internal/units)
	24 f64     MaxDebt in tokens (the engine's clamp, MaxDebt x unit)
	32 u64     Buckets: Lines; CountMin: Levels << 32 | CellsPerLevel
	40 u32     CountMin: Generations (0 for Buckets and Inf)
	44 u32     reserved, 0
	48 i64     CountMin: Period in ms (0 otherwise)
	56 u32     reserved, 0
	60 u32     CRC-32C of bytes 0..59

Every header field must equal the restoring limiter's, bit for bit: the
header is checked (its own checksum first) before the engine is touched,
and the engine's snapshot then checks the rest (its geometry and law
again, the hasher's kind and fingerprint) and carries the hidden state:
the debts with their times, and the hash seed, which the restoring
limiter adopts. The limit and burst are not in it: they are
configuration (a limit with other base units is a mismatch, through unit
and drain).
*/

const (
	limiterSnapVersion = 1
	limiterSnapHeader  = 64
)

// SnapshotSize returns the exact length in bytes of the limiter's
// snapshot (WriteTo); snapshot.Load checks a file's size against it
// before it touches the limiter. It panics on the zero Limiter.
func (l *Limiter) SnapshotSize() int64 {
	switch {
	case l.b != nil:
		return limiterSnapHeader + l.b.SnapshotSize()
	case l.r != nil:
		return limiterSnapHeader + l.r.SnapshotSize()
	case l.inf:
		return limiterSnapHeader
	}
	panic(errZero)
}

// snapHeader returns l's snapshot header.
func (l *Limiter) snapHeader() [limiterSnapHeader]byte {
	var b [limiterSnapHeader]byte
	le := binary.LittleEndian
	copy(b[0:4], core.SnapshotMagic)
	b[4], b[5] = limiterSnapVersion, core.SnapshotKindLimiter
	switch {
	case l.b != nil:
		b[6] = byte(Buckets)
		le.PutUint64(b[32:], uint64(l.b.Lines()))
	case l.r != nil:
		cfg := l.r.Config()
		b[6] = byte(CountMin)
		if cfg.Sketch.Conservative {
			b[7] = 1
		}
		le.PutUint64(b[32:], uint64(cfg.Sketch.Levels)<<32|uint64(cfg.Sketch.CellsPerLevel))
		le.PutUint32(b[40:], cfg.Generations)
		le.PutUint64(b[48:], uint64(l.period.Milliseconds()))
	}
	le.PutUint64(b[8:], math.Float64bits(l.unit))
	le.PutUint64(b[16:], math.Float64bits(l.drain))
	le.PutUint64(b[24:], math.Float64bits(l.maxDebt))
	le.PutUint32(b[60:], core.CRC32C(b[:60]))
	return b
}

// WriteTo writes a snapshot of the limiter to w (io.WriterTo, so that
// snapshot.Saver and snapshot.WriteFile take a *Limiter) and returns the
// bytes written: a header naming the engine and its base units, then the
// engine's snapshot with the hash seed. It may run concurrently with every
// other method and never blocks them (each cell or line is read with
// atomic loads; on the count-min it may, as any operation, be the first
// after 2^31 ms without a sweep, which re-bases the sketch under its lock:
// package sketch, "No locks"; the snapshot is not a global cut: see
// "Saving and restoring"). On the count-min engine it fails with an error
// matching sketch.ErrTakeAgain when a Period ends during the encode (or
// the clock jumps during the encode and a cell written or re-stamped after
// it can only be stated over 2^24 ms after the instant: any debt once the
// jump passes 2^24 ms plus the time MaxDebt takes to drain to it;
// docs/snapshots.md): take it again (snapshot.Saver does, at once); an
// encode longer than the Period, under traffic, is never taken. It panics
// on the zero Limiter.
func (l *Limiter) WriteTo(w io.Writer) (int64, error) {
	if l.none() && !l.inf {
		panic(errZero)
	}
	hdr := l.snapHeader()
	n, err := w.Write(hdr[:])
	total := int64(n)
	if err != nil {
		return total, err
	}
	var m int64
	switch {
	case l.b != nil:
		m, err = l.b.WriteTo(w)
	case l.r != nil:
		m, err = l.r.WriteTo(w)
	}
	return total + m, err
}

// ReadFrom restores the limiter from a snapshot read from r
// (io.ReaderFrom, so that snapshot.Load takes a *Limiter), reading
// exactly its bytes, and returns the bytes read. The limiter must be
// freshly built by New with the configuration the snapshot was taken
// under, whatever its seed: the engine, its base units (set by the limit
// and MaxDebt), MaxDebt, the size, and for CountMin Generations, Period
// and conservative update must match (an error matching
// sketch.ErrSnapshotMismatch otherwise), and the snapshot's hash seed
// replaces the limiter's, so every key maps to the cells it had. Every
// debt has drained by the time elapsed since the snapshot on the wall
// clock (the limiter's clock's time.Time; none if that is earlier). A
// corrupt or truncated snapshot is an error matching
// sketch.ErrCorruptSnapshot. On any error the limiter is left empty, as
// built (or unchanged, when the header is refused). Not safe for
// concurrent use: restore before serving. It panics on the zero Limiter.
func (l *Limiter) ReadFrom(r io.Reader) (int64, error) {
	if l.none() && !l.inf {
		panic(errZero)
	}
	var hdr [limiterSnapHeader]byte
	n, err := io.ReadFull(r, hdr[:])
	total := int64(n)
	if err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return total, snapCorrupt("Length", total, l.SnapshotSize(), io.ErrUnexpectedEOF, "is truncated after %d bytes of %d", total, l.SnapshotSize())
		}
		return total, err
	}
	if err := l.checkSnapHeader(&hdr); err != nil {
		return total, err
	}
	var m int64
	switch {
	case l.b != nil:
		m, err = l.b.ReadFromAdopt(r)
	case l.r != nil:
		m, err = l.r.ReadFromAdopt(r)
	}
	if err != nil {
		err = fmt.Errorf("limit: %w", err)
	}
	return total + m, err
}

// checkSnapHeader checks a snapshot header against l's own.
func (l *Limiter) checkSnapHeader(b *[limiterSnapHeader]byte) error {
	le := binary.LittleEndian
	switch {
	case string(b[0:4]) != core.SnapshotMagic:
		return snapCorrupt("Magic", string(b[0:4]), core.SnapshotMagic, nil, "magic is %q, want %q", b[0:4], core.SnapshotMagic)
	case b[4] != limiterSnapVersion:
		return snapCorrupt("Version", b[4], limiterSnapVersion, nil, "format version %d is not supported (this build reads %d)", b[4], limiterSnapVersion)
	case b[5] != core.SnapshotKindLimiter:
		return snapCorrupt("Kind", b[5], core.SnapshotKindLimiter, nil, "kind %d is not a limiter snapshot (%d)", b[5], core.SnapshotKindLimiter)
	}
	if got, want := le.Uint32(b[60:]), core.CRC32C(b[:60]); got != want {
		return snapCorrupt("Checksum", got, want, nil, "header checksum mismatch: stored %#08x, computed %#08x", got, want)
	}
	if b[7]&^1 != 0 || le.Uint32(b[44:]) != 0 || le.Uint32(b[56:]) != 0 {
		return snapCorrupt("Reserved", nil, 0, nil, "reserved header bits are not zero")
	}
	mine := l.snapHeader()
	f64 := func(off int) float64 { return math.Float64frombits(le.Uint64(b[off:])) }
	m64 := func(off int) float64 { return math.Float64frombits(le.Uint64(mine[off:])) }
	switch {
	case b[6] != mine[6]:
		return snapMismatch("Engine", engineName(b[6]), engineName(mine[6]))
	case le.Uint64(b[8:]) != le.Uint64(mine[8:]):
		return snapMismatch("Unit", f64(8), m64(8))
	case le.Uint64(b[16:]) != le.Uint64(mine[16:]):
		return snapMismatch("Drain", f64(16), m64(16))
	case le.Uint64(b[24:]) != le.Uint64(mine[24:]):
		return snapMismatch("MaxDebt", f64(24), m64(24))
	case le.Uint64(b[32:]) != le.Uint64(mine[32:]):
		if b[6] == byte(CountMin) {
			g, w := le.Uint64(b[32:]), le.Uint64(mine[32:])
			return snapMismatch("Size", fmt.Sprintf("%d x %d", g>>32, uint32(g)), fmt.Sprintf("%d x %d", w>>32, uint32(w)))
		}
		return snapMismatch("Lines", le.Uint64(b[32:]), le.Uint64(mine[32:]))
	case le.Uint32(b[40:]) != le.Uint32(mine[40:]):
		return snapMismatch("Generations", le.Uint32(b[40:]), le.Uint32(mine[40:]))
	case le.Uint64(b[48:]) != le.Uint64(mine[48:]):
		return snapMismatch("Period", fmt.Sprintf("%dms", int64(le.Uint64(b[48:]))), fmt.Sprintf("%dms", int64(le.Uint64(mine[48:]))))
	case b[7] != mine[7]:
		return snapMismatch("ConservativeUpdate", b[7] == 1, mine[7] == 1)
	}
	return nil
}

func snapCorrupt(field string, got, want any, cause error, format string, args ...any) error {
	return core.NewSnapshotError(core.ErrCorruptSnapshot, "limit", field, got, want, cause, "snapshot "+format, args...)
}

func snapMismatch(field string, got, want any) error {
	return core.NewSnapshotError(core.ErrSnapshotMismatch, "limit", field, got, want, nil,
		"snapshot %s differs: got %v, the limiter has %v", field, got, want)
}

// engineName names a snapshot's engine byte: 0 is no engine (an Inf
// limiter), not Auto.
func engineName(b byte) string {
	if b == 0 {
		return "none (Inf)"
	}
	return Engine(b).String()
}
