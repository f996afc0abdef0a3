package grudge_test

import (
	"testing"
	"time"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
)

// TestAudit96RootAllocDocumentedLazyPromotionAllocates (audit 96;
// documented at stop 59, the text below says what was wrong; the root
// doc now states the exception, and the test asserts its bound: the
// rotating call allocates the build only, a few objects). doc.go, "What is the
// same as grudge": "Update, Query, UpdateAndQuery and TryUpdate do not
// allocate with a built-in aggregator", said of both types, and
// rotator.go: a Rotator's "hot-path methods do not allocate". A lazy
// root Rotator (no Ticker) rotates "on the first operation after a
// Period ends" (doc.go), and that operation builds the newborn generation
// itself: its cells, stripes and generation set. Each of the four
// methods, run once per Period with the built-in Min, allocates. (Package
// rotator's doc states the exception, "except in the one operation per
// Period that builds the new generation"; grudge builds it in its ticker
// goroutine; the root doc does not say so. The steady state is checked
// by audit 76, and allocates nothing.)
func TestAudit96RootAllocDocumentedLazyPromotionAllocates(t *testing.T) {
	clk := grudgetest.NewFakeClock()
	r, err := grudge.NewRotator(grudge.RotatorConfig{
		Sketch:      grudge.Config{Levels: 2, CellsPerLevel: 64, Hi: 1e6, Clock: clk},
		Generations: 2, Period: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	k := []byte("k")
	ops := []struct {
		name string
		f    func()
	}{
		{"Update", func() { r.Update(k, 1) }},
		{"Query", func() { r.Query(k) }},
		{"UpdateAndQuery", func() { r.UpdateAndQuery(k, 1) }},
		{"TryUpdate", func() { r.TryUpdate(k, 1, 1e9) }},
	}
	for _, op := range ops {
		for range 3 { // warm
			op.f()
		}
		before := r.Rotations()
		n := testing.AllocsPerRun(20, func() {
			clk.Advance(time.Second) // one Period: this call promotes
			op.f()
		})
		if got := r.Rotations() - before; got != 21 { // AllocsPerRun runs f once more to warm up
			t.Fatalf("%s: %d rotations over 21 calls a Period apart, want 21", op.name, got)
		}
		if n > 16 {
			t.Errorf("lazy Rotator.%s on the call that rotates: %v allocations; the build of one generation is 9 (its cells, stripes and set)", op.name, n)
		}
		if n := testing.AllocsPerRun(20, op.f); n != 0 {
			t.Errorf("lazy Rotator.%s within a Period: %v allocations, want 0", op.name, n)
		}
	}
}
