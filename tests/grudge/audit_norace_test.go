//go:build !race

package grudge_test

import (
	"testing"
	"time"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
)

// TestAuditCustomAggregatorZeroAllocs: a custom Aggregator runs "through
// a pooled copy of the scores (slow path)", "still allocation-free in the
// steady state" (docs/migrating.md). Not under -race, whose sync.Pool
// drops items on purpose.
func TestAuditCustomAggregatorZeroAllocs(t *testing.T) {
	clk := grudgetest.NewFakeClock()
	s, err := grudge.New(grudge.Config{Lo: 0, Hi: 1e9, CellsPerLevel: 64, Decay: grudge.Exponential(0.1), Clock: clk,
		Aggregator: func(v []float64) float64 { return v[0] + v[len(v)-1] }})
	if err != nil {
		t.Fatal(err)
	}
	k := []byte("k")
	var sink float64
	for _, op := range []struct {
		name string
		f    func()
	}{
		{"Update", func() { s.Update(k, 1) }},
		{"Query", func() { sink += s.Query(k) }},
		{"UpdateAndQuery", func() { sink += s.UpdateAndQuery(k, 1) }},
		{"TryUpdate/admitted", func() { s.TryUpdate(k, 1, 1e9) }},
		{"TryUpdate/denied", func() { s.TryUpdate(k, 1, -1) }},
	} {
		if n := testing.AllocsPerRun(200, func() { clk.Advance(time.Millisecond); op.f() }); n != 0 {
			t.Errorf("%s: %v allocations per call, want 0", op.name, n)
		}
	}
	_ = sink
}
