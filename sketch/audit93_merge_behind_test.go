package sketch_test

// Audit 93 finding: Merge drops a cell of other stamped after other's
// reading when other's clock is behind s's and the law drains (or
// underflows) the cell over that gap.
//
// merge.go decays every cell of other by its age at other's reading plus
// extra (how far other's reading is behind s's instant), and only then
// reads a cell stamped after other's reading back by its lead:
// b = Decay(score, 0 + extra), then Undecay(b, lead). Under Linear,
// Decay stops at 0: a score <= rate x extra becomes 0 before the
// read-back, b == 0 skips the cell, and the merged sketch holds nothing
// of it, although the cell is stamped after the common instant (lead >
// extra) or, stamped before it, still holds score - rate x (extra -
// lead) > 0 there. Under Exponential the same happens where score x
// e^(-lambda x extra) underflows float64 (restate special-cases that
// underflow for WriteTo; merge does not).
//
// Reproduction (deterministic, no hook on Merge): a snapshot taken at T
// during whose encode the key is written to its clamp (Linear 1000/s,
// Hi 50: an update of 100 lands 150 ms in) records Hi with a negative
// age; restored on a clock at T (R), the cell is Hi stamped T+150 ms,
// as WriteTo states it. s, an empty sketch on a clock at T+100 ms (R is
// 100 ms behind: two processes with skewed clocks), merges R: the key
// then reads 0 in s where R reads 50 at T+150 ms. With the write 80 ms in
// (stamped before the common instant T+100 ms), R reads 30 at T+100 ms,
// the merge 0. Exponential(1), Hi 10, a write 801 s into the encode,
// R 800 s behind: 0 for 10.
//
// Contract: internal/core/merge.go:14-19 ("A cell of other stamped after
// that instant ... a positive score is read back to it by the law's
// inverse (None, Exponential, Linear), at or above its value then for
// non-negative deltas, however far ahead"); merge.go:43-45 (Linear:
// "Merge takes a + b, which is never below either input's truth");
// sketch/sketch.go:127-128 ("Writes that land on either sketch during
// the merge are on the safe side for positive scores"); API.md:78
// ("Min aggregation never under-estimates").

import (
	"fmt"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

type a93BehindCase struct {
	name  string
	d     decay.Decay
	hi    float64
	lead  int64 // ms into the encode of the write at Hi
	extra int64 // ms the restore's clock is behind s's
}

// a93RestoredAhead returns R, restored on a clock at T from a snapshot
// taken at T during whose encode key k was written to its clamp lead ms
// in, and R's clock.
func a93RestoredAhead(t *testing.T, d decay.Decay, hi float64, lead int64) (*sketch.Sketch, *sketchtest.FakeClock) {
	t.Helper()
	cfg := sketch.Config{Levels: 2, CellsPerLevel: 64, Decay: d, Lo: 0, Hi: hi, Seed: 7}
	co := sketchtest.NewFakeClock()
	co.Set(a93T)
	cfg.Clock = co
	orig := mustNewSketch(t, cfg)
	w := &a92Hook{f: func() {
		co.Advance(time.Duration(lead) * time.Millisecond)
		orig.UpdateString("k", 2*hi)
	}}
	if _, err := orig.WriteTo(w); err != nil {
		t.Fatalf("WriteTo: %v", err)
	}
	cr := sketchtest.NewFakeClock()
	cr.Set(a93T)
	cfg.Clock = cr
	r := mustNewSketch(t, cfg)
	if err := r.UnmarshalBinary(w.Bytes()); err != nil {
		t.Fatalf("restore: %v", err)
	}
	return r, cr
}

func a93BehindCheck(t *testing.T, tc a93BehindCase) {
	t.Helper()
	r, cr := a93RestoredAhead(t, tc.d, tc.hi, tc.lead)
	s, cs := a93Sketch(t, tc.d, 0, tc.hi, sketch.Min, a93T+tc.extra)
	if err := s.Merge(r); err != nil {
		t.Fatalf("%s: Merge: %v", tc.name, err)
	}
	// From the common instant (T+extra) on, at R's and s's same wall time.
	last := int64(-1)
	for _, x := range []int64{tc.extra, tc.extra + 1, tc.lead, tc.lead + 10, tc.lead + 40} {
		if x <= last {
			continue // the clocks only move forward
		}
		last = x
		cs.Set(a93T + x)
		cr.Set(a93T + x)
		in, got := r.QueryString("k"), s.QueryString("k")
		if got < in*(1-1e-9) {
			t.Errorf("%s: T+%dms: empty.Merge(R) reads %v, below R's own reading %v (R's cell: Hi %v stamped T+%dms; R's clock %dms behind s's)", tc.name, x, got, in, tc.hi, tc.lead, tc.extra)
		}
	}
}

// TestAudit93MergeFixedBehindDrainsLead (audit 93; fixed at stop 58, the text below says what was wrong): the failing cases.
func TestAudit93MergeFixedBehindDrainsLead(t *testing.T) {
	for _, tc := range []a93BehindCase{
		{"linear/stamp after the instant", decay.Linear(1000), 50, 150, 100},
		{"linear/stamp before the instant", decay.Linear(1000), 50, 80, 100},
		{"exp/underflow", decay.Exponential(1), 10, 801_000, 800_000},
	} {
		a93BehindCheck(t, tc)
	}
}

// TestAudit93MergeBehindHolds: the same setting where the gap does not
// drain the cell (rate x extra below Hi) or s's clock is level with R's:
// the merged key is never below R's reading.
func TestAudit93MergeBehindHolds(t *testing.T) {
	laws := []struct {
		name  string
		d     decay.Decay
		perMs float64 // Linear's drain a ms; 0 otherwise
	}{{"exp1", decay.Exponential(1), 0}, {"exp0.3", decay.Exponential(0.3), 0}, {"lin1000", decay.Linear(1000), 1}, {"lin1", decay.Linear(1), 0.001}}
	for _, lw := range laws {
		for _, lead := range []int64{1, 3, 150, 2000} {
			for _, extra := range []int64{0, 1, 20, lead - 1, lead + 5} {
				if extra < 0 || lw.perMs*float64(extra) >= 50 {
					continue // drained by the gap: TestAudit93MergeFixedBehindDrainsLead
				}
				a93BehindCheck(t, a93BehindCase{fmt.Sprintf("%s/lead=%d/extra=%d", lw.name, lead, extra), lw.d, 50, lead, extra})
			}
		}
	}
}
