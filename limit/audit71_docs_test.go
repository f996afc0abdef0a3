package limit

import (
	"errors"
	"runtime"
	"testing"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/sketch"
)

// WithMaxBytes: the cap counts Generations x L x M x 8 (rows rounded up
// to cache lines) without the guard lines; Sizes().Cells includes three
// guard lines a generation (192 bytes on amd64, 384 on arm64).
func TestAudit71MaxBytesGuardLines(t *testing.T) {
	line := 64
	if runtime.GOARCH == "arm64" {
		line = 128
	}
	per := line / 8
	for _, c := range []struct{ g, L, M uint32 }{{2, 2, 64}, {3, 4, 100}, {2, 1, 8}, {16, 3, 1000}} {
		rowCells := (int(c.M) + per - 1) / per * per
		rows := int(c.g) * int(c.L) * rowCells * 8
		l, err := New(10, 10, WithEngine(CountMin), WithGenerations(c.g), WithSize(c.L, c.M), WithMaxBytes(int64(rows)))
		if err != nil {
			t.Fatalf("%+v: New with WithMaxBytes(rows = %d): %v, want accepted (the cap does not count the guard lines)", c, rows, err)
		}
		if got, want := l.Sizes().Cells, rows+int(c.g)*3*line; got != want {
			t.Errorf("%+v: Sizes().Cells = %d, want rows %d + %d generations x 3 guard lines of %d = %d", c, got, rows, c.g, line, want)
		}
		if _, err := New(10, 10, WithEngine(CountMin), WithGenerations(c.g), WithSize(c.L, c.M), WithMaxBytes(int64(rows-1))); !errors.Is(err, sketch.ErrInvalidConfig) {
			t.Errorf("%+v: WithMaxBytes(rows-1): %v, want a ConfigError", c, err)
		}
	}
}

// units/doc.go numbers: a token's ms rounded up to m bits, m = 24 -
// bits(MaxDebt) (at least 8): the rate is rounded down by less than
// 2^(1-m): 2^-12 at MaxDebt 2000, 2^-19 at 15, 2^-7 from 32768 on; and
// 5e-4/s at burst 1000 is a token of 2,000,128 units.
func TestAudit71UnitsDocNumbers(t *testing.T) {
	testsize.Serial(t)
	l, err := New(5e-4, 1000, WithEngine(CountMin))
	if err != nil {
		t.Fatal(err)
	}
	if l.unit != 2000128 || l.drain != 1 {
		t.Errorf("New(5e-4, 1000): unit %v drain %v, doc.go: a token of 2,000,128 units of a millisecond's drain", l.unit, l.drain)
	}
	for _, c := range []struct {
		md  float64
		rel float64
	}{{2000, 0x1p-12}, {15, 0x1p-19}, {32768, 0x1p-7}, {1 << 24, 0x1p-7}, {16384, 0x1p-8}} {
		worst := 0.0
		for i := 0; i < 3000; i += testsize.Stride(3) {
			r := 1000 / (float64(1<<20) + 1 + float64(i)*0.37) // tokens just above a power of two ms
			l, err := New(Limit(r), 1, WithEngine(CountMin), WithMaxDebt(c.md), WithSize(1, 8))
			if err != nil {
				t.Fatal(err)
			}
			if l.bits == 0 {
				continue // a short fraction's own units: not rounded
			}
			rel := 1 - (1000/l.unit*l.drain)/r
			if rel < 0 {
				t.Fatalf("MaxDebt %v rate %v: effective rate %v above the limit (early)", c.md, r, 1000/l.unit*l.drain)
			}
			worst = max(worst, rel)
		}
		if worst >= c.rel {
			t.Errorf("MaxDebt %v: rate rounded down by %.6g, doc: less than %.6g", c.md, worst, c.rel)
		}
		if worst < c.rel/2 {
			t.Errorf("MaxDebt %v: worst rounding %.6g never exceeds 2^-m = %.6g; the doc's bound is loose by 2x", c.md, worst, c.rel/2)
		}
	}
}
