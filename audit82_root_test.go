package grudge_test

import (
	"math"
	"math/big"
	"testing"

	grudge "github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
)

// TestAudit82RootTinyDeltasNeverBelowExact: the grudge façade (Sketch,
// no decay) keeps a delta the float64 add absorbs: after 2^100 and 500
// adds of 1e14 (Update and TryUpdate) the estimate is at or above the
// exact sum, and each add moved it (a positive delta below Hi changes
// the cell).
func TestAudit82RootTinyDeltasNeverBelowExact(t *testing.T) {
	clk := grudgetest.NewFakeClock()
	s, err := grudge.New(grudge.Config{Levels: 3, CellsPerLevel: 512, Hi: math.MaxFloat32, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	k := []byte("k")
	s.Update(k, 0x1p100)
	exact := new(big.Float).SetPrec(1000).SetFloat64(0x1p100)
	prev := s.Query(k)
	for i := range 500 {
		if i%2 == 0 {
			s.Update(k, 1e14)
		} else if !s.TryUpdate(k, 1e14, math.MaxFloat64) {
			t.Fatal("TryUpdate denied under MaxFloat64")
		}
		exact.Add(exact, big.NewFloat(1e14))
		got := s.Query(k)
		if new(big.Float).SetFloat64(got).Cmp(exact) < 0 || !(got > prev) {
			t.Fatalf("add #%d: estimate %v (before %v), exact %v", i+1, got, prev, exact.Text('g', 25))
		}
		prev = got
	}
}
