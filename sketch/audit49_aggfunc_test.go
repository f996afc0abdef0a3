package sketch_test

import (
	"errors"
	"testing"

	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit49FixedAggregateFuncNotChecked (fixed: a custom AggregateFunc
// writes the aggregator byte 255, checked to be custom on both sides):
// docs/snapshots.md, "What is
// checked on restore": "then against the receiver: L, M, decay kind,
// decay parameter (bit for bit), Lo, Hi, aggregator, ..." and "Merge":
// "It refuses (ErrSnapshotMismatch, naming the field) a different L, M,
// law, parameter, Lo, Hi, aggregator, ...". A sketch whose aggregator is
// Config.AggregateFunc (which "replaces Aggregator") writes the
// Aggregator field's byte (0, Min), so its snapshot restores into a Min
// sketch, a Min snapshot restores into it, and Merge takes either into
// the other, all without an error. (The cells mean the same under every
// aggregator, so no estimate goes wrong: the gap is between the doc and
// the check. The docs do say a custom decay law "is only checked to be
// custom on both sides"; they say nothing of the kind for aggregators.)
func TestAudit49FixedAggregateFuncNotChecked(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	minCfg := sketch.Config{Levels: 3, CellsPerLevel: 32, Hi: 100, Seed: 2, Clock: clk}
	maxFn := func(v []float64) float64 { // a custom Max
		r := v[0]
		for _, x := range v[1:] {
			r = max(r, x)
		}
		return r
	}
	custCfg := minCfg
	custCfg.AggregateFunc = maxFn
	plain := mustNewSketch(t, minCfg)
	cust := mustNewSketch(t, custCfg)
	plain.UpdateString("a", 1)
	cust.UpdateString("b", 2)
	snapCust, _ := cust.MarshalBinary()
	snapPlain, _ := plain.MarshalBinary()
	check := func(what string, err error) {
		if !errors.Is(err, sketch.ErrSnapshotMismatch) {
			t.Errorf("%s: error %v, want ErrSnapshotMismatch naming the aggregator (the receiver aggregates otherwise)", what, err)
		}
	}
	check("custom AggregateFunc snapshot into a Min sketch", mustNewSketch(t, minCfg).UnmarshalBinary(snapCust))
	check("Min snapshot into a custom AggregateFunc sketch", mustNewSketch(t, custCfg).UnmarshalBinary(snapPlain))
	check("Merge of a custom AggregateFunc sketch into a Min one", mustNewSketch(t, minCfg).Merge(cust))
	check("Merge of a Min sketch into a custom AggregateFunc one", mustNewSketch(t, custCfg).Merge(plain))
}
