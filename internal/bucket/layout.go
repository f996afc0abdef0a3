package bucket

import (
	"math/rand/v2"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/cpu"
)

// Geometry of a line. A line is one cache line: a header word and
// SlotsPerLine entries of 32 bits, two to a word.
const (
	// LineBytes is the size of one line (one bucket): a cache line.
	LineBytes = 64
	// wordsPerLine is the number of 64-bit words in a line.
	wordsPerLine = LineBytes / 8
	// SlotsPerLine is the number of entries in a line: the header takes
	// one word, the other seven hold two entries each.
	SlotsPerLine = 2 * (wordsPerLine - 1)
)

// cacheLine is the platform's cache-line size as x/sys/cpu pads it.
const cacheLine = int(unsafe.Sizeof(cpu.CacheLinePad{}))

// line is one bucket. w[0] is the header:
//
//	bits  0..46  lw: the latest time (ms after the engine's epoch) at
//	             which a write to this line was made; only grows
//	bit  47      moving: a writer is moving lw into a later epoch of
//	             the line's time (see quant.seal); it seals the line's
//	             words before it moves, and every operation that reads
//	             the bit takes a time of at least lw + 1 ms
//	bits 48..63  fo: the eviction floor as an offset in ticks above
//	             lw's tick (0: no floor)
//
// w[1..7] hold the entries, slot s in word 1+s/2, bits 32*(s%2) up:
//
//	bits 16..31  fingerprint (never 0; 0 marks an empty slot)
//	bits  0..15  the stamp's low 16 bits (its residue mod 2^16); in an
//	             empty slot, a version that each seal adds one to, so
//	             that a CAS prepared before the seal fails
//
// Every access is an atomic load or CAS of a whole word.
type line struct {
	w [wordsPerLine]atomic.Uint64
}

// Header fields.
const (
	lwBits    = 48
	movingBit = 1 << (lwBits - 1)
	lwMask    = movingBit - 1 // lw values: 47 bits, 4,400 years of ms
)

func hdrLW(h uint64) uint64   { return h & lwMask }
func hdrFO(h uint64) uint64   { return h >> lwBits }
func hdrMoving(h uint64) bool { return h&movingBit != 0 }

// sameTime reports whether headers a and b name the same lw and moving
// state (their floors may differ).
func sameTime(a, b uint64) bool { return (a^b)&(lwMask|movingBit) == 0 }

// hdrTime is the least time of every operation that reads header h: lw,
// or lw + 1 ms while a move is on (its mover's time is later still).
func hdrTime(h uint64) uint64    { return h&lwMask + h>>(lwBits-1)&1 }
func mkHdr(lw, fo uint64) uint64 { return lw | fo<<lwBits }

// Entry fields.
func entFP(e uint32) uint16            { return uint16(e >> 16) }
func entRes(e uint32) uint16           { return uint16(e) }
func mkEnt(fp uint16, s uint64) uint32 { return uint32(fp)<<16 | uint32(uint16(s)) }

// isEmpty reports whether entry e is an empty slot (of any version).
func isEmpty(e uint32) bool { return e>>16 == 0 }

// mkEmpty returns the empty slot of version v.
func mkEmpty(v uint16) uint32 { return uint32(v) }

// freshEmpty returns an empty slot of a random version, for a write that
// empties an entry (a clear, an eviction, a give-back to nothing). A
// version derived from anything such a writer read (the line's epoch, say)
// could be stale by the time its CAS lands and equal the version another
// operation read before a seal, giving that operation's word back; a
// random one does so 1 time in 65,536 (docs/design.md, "Residues and
// ABA").
func freshEmpty() uint32 { return mkEmpty(uint16(rand.Uint32())) }

// slotWord returns the word index and bit shift of slot s.
func slotWord(s int) (j int, sh uint) { return 1 + s>>1, uint(s&1) * 32 }

// withEntry returns word w with the entry at shift sh replaced by e.
func withEntry(w uint64, sh uint, e uint32) uint64 {
	return w&^(0xFFFFFFFF<<sh) | uint64(e)<<sh
}

// allocLines returns n lines in one block whose first line starts on a
// cache-line boundary, and the bytes allocated. Go aligns a []line to 8
// bytes only, so the block is over-allocated by one line and the aligned
// window sliced out of it.
func allocLines(n int) ([]line, int) {
	raw := make([]line, n+1)
	base := uintptr(unsafe.Pointer(&raw[0]))
	off := 0
	if mis := int(base % uintptr(cacheLine)); mis != 0 {
		// A line is 64 bytes and cacheLine is 64 on every platform x/sys
		// pads for here; the skip is a whole number of words, never of lines.
		off = (cacheLine - mis) / 8
	}
	if off == 0 {
		return raw[:n:n], (n + 1) * LineBytes
	}
	// Shift by off words: view the block as words and re-slice.
	words := unsafe.Slice((*atomic.Uint64)(unsafe.Pointer(&raw[0])), (n+1)*wordsPerLine)
	aligned := unsafe.Slice((*line)(unsafe.Pointer(&words[off])), n)
	return aligned, (n + 1) * LineBytes
}
