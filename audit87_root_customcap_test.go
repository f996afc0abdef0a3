package grudge_test

import (
	"testing"

	grudge "github.com/lfgrudge/grudge"
)

// TestAudit87RootCustomAggregatorGetsCappedLevels: with a Hi no float32
// holds (0.1) and every level at the clamp, each level reads Hi, and so
// do the built-in aggregators (Min, Max, Mean); a custom Aggregator gets
// those capped levels and its result is read as it returns it. Audit 87
// found the docs saying "Reads are capped at Hi" without that exception:
// the same mean as a custom function reads (0.1+0.1+0.1)/3 =
// 0.10000000000000002, and TryUpdate(k, 0, Hi) is then denied, as in
// grudge. The docs now say so (doc.go, Config.Aggregator).
func TestAudit87RootCustomAggregatorGetsCappedLevels(t *testing.T) {
	const hi = 0.1
	k := []byte("k")
	for _, tc := range []struct {
		name    string
		agg     grudge.Aggregator
		builtin bool
	}{
		{"Mean", grudge.Mean, true},
		{"Max", grudge.Max, true},
		{"Min", grudge.Min, true},
		{"func(Mean)", func(v []float64) float64 { return grudge.Mean(v) }, false},
		{"func(Max)", func(v []float64) float64 { return grudge.Max(v) }, false},
		{"func(sum/3)", func(v []float64) float64 { return (v[0] + v[1] + v[2]) / 3 }, false},
	} {
		s, err := grudge.New(grudge.Config{Levels: 3, CellsPerLevel: 1024, Hi: hi, Aggregator: tc.agg})
		if err != nil {
			t.Fatal(err)
		}
		s.Update(k, 1)
		q, u, d := s.Query(k), s.UpdateAndQuery(k, 1), s.QueryDetailed(k)
		for l, v := range d.LevelScores {
			if v != hi {
				t.Errorf("%s: level %d reads %v at the clamp; want Hi = %v", tc.name, l, v, hi)
			}
		}
		want := tc.agg(append([]float64(nil), d.LevelScores...))
		if tc.builtin {
			want = min(want, hi)
		}
		if q != want || u != want || d.Aggregate != want {
			t.Errorf("%s: Query %v, UpdateAndQuery %v, Aggregate %v; want %v (the aggregator of the capped levels%s)",
				tc.name, q, u, d.Aggregate, want, map[bool]string{true: ", capped at Hi", false: ""}[tc.builtin])
		}
		if got := s.TryUpdate(k, 0, hi); got != (want <= hi) {
			t.Errorf("%s: TryUpdate(k, 0, Hi) at the clamp = %v for a read of %v", tc.name, got, want)
		}
	}
}
