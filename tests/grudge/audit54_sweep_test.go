package grudge_test

// Audit 54: a systematic sweep of shared/API.md, "grudge (root package)
// and grudgetest", through the public API only.

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// The surface exactly as API.md writes it.
var (
	_ func(grudge.Config) (*grudge.Sketch, error)         = grudge.New
	_ func(grudge.RotatorConfig) (*grudge.Rotator, error) = grudge.NewRotator
	_ func(float64) grudge.Decay                          = grudge.Exponential
	_ func(float64) grudge.Decay                          = grudge.Linear
	_ func() grudge.Decay                                 = grudge.None
	_ func() grudge.HasherFactory                         = grudge.SipHash
	_ func() grudge.HasherFactory                         = grudge.Murmur3
	_ grudge.Aggregator                                   = grudge.Max
	_ grudge.Aggregator                                   = grudge.Mean
	_ func() int64                                        = (*grudge.Rotator)(nil).Rotations
	_ func()                                              = (*grudge.Rotator)(nil).Close
	_ interface{ Now() time.Time }                        = grudge.Clock(nil)
)

// a54Scorer is the method set API.md lists for both Sketch and Rotator.
type a54Scorer interface {
	Update(key []byte, delta float64)
	Query(key []byte) float64
	UpdateAndQuery(key []byte, delta float64) float64
	TryUpdate(key []byte, delta, limit float64) bool
	QueryDetailed(key []byte) grudge.Result
}

var (
	_ a54Scorer = (*grudge.Sketch)(nil)
	_ a54Scorer = (*grudge.Rotator)(nil)
)

func a54Scorers(t *testing.T, cfg grudge.Config) map[string]a54Scorer {
	s, err := grudge.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lazy, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: cfg, Generations: 2, Period: 1000 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lazy.Close)
	ticked, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: cfg, Generations: 3, Ticker: grudgetest.NewFakeTicker()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ticked.Close)
	return map[string]a54Scorer{"Sketch": s, "Rotator(lazy)": lazy, "Rotator(ticker)": ticked}
}

// TestAudit54GrudgeNonFinitePanics: REFERENCE.md "NaN/Inf delta panics";
// API.md's sketch semantics (the root is "a thin face over the lock-free
// sketch"): NaN or ±Inf delta or limit panics and leaves no cell
// non-finite.
func TestAudit54GrudgeNonFinitePanics(t *testing.T) {
	fc := grudgetest.NewFakeClock()
	for name, s := range a54Scorers(t, grudge.Config{Levels: 3, CellsPerLevel: 4, Hi: 100, Decay: grudge.Linear(1), Clock: fc}) {
		s.Update([]byte("k"), 5)
		for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
			for op, f := range map[string]func(){
				"Update":          func() { s.Update([]byte("k"), v) },
				"UpdateAndQuery":  func() { s.UpdateAndQuery([]byte("k"), v) },
				"TryUpdate.delta": func() { s.TryUpdate([]byte("k"), v, 10) },
				"TryUpdate.limit": func() { s.TryUpdate([]byte("k"), 1, v) },
			} {
				if msg := sketchtest.Panics(f); msg == "" {
					t.Errorf("%s %s(%v): no panic", name, op, v)
				}
			}
		}
		if q := s.Query([]byte("k")); q != 5 {
			t.Errorf("%s: k = %v after the refused writes, want 5", name, q)
		}
		for i := range 128 {
			for _, x := range s.QueryDetailed([]byte{byte(i)}).LevelScores {
				if math.IsNaN(x) || math.IsInf(x, 0) {
					t.Fatalf("%s: a cell holds %v", name, x)
				}
			}
		}
	}
}

// TestAudit54GrudgeExactAdmission: "N goroutines racing TryUpdate(k, 1,
// 1000) with no decay admit exactly 1000", and with every key colliding
// (CellsPerLevel=1) the total never exceeds the limit, through the
// grudge-compatible face (Sketch, lazy Rotator, ticker Rotator), at
// several GOMAXPROCS.
func TestAudit54GrudgeExactAdmission(t *testing.T) {
	const limit, g = 1000, 16
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		for _, cells := range []uint32{4096, 1} {
			for name, s := range a54Scorers(t, grudge.Config{Levels: 4, CellsPerLevel: cells, Hi: 1e6, Clock: grudgetest.NewFakeClock()}) {
				var admitted atomic.Int64
				var wg sync.WaitGroup
				for i := range g {
					wg.Add(1)
					go func() {
						defer wg.Done()
						k := []byte("k")
						if cells == 1 {
							k = fmt.Appendf(nil, "key-%d", i)
						}
						for range 2 * limit / g {
							if s.TryUpdate(k, 1, limit) {
								admitted.Add(1)
							}
						}
					}()
				}
				wg.Wait()
				if a := admitted.Load(); a != limit {
					t.Errorf("%s M=%d: admitted %d, want exactly %d", name, cells, a, limit)
				}
			}
		}
	})
}

// TestAudit54GrudgeDefaultHasherMurmur3: "Hasher HasherFactory //
// SipHash(), Murmur3() (grudge's default)". Each Sketch draws its own
// random seed (doc.go), so the layouts cannot be compared key by key;
// what is checked is that a nil Hasher and Murmur3() both build and that
// the default is not refused.
func TestAudit54GrudgeDefaultHasherMurmur3(t *testing.T) {
	for _, h := range []grudge.HasherFactory{nil, grudge.Murmur3(), grudge.SipHash()} {
		s, err := grudge.New(grudge.Config{Levels: 4, CellsPerLevel: 1000, Hi: 10, Hasher: h, Clock: grudgetest.NewFakeClock()})
		if err != nil {
			t.Fatal(err)
		}
		s.Update([]byte("a"), 1)
		if q := s.Query([]byte("a")); q != 1 {
			t.Errorf("Query = %v, want 1", q)
		}
	}
}

// TestAudit54GrudgeRotatorLazyNoGoroutine: "Ticker Ticker // nil:
// rotation every Period (lazily, no goroutine)"; "Rotator: Close()
// (idempotent ...), Rotations() int64".
func TestAudit54GrudgeRotatorLazyNoGoroutine(t *testing.T) {
	fc := grudgetest.NewFakeClock()
	before := runtime.NumGoroutine()
	r, err := grudge.NewRotator(grudge.RotatorConfig{
		Sketch: grudge.Config{Levels: 2, CellsPerLevel: 64, Hi: 100, Clock: fc},
		Period: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("NewRotator without a Ticker started %d goroutines", n-before)
	}
	r.Update([]byte("k"), 3)
	for i := range 5 {
		fc.Advance(time.Second)
		_ = r.Query([]byte("x"))
		if got := r.Rotations(); got != int64(i+1) {
			t.Errorf("after %d periods and an access: Rotations %d", i+1, got)
		}
	}
	if q := r.Query([]byte("k")); q != 0 {
		t.Errorf("5 periods after the last write (2 generations): %v, want 0", q)
	}
	r.Close()
	r.Close()
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines left", n-before)
	}
}

// TestAudit54GrudgeTickerRotations: "grudgetest.NewFakeTicker() (Tick()
// rotates once; Rotations() read right after sees it). With a Ticker,
// rotation follows its ticks": no rotation from elapsed time alone, one
// per Tick, none after Close.
func TestAudit54GrudgeTickerRotations(t *testing.T) {
	fc := grudgetest.NewFakeClock()
	tk := grudgetest.NewFakeTicker()
	r, err := grudge.NewRotator(grudge.RotatorConfig{
		Sketch:      grudge.Config{Levels: 2, CellsPerLevel: 64, Hi: 100, Clock: fc},
		Generations: 2,
		Period:      time.Second,
		Ticker:      tk,
	})
	if err != nil {
		t.Fatal(err)
	}
	r.Update([]byte("k"), 4)
	fc.Advance(time.Hour)
	if q := r.Query([]byte("k")); q != 4 || r.Rotations() != 0 {
		t.Errorf("an hour without ticks: Query %v Rotations %d, want 4 and 0", q, r.Rotations())
	}
	for i := range 3 {
		tk.Tick()
		if got := r.Rotations(); got != int64(i+1) {
			t.Fatalf("Rotations right after Tick %d = %d", i+1, got)
		}
	}
	if q := r.Query([]byte("k")); q != 0 {
		t.Errorf("3 ticks after the last write (2 generations): %v, want 0", q)
	}
	r.Close()
	r.Close()
	if !tk.Stopped() {
		t.Error("Close did not stop the ticker")
	}
}

// TestAudit54GrudgeCustomAggregator: "Aggregator Aggregator //
// func([]float64) float64; Min, Max, Mean (fast path), any func works":
// a user's own aggregator (the sum of the levels) decides TryUpdate
// exactly under a race (4 levels: sum = 4 x count; limit 4000 admits
// exactly 1000 of TryUpdate(k, 1, 4000)), and the hot path allocates
// nothing with it (grudge's pooled scratch buffers, REFERENCE.md).
func TestAudit54GrudgeCustomAggregator(t *testing.T) {
	sum := func(xs []float64) float64 {
		var s float64
		for _, x := range xs {
			s += x
		}
		return s
	}
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		for name, s := range a54Scorers(t, grudge.Config{Levels: 4, CellsPerLevel: 512, Hi: 1e6, Aggregator: sum, Clock: grudgetest.NewFakeClock()}) {
			var admitted atomic.Int64
			var wg sync.WaitGroup
			for range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 125 {
						if s.TryUpdate([]byte("k"), 1, 4000) {
							admitted.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			if a := admitted.Load(); a != 1000 {
				t.Errorf("%s: custom sum aggregator admitted %d, want exactly 1000", name, a)
			}
			if q := s.Query([]byte("k")); q != 4000 {
				t.Errorf("%s: sum aggregate %v, want 4000", name, q)
			}
		}
	})
	if testing.CoverMode() != "" {
		return
	}
	for name, s := range a54Scorers(t, grudge.Config{Levels: 4, CellsPerLevel: 512, Hi: 1e6, Aggregator: sum, Decay: grudge.Exponential(0.1), Clock: grudgetest.NewFakeClock()}) {
		k := []byte("key")
		for op, f := range map[string]func(){
			"Update":         func() { s.Update(k, 1) },
			"Query":          func() { _ = s.Query(k) },
			"UpdateAndQuery": func() { _ = s.UpdateAndQuery(k, 1) },
			"TryUpdate":      func() { _ = s.TryUpdate(k, 1, 1e5) },
		} {
			if a := testing.AllocsPerRun(500, f); a != 0 {
				t.Errorf("%s %s with a custom aggregator: %v allocs/op, want 0", name, op, a)
			}
		}
	}
}

// TestAudit54GrudgeDefaults: the root Config's zero fields take grudge's
// defaults (REFERENCE.md: "Default L=4, M=100,000"; Aggregator nil is
// Min): 4 levels, indexes in [0, 100000) reaching near its top, and a
// Query that is the minimum of the levels.
func TestAudit54GrudgeDefaults(t *testing.T) {
	for name, s := range a54Scorers(t, grudge.Config{Hi: 1e6, Clock: grudgetest.NewFakeClock()}) {
		maxIdx := uint32(0)
		for i := range 2000 {
			k := []byte(fmt.Sprint("key-", i))
			s.Update(k, float64(i%5+1))
			r := s.QueryDetailed(k)
			if len(r.LevelScores) != 4 || len(r.CellIndexes) != 4 {
				t.Fatalf("%s: %d/%d levels, want 4", name, len(r.LevelScores), len(r.CellIndexes))
			}
			lo := math.Inf(1)
			for l, idx := range r.CellIndexes {
				if idx >= 100_000 {
					t.Fatalf("%s: index %d >= 100000", name, idx)
				}
				maxIdx = max(maxIdx, idx)
				lo = math.Min(lo, r.LevelScores[l])
			}
			if q := s.Query(k); q != lo || r.Aggregate != lo {
				t.Fatalf("%s: Query %v Aggregate %v, levels %v: nil Aggregator is not Min", name, q, r.Aggregate, r.LevelScores)
			}
		}
		if maxIdx < 99_000 {
			t.Errorf("%s: largest index %d, want close to 100000", name, maxIdx)
		}
	}
}

// TestAudit54GrudgeNilDecay: the root Config's Decay left nil keeps
// scores (decay.None, as package sketch's "nil means decay.None()"),
// and a nil Clock is real time: New and Update work without one.
func TestAudit54GrudgeNilDecay(t *testing.T) {
	fc := grudgetest.NewFakeClock()
	s, err := grudge.New(grudge.Config{CellsPerLevel: 64, Hi: 100, Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	s.Update([]byte("k"), 12.5)
	fc.Advance(5 * 365 * 24 * time.Hour)
	if q := s.Query([]byte("k")); q != 12.5 {
		t.Errorf("nil Decay, 5 years later: %v, want 12.5", q)
	}
	real, err := grudge.New(grudge.Config{CellsPerLevel: 64, Hi: 100})
	if err != nil {
		t.Fatal(err)
	}
	real.Update([]byte("k"), 3)
	if q := real.Query([]byte("k")); q != 3 {
		t.Errorf("nil Clock: Query %v, want 3", q)
	}
}
