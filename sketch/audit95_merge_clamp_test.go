package sketch_test

// Audit 95: a cell of other stamped after the merge instant is
// read back to the instant (b x e^(lambda x lead)): an upper bound of
// b's mass between the instant and its stamp. A write that lands on s
// after the merge, before that stamp, and clamps at Hi cuts the
// read-back's excess and the real mass of b with it; from b's stamp on
// the key reads below a single sketch fed the union (the same writes at
// the same clock labels), for good under Exponential (the ratio stays).
// A write landing on s during the merge is held (audit 94's hold); one
// a moment after the merge is not.
//
// Reproduction: Exponential(0.2), Hi 50. s (empty) on a clock at T;
// other on a clock 600 ms ahead holds k = 17.85 written at its reading
// (stamped T+600 ms). s.Merge(other): k = 20.13 stamped T (read back).
// At T+300 ms s gets Update(k, 60): clamped to 50 stamped T+300 ms.
// At T+600 ms (b's stamp) s reads 47.09; a sketch fed both writes at
// their labels (60 at T+300 ms, 17.85 at T+600 ms) reads 50; at T+1 s
// 43.47 against 46.16, at T+5 s 19.53 against 20.74 (5.8% low for
// good): s reads exactly its own write alone, other's 17.85 is gone
// (so it is not below either input, only below the union).
//
// The docs said the merge is the union's exactly "up to ... the clamp at
// Hi" without saying what a later clamp costs. Stop 58 documents it
// (docs/snapshots.md "Merge", internal/core/merge.go): a write on s after
// the merge, before a read-back cell's stamp, that reaches Hi absorbs the
// read-back part, so from that stamp on the key may read below the union
// by up to other's own contribution, never below either input. The tests
// below assert that documented bound.

import (
	"math"
	"testing"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
)

func TestAudit95MergeClampAfterReadBackBound(t *testing.T) {
	const hi, lead = 50.0, 600
	d := decay.Exponential(0.2)
	s, cs := a93Sketch(t, d, 0, hi, sketch.Min, a93T)
	o, _ := a93Sketch(t, d, 0, hi, sketch.Min, a93T+lead)
	o.UpdateString("k", 17.85)
	if err := s.Merge(o); err != nil {
		t.Fatal(err)
	}
	cs.Set(a93T + 300)
	s.UpdateString("k", 60)

	u, cu := a93Sketch(t, d, 0, hi, sketch.Min, a93T+300)
	u.UpdateString("k", 60)
	cu.Set(a93T + lead)
	u.UpdateString("k", 17.85)
	for _, x := range []int64{lead, lead + 1, 1000, 5000} {
		cs.Set(a93T + x)
		cu.Set(a93T + x)
		got, union := s.QueryString("k"), u.QueryString("k")
		theirs := 17.85 * math.Exp(-0.2*float64(x-lead)/1000) // other's own
		if got < (union-theirs)*(1-1e-5) || got < theirs*(1-1e-5) {
			t.Errorf("T+%dms: merged key reads %v; the documented bound is the union %v less other's own %v, and never below other's own", x, got, union, theirs)
		}
	}
}

// TestAudit95MergeWriteOnHiReadBackBound: the same loss where the
// union never reaches Hi. Exponential(1), Hi 10; s empty on a clock at
// T; other 500 ms ahead holds k = 9 (read back 14.8 past Hi: merged as
// Hi stamped T+395 ms). At T+100 ms s admits TryUpdate(k, 1, 11) (the
// decision itself is right: aggregate 10 + 1 <= 11; 10.999 is denied)
// and the cell stays Hi stamped T+395 ms: the 1 is lost. At T+500 ms the
// key reads 9.0 where a sketch fed the union (1 at T+100 ms, 9 at
// T+500 ms: never above 9.67) reads 9.67; at T+2 s 2.01 against 2.16.
// Contract as above, and internal/core/merge.go:21-23 ("the merged cell
// is Hi stamped the least whole ms after s's instant from which Hi
// stays at or above both parts' decay"): a stamp that is exactly tight
// for the parts leaves no room for a write before it.
func TestAudit95MergeWriteOnHiReadBackBound(t *testing.T) {
	d := decay.Exponential(1)
	s, cs := a93Sketch(t, d, 0, 10, sketch.Min, a93T)
	o, _ := a93Sketch(t, d, 0, 10, sketch.Min, a93T+500)
	o.UpdateString("k", 9)
	if err := s.Merge(o); err != nil {
		t.Fatal(err)
	}
	cs.Set(a93T + 100)
	if q := s.QueryString("k"); q != 10 {
		t.Fatalf("bad case: merged key reads %v at T+100ms, want Hi 10", q)
	}
	if s.TryUpdateString("k", 1, 10.999) {
		t.Errorf("TryUpdate(k, 1, 10.999) admitted at aggregate 10")
	}
	if !s.TryUpdateString("k", 1, 11) {
		t.Fatalf("TryUpdate(k, 1, 11) denied at aggregate 10")
	}
	u, cu := a93Sketch(t, d, 0, 10, sketch.Min, a93T+100)
	u.UpdateString("k", 1)
	cu.Set(a93T + 500)
	u.UpdateString("k", 9)
	for _, x := range []int64{500, 501, 1000, 2000} {
		cs.Set(a93T + x)
		cu.Set(a93T + x)
		got, union := s.QueryString("k"), u.QueryString("k")
		if union >= 10 {
			t.Fatalf("bad case: the union reaches Hi (%v at T+%dms)", union, x)
		}
		theirs := 9 * math.Exp(-float64(x-500)/1000) // other's own
		if got < (union-theirs)*(1-1e-5) || got < theirs*(1-1e-5) {
			t.Errorf("T+%dms: merged key reads %v after an admitted TryUpdate(1) at T+100ms; the documented bound is the union %v less other's own %v, and never below other's own", x, got, union, theirs)
		}
	}
}
