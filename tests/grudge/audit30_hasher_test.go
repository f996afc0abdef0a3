package grudge_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/dchest/siphash"
	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
)

// audit30ConstHasher's Hash64 sends every key to hash 0 (every key shares
// its cells); it also has unrelated Sum64/Sum64String methods, as a type
// may for its own reasons.
type audit30ConstHasher struct{}

func (audit30ConstHasher) Hash64([]byte) uint64 { return 0 }
func (audit30ConstHasher) Sum64(k []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, b := range k {
		h = (h ^ uint64(b)) * 1099511628211
	}
	return h
}
func (h audit30ConstHasher) Sum64String(k string) uint64 { return h.Sum64([]byte(k)) }

// A Hasher is used through Hash64, grudge's method: with a Hash64 that
// maps every key to 0, two keys share every cell.
func TestAudit30FixedHasherSum64UsedInsteadOfHash64(t *testing.T) {
	s, err := grudge.New(grudge.Config{Hi: 100, Hasher: func(uint64) grudge.Hasher { return audit30ConstHasher{} }})
	if err != nil {
		t.Fatal(err)
	}
	s.Update([]byte("a"), 7)
	got := s.Query([]byte("b"))
	da, db := s.QueryDetailed([]byte("a")), s.QueryDetailed([]byte("b"))
	if got != 7 {
		t.Errorf("Hash64 returns 0 for every key, so \"b\" shares \"a\"'s cells and reads 7; got %v (cells a=%v b=%v): "+
			"the sketch hashed with the Hasher's Sum64 method, not Hash64 (hash.go: \"Hasher maps a key to 64 bits ... Hash64(key []byte) uint64\")",
			got, da.CellIndexes, db.CellIndexes)
	}
}

// A custom aggregator that panics: the panic reaches the caller and leaves
// nothing held: later TryUpdates on the key, and ticks of the rotator,
// proceed.
func TestAudit30PanickingAggregatorReleases(t *testing.T) {
	var boom atomic.Bool
	agg := func(s []float64) float64 {
		if boom.Load() {
			panic("audit30 boom")
		}
		return grudge.Min(s)
	}
	clk := grudgetest.NewFakeClock()
	tk := grudgetest.NewFakeTicker()
	r, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: grudge.Config{Hi: 100, Aggregator: agg, Clock: clk}, Generations: 2, Ticker: tk})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s, _ := grudge.New(grudge.Config{Hi: 100, Aggregator: agg, Clock: clk})
	k := []byte("k")
	try := func(f func()) (p any) {
		defer func() { p = recover() }()
		f()
		return nil
	}
	boom.Store(true)
	for i := range 3 {
		if p := try(func() { r.TryUpdate(k, 1, 10) }); p == nil {
			t.Errorf("rotator TryUpdate %d: aggregator panic swallowed", i)
		}
		if p := try(func() { s.TryUpdate(k, 1, 10) }); p == nil {
			t.Errorf("sketch TryUpdate %d: aggregator panic swallowed", i)
		}
		_ = try(func() { r.UpdateAndQuery(k, 1) })
	}
	boom.Store(false)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tk.Tick()
		for i := range 5 {
			if !r.TryUpdate(k, 1, 100) {
				t.Errorf("rotator TryUpdate %d denied", i)
			}
			if !s.TryUpdate(k, 1, 100) {
				t.Errorf("sketch TryUpdate %d denied", i)
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("TryUpdate or Tick hung after an aggregator panic")
	}
	if n := r.Rotations(); n != 1 {
		t.Errorf("Rotations = %d, want 1", n)
	}
}

// NaN and ±Inf deltas and limits panic; any finite limit is accepted.
func TestAudit30NonFinitePanics(t *testing.T) {
	s, _ := grudge.New(grudge.Config{Hi: 10})
	r, _ := grudge.NewRotator(grudge.RotatorConfig{Sketch: grudge.Config{Hi: 10}, Period: time.Second})
	k := []byte("k")
	nan, inf := func() float64 { var z float64; return z / z }(), 1/func() float64 { return 0 }()
	for _, v := range []float64{nan, inf, -inf} {
		for name, f := range map[string]func(){
			"Update": func() { s.Update(k, v) }, "UpdateAndQuery": func() { s.UpdateAndQuery(k, v) },
			"TryUpdate delta": func() { s.TryUpdate(k, v, 1) }, "TryUpdate limit": func() { s.TryUpdate(k, 1, v) },
			"R.Update": func() { r.Update(k, v) }, "R.UpdateAndQuery": func() { r.UpdateAndQuery(k, v) },
			"R.TryUpdate delta": func() { r.TryUpdate(k, v, 1) }, "R.TryUpdate limit": func() { r.TryUpdate(k, 1, v) },
		} {
			var p any
			func() { defer func() { p = recover() }(); f() }()
			if p == nil {
				t.Errorf("%s(%v) did not panic", name, v)
			}
		}
	}
	if got := s.Query(k); got != 0 {
		t.Errorf("a refused call left %v", got)
	}
	if !s.TryUpdate(k, 10, 1e300) || !r.TryUpdate(k, 10, 1e300) {
		t.Errorf("limit above Hi denied")
	}
	if s.Query(k) != 10 || r.Query(k) != 10 {
		t.Errorf("scores %v %v, want 10 (clamped at Hi)", s.Query(k), r.Query(k))
	}
}

func audit30SplitMix(st *uint64) uint64 {
	*st += 0x9E3779B97F4A7C15
	z := *st
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// SipHash is SipHash-2-4 keyed by two splitmix64 outputs of the seed.
func TestAudit30SipHashKeyed(t *testing.T) {
	for _, seed := range []uint64{0, 1, 42, 1 << 63, ^uint64(0)} {
		st := seed
		k0 := audit30SplitMix(&st)
		k1 := audit30SplitMix(&st)
		h := grudge.SipHash()(seed)
		for _, k := range [][]byte{nil, []byte("a"), []byte("0123456789abcdef0123")} {
			if got, want := h.Hash64(k), siphash.Hash(k0, k1, k); got != want {
				t.Errorf("seed %#x key %q: %#x, want %#x", seed, k, got, want)
			}
		}
	}
}
