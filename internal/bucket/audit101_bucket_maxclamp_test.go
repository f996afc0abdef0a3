package bucket_test

import (
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/bucket"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit101BucketFixedLongTickLoadAboveMax (audit 101; fixed at stop
// 60, the text below says what was wrong; quant.value caps a linear
// reading at Max, and do's debt at the span): law.go, Law.Max: "Max is the
// most a key can hold (the clamp; > 0). A load never exceeds it, as the
// count-min's Hi." Engine.Update: "adds n to key's load now,
// unconditionally (clamped at Max)". Where a tick is longer than a
// millisecond (Linear(0.5, 40): 2 ms a tick, 1,000 ticks a token, a span
// of 40,000), a write between two ticks is stamped from the end of its
// tick and capped at thi + span (op.go, do), and quant.value does not
// cap the linear law's reading (the exponential law's is capped at max):
// Update(k, 100) at an odd millisecond then reads 40.001 from
// UpdateAndQuery and Query, above Max; and TryUpdate(k, 0, 40), "the load
// plus n is at most limit" for every load the key can hold, is denied.
// (doc.go's "a debt can read up to one tick high" covers a debt below
// Max, not the clamp.)
//
// Fix: internal/bucket/law.go, quant.value: return min(float64(s-t)/q.u,
// q.max) for the linear and none laws; and in op.go, do, take
// debt = min(est - tlo, q.span) before the decision (the true load never
// exceeds the clamp, so neither lowers a reading below it).
func TestAudit101BucketFixedLongTickLoadAboveMax(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(7_000_000)
	e, err := bucket.New(bucket.Config{Lines: 64, Law: bucket.Linear(0.5, 40), Clock: clk, SeedSet: true, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	if q := e.Quantum(); q.Tick != 2*time.Millisecond || q.PerUnit != 1000 {
		t.Fatalf("quantum %+v, want 2 ms ticks of 1/1000 token", q)
	}
	clk.Advance(time.Millisecond) // between two ticks
	if v := e.UpdateAndQuery("k", 100); v > 40 {
		t.Errorf("UpdateAndQuery(k, 100) = %v, above Max 40", v)
	}
	if v := e.Query("k"); v > 40 {
		t.Errorf("Query(k) = %v right after, above Max 40", v)
	}
	if !e.TryUpdate("k", 0, 40) {
		t.Errorf("TryUpdate(k, 0, 40) denied: no load the key can hold (at most Max 40) plus 0 exceeds 40")
	}
}
