package core

import (
	"unsafe"

	"github.com/lfgrudge/grudge/internal/atom"
	"golang.org/x/sys/cpu"
)

// cacheLine is the cache-line size rows are aligned and padded to, taken
// from golang.org/x/sys/cpu so arm64 and amd64 both get their own (64 on
// amd64; 64 on arm64 in x/sys, where some cores use 128 but pad 64).
const cacheLine = int(unsafe.Sizeof(cpu.CacheLinePad{}))

// cellsPerLine is how many 8-byte cells fill one cache line.
const cellsPerLine = cacheLine / int(unsafe.Sizeof(atom.Cell{}))

// rowStride returns the distance in cells between the starts of two rows
// of m cells: m rounded up to whole cache lines, so that when row 0
// starts on a line boundary every row does, and no line holds cells of
// two rows.
func rowStride(m uint32) int {
	return (int(m) + cellsPerLine - 1) / cellsPerLine * cellsPerLine
}

// allocRows allocates levels rows of stride cells in one block whose first
// row starts on a cache-line boundary, with a whole guard line of slack
// before the first row and after the last one, so no cell shares a line
// with any other heap object (the owner's bookkeeping included). Go's
// allocator only guarantees 8-byte alignment for []Cell, so the block is
// over-allocated and the aligned window is sliced out of it.
//
// It returns the aligned window (levels*stride cells) and the bytes
// allocated in total.
func allocRows(levels, stride int) ([]atom.Cell, int) {
	n := levels*stride + 3*cellsPerLine // guard line before, slack for alignment, guard after
	raw := make([]atom.Cell, n)
	base := uintptr(unsafe.Pointer(&raw[0]))
	off := cellsPerLine // skip one whole guard line
	if mis := int((base + uintptr(off*8)) % uintptr(cacheLine)); mis != 0 {
		off += (cacheLine - mis) / 8
	}
	return raw[off : off+levels*stride : off+levels*stride], n * 8
}
