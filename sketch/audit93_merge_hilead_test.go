package sketch_test

// Audit 93 (review of the stop-58 fix to Merge, commit 502bb1f): a cell
// of other stamped after the merge instant whose read-back passes Hi is
// merged as Hi stamped hiLead ms after s's instant, hiLead the least
// whole ms from which Hi decays to the cell's own value b by its stamp.
//
// Finding: hiLead (and the test that picks it, "read-back > Hi") look at
// other's b alone, not at the merged sum a + b. Where s's own cell a is
// not 0, the merged cell is a + Hi, clamped, stamped hiLead ms late:
//
//   - a > 0: Hi at hiLead decays to b, not to a + b, by b's stamp, so the
//     key reads b where the union (never clamped: its largest value is
//     below Hi) is a + b. Exponential(1), Hi 10, a replica 500 ms ahead:
//     s holds 1 at T, other 8 stamped T+500 ms: 8.0011 for a union of
//     8.6065 at T+500 ms, and 7% low at every later time. (Before the
//     fix: 6.07, also low.)
//   - a < 0 (Lo < 0): the read-back 16.49 of other's 10 passes Hi but
//     a + 16.49 = 8.49 does not; the credit is then held undecayed over
//     the 500 ms lead: 2 for a union of 5.148 at T+500 ms, 1.213 for
//     3.122 at T+1 s. Before the fix this merge was exact (8.49 at T):
//     a regression of commit 502bb1f.
//   - Linear, MergeWithin: the promised "at or above the union" fails the
//     same way (81 for a union of 90 at T+50 ms, never clamped; 50
//     before the fix).
//
// Contract: internal/core/merge.go:35-38 (Merge's doc, "None and
// Exponential: decay is linear in the score, so the merged cell is
// exactly the cell a single sketch fed the union would hold, up to the
// float32 rounding (upward, one ulp per cell per merge) and the clamp at
// Hi"); docs/snapshots.md:288-289 ("and the union's exactly from its
// stamp on under None and Exponential"); docs/snapshots.md, the
// exactness table ("Exponential | a + b: exact"); sketch/sketch.go:120-
// 124 (Merge: "exact for the None and Exponential laws"; with overlap
// "no key reads below the union of both streams"); merge.go:68-75
// (MergeWithin: "for non-negative deltas and ignoring the clamp at Hi,
// every merged cell is at or above the cell a single sketch fed the
// union of both streams would hold"). In each case below neither input
// nor the union ever reaches Hi: only the intermediate read-back of b
// to s's instant does, which no sketch ever held.

import (
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
)

// TestAudit93MergeFixedHiLeadIgnoresOwnCell (audit 93; fixed at stop 58, the text below says what was wrong): s on a clock at T, other
// on a clock 500 ms (50 ms for Linear) ahead (a replica whose clock is
// ahead: "every write of its last skew ms" is stamped after the merge
// instant, docs/snapshots.md "Merge"); each holds one write of key k.
func TestAudit93MergeFixedHiLeadIgnoresOwnCell(t *testing.T) {
	cases := []struct {
		name    string
		d       decay.Decay
		lo, hi  float64
		a, b    float64 // s's write at T, other's at T+lead
		lead    int64
		overlap time.Duration
		union   func(x int64) float64 // ms after T, x >= lead
	}{
		{
			name: "exp/own cell positive", d: decay.Exponential(1), lo: 0, hi: 10,
			a: 1, b: 8, lead: 500,
			union: func(x int64) float64 { return math.Exp(-float64(x)/1000) + 8*math.Exp(-float64(x-500)/1000) },
		},
		{
			name: "exp/own cell a credit", d: decay.Exponential(1), lo: -100, hi: 10,
			a: -8, b: 10, lead: 500,
			union: func(x int64) float64 { return -8*math.Exp(-float64(x)/1000) + 10*math.Exp(-float64(x-500)/1000) },
		},
		{
			// Linear 1000/s: s's 60 at T drains to 10 by T+50ms; other's
			// 80 lands at T+50ms: one sketch fed both holds 90 there and
			// drains 1 a ms from it. Both were
			// positive together for 10 ms ([T+50, T+60]); the overlap
			// given is 20 ms.
			name: "linear/MergeWithin", d: decay.Linear(1000), lo: 0, hi: 100,
			a: 60, b: 80, lead: 50, overlap: 20 * time.Millisecond,
			union: func(x int64) float64 { return max(90-float64(x-50), 0) },
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, cs := a93Sketch(t, tc.d, tc.lo, tc.hi, sketch.Min, a93T)
			o, co := a93Sketch(t, tc.d, tc.lo, tc.hi, sketch.Min, a93T+tc.lead)
			s.UpdateString("k", tc.a)
			o.UpdateString("k", tc.b)
			if err := s.Merge(o, tc.overlap); err != nil {
				t.Fatal(err)
			}
			for _, x := range []int64{tc.lead, tc.lead + 5, tc.lead + 200, tc.lead + 1000, tc.lead + 4000} {
				cs.Set(a93T + x)
				co.Set(a93T + x)
				u := tc.union(x)
				if u > tc.hi {
					t.Fatalf("bad case: the union %v passes Hi %v", u, tc.hi)
				}
				if got := s.QueryString("k"); got < u-1e-9*math.Abs(u) {
					t.Errorf("T+%dms: merged reads %v, below the union %v (s wrote %v at T, other %v at T+%dms; Hi %v is never reached by either input or the union)", x, got, u, tc.a, tc.b, tc.lead, tc.hi)
				}
			}
		})
	}
}
