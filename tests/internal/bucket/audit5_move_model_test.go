package bucket_test

import (
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/bucket"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit5MoveModelRefundAfterWrap: bucket.Model is the differential
// tests' oracle; model.go: "Run sequentially it must agree with the
// engine operation for operation and word for word (TestDifferential)",
// "Refund mirrors Engine.Refund". A reservation of a key, then 1000 hours
// idle (3.6e9 ms of Linear(8e6, 30000)'s 8,000 ticks: 2.88e13 ticks, an
// exact multiple of the residues' 2^16), then an Update of the same key
// (its old entry expired long ago and was cleared by the move; the new
// write lands in the same slot, with the same residue as the reserved
// write's stamp), then the old reservation's Refund. The engine refuses
// it (op.go: "the written residue must still name the written stamp in
// the line's current window": the entry holds another, later write);
// the model, which compares only the residue's 16 bits, gives the later
// Update back, and the two disagree from then on.
func TestAudit5MoveModelRefundAfterWrap(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	e := bucket.MustNew(bucket.Config{Lines: 2, Law: bucket.Linear(8e6, 30000), Clock: clk, SeedSet: true, Seed: 0})
	m := bucket.NewModel(e)
	const k = "k0"
	er, eok := e.TryReserve(k, 30, 30)
	mok, _, mr := m.Do(k, bucket.NowMs(e), bucket.OpTry, 30, 30)
	if !eok || !mok {
		t.Fatalf("reservation: engine %v, model %v", eok, mok)
	}
	clk.Advance(3_600_000_000 * time.Millisecond)
	e.Update(k, 30)
	m.Do(k, bucket.NowMs(e), bucket.OpAdd, 30, 0)
	clk.Advance(time.Millisecond)
	eok, mok = e.Refund(&er), m.Refund(&mr)
	if eok {
		t.Fatalf("the engine refunded a reservation whose entry holds a later Update of 30 tokens")
	}
	if eok != mok {
		t.Errorf("Refund: engine %v, model %v", eok, mok)
	}
	for i := range 2 {
		if es, ms := bucket.StateOf(e, i), m.Line(i); es != ms {
			t.Errorf("line %d: engine %+v != model %+v", i, es, ms)
		}
	}
	_, ev, _ := m.Do(k, bucket.NowMs(e), bucket.OpQuery, 0, 0)
	if q := e.Query(k); q != ev {
		t.Errorf("Query: engine %v, model %v", q, ev)
	}
}
