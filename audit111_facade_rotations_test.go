package grudge_test

// Audit 111; fixed at stop 61 (Rotations settles the rotator without a
// key: core.Rotator.Settle), the text below says what was wrong.
//
// Audit 111 (the grudge façade against the reference): Rotations().
//
// In grudge, Rotator.Rotations() reads a counter. Here a lazy rotator's
// Rotations() "counts as an access" (docs/migrating.md), which it does
// by running a whole Query of the key "" (rotator.go: rot.r.QueryString(""))
// through the user's own code: the configured Hasher hashes "" and a
// custom Aggregator aggregates its levels (a custom Decay decays them
// where another key's mass sits in ""'s cells). A grudge
// user's Hasher that refuses empty keys (a validating or key-logging
// hasher) or an Aggregator that counts queries sees calls for a key the
// program never used, and Rotations() panics where the Hasher does.
// migrating.md says only that Rotations() may promote; promoting needs
// the clock, not a key.

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
	"github.com/spaolacci/murmur3"
)

type audit111StrictHasher struct {
	seed  uint32
	calls *atomic.Int64
	empty *atomic.Int64
}

func (h audit111StrictHasher) Hash64(key []byte) uint64 {
	h.calls.Add(1)
	if len(key) == 0 {
		h.empty.Add(1)
	}
	return murmur3.Sum64WithSeed(key, h.seed)
}

// TestAudit111FixedRotationsRunsUserCode fails today: Rotations() on a lazy
// rotator hashes the key "" with the user's Hasher and calls the user's
// Aggregator; grudge's Rotations() runs neither.
func TestAudit111FixedRotationsRunsUserCode(t *testing.T) {
	var hashes, empties, aggs atomic.Int64
	factory := func(seed uint64) grudge.Hasher {
		return audit111StrictHasher{seed: uint32(seed), calls: &hashes, empty: &empties}
	}
	agg := func(v []float64) float64 {
		aggs.Add(1)
		m := v[0]
		for _, x := range v {
			m = min(m, x)
		}
		return m
	}
	clk := grudgetest.NewFakeClock()
	r, err := grudge.NewRotator(grudge.RotatorConfig{
		Sketch: grudge.Config{Hi: 100, Hasher: factory, Aggregator: agg, Clock: clk},
		Period: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.Update([]byte("user-key"), 1) // the only key the program uses
	clk.Advance(2500 * time.Millisecond)
	hashes.Store(0)
	empties.Store(0)
	aggs.Store(0)
	if got := r.Rotations(); got != 2 {
		t.Errorf("Rotations() = %d after 2.5 periods, want 2", got)
	}
	if h, e, a := hashes.Load(), empties.Load(), aggs.Load(); h+a != 0 {
		t.Errorf("Rotations() called the user's Hasher %d times (%d with an empty key the program never used) "+
			"and its Aggregator %d times; grudge's Rotations() reads a counter", h, e, a)
	}
}
