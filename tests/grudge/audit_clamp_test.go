package grudge_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
)

// TestAuditScoresStayWithinHi: "Lo and Hi clamp every cell" (Config) and
// "scores stay clamped at Hi" (TryUpdate). A Hi that float32 cannot hold
// exactly (0.1, 1.1, 1e9+1) is stored rounded up, above Hi; every read
// must cap it back (it used to return that value: Query, UpdateAndQuery
// and QueryDetailed exceeded Hi, and TryUpdate(k, 0, Hi) on a key at the
// clamp was denied although Hi + 0 <= Hi, which grudge admits).
func TestAuditScoresStayWithinHi(t *testing.T) {
	for _, hi := range []float64{0.1, 1.1, 1e9 + 1} {
		for ai, agg := range []grudge.Aggregator{grudge.Min, grudge.Max, grudge.Mean} {
			t.Run(fmt.Sprintf("hi=%v/agg=%d", hi, ai), func(t *testing.T) {
				s, err := grudge.New(grudge.Config{Lo: -1, Hi: hi, CellsPerLevel: 64, Aggregator: agg})
				if err != nil {
					t.Fatal(err)
				}
				k := []byte("k")
				if got := s.UpdateAndQuery(k, 2*hi+5); got > hi {
					t.Errorf("UpdateAndQuery = %.17g, above Hi %.17g", got, hi)
				}
				if got := s.Query(k); got > hi {
					t.Errorf("Query = %.17g, above Hi %.17g", got, hi)
				}
				for l, v := range s.QueryDetailed(k).LevelScores {
					if v > hi {
						t.Errorf("level %d holds %.17g, above Hi %.17g", l, v, hi)
					}
				}
				if !s.TryUpdate(k, 0, hi) {
					t.Errorf("TryUpdate(k, 0, Hi) denied at the clamp: Hi + 0 <= Hi")
				}
			})
		}
	}
}

// TestAuditInfiniteHiSaturates: Hi = +Inf is accepted with a draining
// decay, and scores then saturate at MaxFloat32, as the Config documents
// ("scores then saturate at ±MaxFloat32"): an infinite Hi works as
// MaxFloat32. Update(k, 1e39) reads MaxFloat32 exactly, never Inf, and
// the saturated score still drains.
func TestAuditInfiniteHiSaturates(t *testing.T) {
	clk := grudgetest.NewFakeClock()
	s, err := grudge.New(grudge.Config{Lo: 0, Hi: math.Inf(1), Decay: grudge.Linear(1e37), CellsPerLevel: 64, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	k := []byte("k")
	s.Update(k, 1e39)
	if got := s.Query(k); got != math.MaxFloat32 {
		t.Fatalf("Hi=+Inf: Update(k, 1e39) then Query = %g, want the documented saturation at MaxFloat32", got)
	}
	clk.Advance(time.Second)
	if got := s.Query(k); !(got < math.MaxFloat32) || got < math.MaxFloat32-1e37 {
		t.Fatalf("after 1 s of Linear(1e37): Query = %g, want MaxFloat32 - 1e37 (rounded up)", got)
	}
}
