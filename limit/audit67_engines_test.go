package limit_test

import (
	"testing"

	"github.com/lfgrudge/grudge/limit"
)

// TestAudit67EnginesDocExamples: limit/doc.go, "Engines" (stop 47):
// Buckets holds a limiter whose MaxDebt drains within 61,438 ticks, "61.4
// s divided by the ticks a millisecond takes otherwise: New(0.3, 5) has a
// token of 10000/3 ms, 3 ticks a millisecond, so MaxDebt must drain
// within 20.48 s, and its default MaxDebt of 10 tokens, 33.3 s, runs on
// CountMin, as does New(7.3, 20), 73 ticks a millisecond". Checked: the
// examples, and the boundary either side (New(0.3, 5) with MaxDebt 6
// tokens, 60,000 ticks, and 6.2, 62,000; New(7.3, 1) likewise).
func TestAudit67EnginesDocExamples(t *testing.T) {
	cases := []struct {
		r    limit.Limit
		b    int
		md   float64
		want limit.Engine
	}{
		{0.3, 5, 0, limit.CountMin},
		{7.3, 20, 0, limit.CountMin},
		{0.3, 5, 6, limit.Buckets},
		{0.3, 5, 6.2, limit.CountMin},
		{7.3, 1, 6, limit.Buckets},
		{7.3, 1, 6.2, limit.CountMin},
		{10, 20, 0, limit.Buckets},
		{1000, 1000, 0, limit.Buckets},
		{1, 30, 0, limit.Buckets},
		{18387, 1, 0, limit.CountMin},
		{8e6, 30000, 0, limit.CountMin},
	}
	for _, c := range cases {
		var opts []limit.Option
		if c.md > 0 {
			opts = append(opts, limit.WithMaxDebt(c.md))
		}
		l, err := limit.New(c.r, c.b, opts...)
		if err != nil {
			t.Fatalf("New(%v, %d, MaxDebt %v): %v", float64(c.r), c.b, c.md, err)
		}
		if l.Engine() != c.want {
			t.Errorf("New(%v, %d, MaxDebt %v) runs on %v, want %v", float64(c.r), c.b, c.md, l.Engine(), c.want)
		}
	}
}
