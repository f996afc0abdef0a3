package limit_test

import (
	"errors"
	"testing"
	"unsafe"

	"golang.org/x/sys/cpu"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch"
)

// TestAudit70FixedCountMinCellsAboveMaxBytes (fixed in the docs, stop
// 47: WithMaxBytes and CountMinSize.Bytes now say the cap counts the
// rows, and each generation's three guard lines, 192 bytes, come on top;
// checked against that). The audit quoted limit.WithMaxBytes
// (limit/limit.go): "WithMaxBytes caps the memory of the engine's cells
// ... New refuses a size ... above it with a *sketch.ConfigError instead
// of allocating it"; Sizing.CountMin.Bytes (limit/sizing.go) is "what
// WithMaxBytes compares"; Sizes().Cells (sketch.Sizes) is "the cell block
// as allocated (alignment and guard lines included)". A count-min limiter
// accepted at WithMaxBytes(Suggest's Bytes) holds cells above the cap:
// each generation's block carries 3 guard/alignment lines (192 bytes)
// the check does not count. The Buckets engine counts its alignment line
// ((Lines + 1) x 64) and stays at the cap exactly.
func TestAudit70FixedCountMinCellsAboveMaxBytes(t *testing.T) {
	for _, c := range []struct {
		keys int
		deny float64
		gens uint32
	}{{200_000, 0.001, 2}, {5_000, 0.01, 2}, {5_000, 0.01, 4}} {
		s, err := limit.Suggest(c.keys, c.deny)
		if err != nil {
			t.Fatal(err)
		}
		// Buckets: at the documented (Lines + 1) x 64.
		bb := int64(s.Buckets.Lines+1) * 64
		lb, err := limit.New(10, 20, limit.WithSeed(1), limit.WithCapacity(c.keys, c.deny), limit.WithMaxBytes(bb))
		if err != nil {
			t.Fatal(err)
		}
		if got := int64(lb.Sizes().Cells); got > bb {
			t.Errorf("Buckets %d keys: WithMaxBytes(%d) accepted, Sizes().Cells %d", c.keys, bb, got)
		}
		// Count-min: at Suggest's Bytes for its generations (the doc's
		// Generations x L x M x 8, rows rounded to whole lines).
		bc := int64(c.gens) * int64(s.CountMin.Bytes) / int64(s.CountMin.Generations)
		lc, err := limit.New(10, 20, limit.WithSeed(1), limit.WithEngine(limit.CountMin), limit.WithGenerations(c.gens),
			limit.WithSize(s.CountMin.Levels, s.CountMin.Cells), limit.WithMaxBytes(bc))
		if err != nil {
			t.Fatalf("count-min %d x %d x %d at WithMaxBytes(%d): %v", c.gens, s.CountMin.Levels, s.CountMin.Cells, bc, err)
		}
		guard := 3 * int64(unsafe.Sizeof(cpu.CacheLinePad{})) // a generation's guard lines
		if got := int64(lc.Sizes().Cells); got > bc+int64(c.gens)*guard {
			t.Errorf("count-min %d gens x %d x %d: WithMaxBytes(%d) accepted, but Sizes().Cells (\"the cell block as allocated\") is %d: %d bytes above the cap on \"the memory of the engine's cells\" (limit.WithMaxBytes)",
				c.gens, s.CountMin.Levels, s.CountMin.Cells, bc, got, got-bc)
		}
	}
}

// TestAudit70MaxBytesDefaultRefused: WithMaxBytes below the default
// memory refuses the default size on both engines with a
// *sketch.ConfigError rather than shrinking it (limit.WithMaxBytes: "New
// refuses a size ... above it with a *sketch.ConfigError instead of
// allocating it"); at the default's own bytes it is accepted.
func TestAudit70MaxBytesDefaultRefused(t *testing.T) {
	for _, eng := range []limit.Engine{limit.Buckets, limit.CountMin} {
		l := limit.MustNew(10, 20, limit.WithEngine(eng))
		var need int64
		if eng == limit.Buckets {
			need = int64(l.Sizes().Cells) // (Lines + 1) x 64
		} else {
			need = 2 * int64(4*100_000*8) // 2 x 4 x 100,000 cells of 8 bytes (rows already whole lines)
		}
		_, err := limit.New(10, 20, limit.WithEngine(eng), limit.WithMaxBytes(need-1))
		var ce *sketch.ConfigError
		if !errors.As(err, &ce) {
			t.Errorf("%v: WithMaxBytes(%d) below the default: err %v, want a *sketch.ConfigError", eng, need-1, err)
		}
		if _, err := limit.New(10, 20, limit.WithEngine(eng), limit.WithMaxBytes(need)); err != nil {
			t.Errorf("%v: WithMaxBytes(%d), the default's size: %v", eng, need, err)
		}
	}
}
