package core

import (
	"runtime"
	"testing"
	"unsafe"

	"github.com/lfgrudge/grudge/internal/atom"
)

// TestLayoutConstants: the padding constants match the hardware and the
// padded types fill exactly one cache line.
func TestLayoutConstants(t *testing.T) {
	if runtime.GOARCH == "amd64" && cacheLine != 64 {
		t.Fatalf("cacheLine = %d on amd64, want 64", cacheLine)
	}
	if cacheLine <= 0 || cacheLine&(cacheLine-1) != 0 {
		t.Fatalf("cacheLine = %d, want a power of two", cacheLine)
	}
	if got := unsafe.Sizeof(atom.Cell{}); got != 8 {
		t.Fatalf("unsafe.Sizeof(atom.Cell{}) = %d, want 8", got)
	}
	if cellsPerLine*int(unsafe.Sizeof(atom.Cell{})) != cacheLine {
		t.Fatalf("cellsPerLine = %d cells do not fill a %d-byte line", cellsPerLine, cacheLine)
	}
	if got := unsafe.Sizeof(stripe{}); got != uintptr(cacheLine) {
		t.Fatalf("unsafe.Sizeof(stripe{}) = %d, want cacheLine = %d", got, cacheLine)
	}
	if numStripes&(numStripes-1) != 0 {
		t.Fatalf("numStripes = %d, want a power of two", numStripes)
	}
}

// TestRowStride: a row is M cells rounded up to whole cache lines.
func TestRowStride(t *testing.T) {
	for _, m := range []uint32{1, 2, 7, 8, 9, 15, 16, 17, 1000, 100_000, 100_001, MaxCellsPerLevel} {
		st := rowStride(m)
		if st%cellsPerLine != 0 || st < int(m) || st >= int(m)+cellsPerLine {
			t.Errorf("rowStride(%d) = %d, want the least multiple of %d that is >= %d", m, st, cellsPerLine, m)
		}
	}
}

// TestLayoutAlignment: for many shapes, every row of a sketch starts on a
// cache-line boundary, the cell window holds exactly L rows of stride
// cells, and every TryUpdate stripe owns one whole, aligned line. Go only
// guarantees 8-byte alignment for these slices, so this checks that New
// aligns by allocation.
func TestLayoutAlignment(t *testing.T) {
	line := uintptr(cacheLine)
	for _, m := range []uint32{1, 7, 8, 9, 100_000, 100_001} {
		for levels := uint32(1); levels <= MaxLevels; levels++ {
			s, err := New(Config{Levels: levels, CellsPerLevel: m, Hi: 1})
			if err != nil {
				t.Fatal(err)
			}
			if s.stride%cellsPerLine != 0 || s.stride < int(m) {
				t.Fatalf("L=%d M=%d: stride %d is not a multiple of %d that is >= M", levels, m, s.stride, cellsPerLine)
			}
			if len(s.cells) != int(levels)*s.stride || cap(s.cells) != len(s.cells) {
				t.Fatalf("L=%d M=%d: len(cells) = %d, cap %d, want %d", levels, m, len(s.cells), cap(s.cells), int(levels)*s.stride)
			}
			for l := range int(levels) {
				if p := uintptr(unsafe.Pointer(&s.cells[l*s.stride])); p%line != 0 {
					t.Fatalf("L=%d M=%d: row %d starts at %#x, %d bytes past a line boundary", levels, m, l, p, p%line)
				}
			}
			if len(s.stripes) != numStripes {
				t.Fatalf("L=%d M=%d: %d stripes, want %d", levels, m, len(s.stripes), numStripes)
			}
			for i := range s.stripes {
				if p := uintptr(unsafe.Pointer(&s.stripes[i])); p%line != 0 {
					t.Fatalf("L=%d M=%d: stripe %d at %#x, %d bytes past a line boundary", levels, m, i, p, p%line)
				}
			}
			// Every key's cells lie in their own row.
			var off [MaxLevels]int
			for h := uint64(0); h < 1<<40; h += 0x9E3779B97F4A7C1 >> 20 {
				s.offsets(h, &off)
				for l := range int(levels) {
					if off[l] < l*s.stride || off[l] >= l*s.stride+int(m) {
						t.Fatalf("L=%d M=%d: hash %#x level %d at offset %d, outside row [%d, %d)", levels, m, h, l, off[l], l*s.stride, l*s.stride+int(m))
					}
				}
				if st := stripeOf(h); st >= numStripes {
					t.Fatalf("stripeOf(%#x) = %d, want < %d", h, st, numStripes)
				}
			}
		}
	}
}
