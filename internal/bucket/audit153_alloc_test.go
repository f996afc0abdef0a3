package bucket

import (
	"io"
	"testing"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit153FixedWriteToAllocatesMoreThanOneBuffer (audit 153; fixed
// at stop 65, the text below says what was wrong): Engine.WriteTo's doc
// said "It allocates one 64 KiB buffer"; it allocated 3 times a call, at
// e39a3f7 too: the buffer, and the header and trailer arrays, which
// escape through w.Write. (The first report blamed 2483b3b's WallMillis,
// which then built big.Ints; 23babde made it allocation-free.) The doc
// now says 3, and this holds WriteTo to it.
func TestAudit153FixedWriteToAllocatesMoreThanOneBuffer(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	e, err := New(Config{Lines: 8, Law: Linear(1000, 100), Clock: clk, SeedSet: true, Seed: 153})
	if err != nil {
		t.Fatal(err)
	}
	e.Update("k", 5)
	n := testing.AllocsPerRun(20, func() {
		if _, err := e.WriteTo(io.Discard); err != nil {
			t.Fatal(err)
		}
	})
	if n > 3 {
		t.Errorf("Engine.WriteTo(io.Discard) allocates %v times per call; the doc says 3 (the buffer, the header, the trailer)", n)
	}
}
