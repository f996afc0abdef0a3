package sketch_test

import (
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit55MergeReplicaAheadOfItsHistory: a replica created and written
// (50 to k) at its own clock, ahead of s's by 1 s .. 40 days (past its
// history: it has no cell older than its creation), merged into s: at
// s's instant k reads at least 50 under None (exactly 50), Exponential
// (the law's inverse over the lead: at least 50) and Linear; and when s's
// clock reaches the replica's instant, k reads at least what the replica
// reads there (never below the union), and under None and Exponential
// within a float32 rounding of it.
func TestAudit55MergeReplicaAheadOfItsHistory(t *testing.T) {
	const t0 = 1_700_000_000_000
	laws := map[string]decay.Decay{"none": decay.None(), "exp": decay.Exponential(1e-6), "lin": decay.Linear(1e-6)}
	for name, law := range laws {
		for _, lead := range []int64{1000, 1 << 24, 1<<24 + 1, 9*3600*1000 + 18*60*1000, 1 << 31, 40 * 24 * 3600 * 1000} {
			sc, oc := sketchtest.NewFakeClock(), sketchtest.NewFakeClock()
			sc.Set(t0)
			oc.Set(t0 + lead)
			mk := func(c sketch.Clock) *sketch.Sketch {
				s, err := sketch.New(sketch.Config{Levels: 3, CellsPerLevel: 64, Decay: law, Hi: 1e9, Seed: 55, Clock: c})
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
			s, o := mk(sc), mk(oc)
			o.UpdateString("k", 50)
			if err := s.Merge(o); err != nil {
				t.Fatal(err)
			}
			if got := s.QueryString("k"); got < 50 || (name == "none" && got != 50) {
				t.Errorf("%s lead %d ms: merged k at s's instant = %v, want >= 50", name, lead, got)
			}
			sc.Set(t0 + lead)
			got, want := s.QueryString("k"), o.QueryString("k")
			if got < want || (name != "lin" && math.Abs(got-want) > want*1e-6) {
				t.Errorf("%s lead %d ms: at the replica's instant merged k = %v, replica reads %v", name, lead, got, want)
			}
			_ = time.Second
		}
	}
}
