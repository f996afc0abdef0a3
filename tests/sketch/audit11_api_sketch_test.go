package sketch_test

// Contract conformance (audit11): the sketch, decay, sketch/reference and
// sketch/sketchtest surfaces exactly as shared/API.md states them, written
// as a reader of that page alone would write them. Everything here must
// compile and pass; contract shapes that do not compile are in
// audit11_api_contract_sketch_test.go behind the audit11contract tag.

import (
	"errors"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/reference"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a11Clock is a user's own sketch.Clock: "type Clock interface{
// NowMillis() int64 } // monotonic milliseconds".
type a11Clock struct{ ms atomic.Int64 }

func (c *a11Clock) NowMillis() int64 { return c.ms.Load() }

// The signatures of API.md, "decay" and "sketch", assigned to variables of
// the stated function types.
var (
	_ func(float64) decay.Decay = decay.Exponential
	_ func(float64) decay.Decay = decay.Linear
	_ func() decay.Decay        = decay.None

	_ func(sketch.Config) (*sketch.Sketch, error) = sketch.New

	_ sketch.Clock         = (*a11Clock)(nil)
	_ sketch.Clock         = sketchtest.NewFakeClock()
	_ sketch.Scorer        = (*sketch.Sketch)(nil)
	_ sketch.Scorer        = (*rotator.Rotator)(nil)
	_ sketch.HasherFactory = sketch.XXH3()
	_ sketch.HasherFactory = sketch.SipHash()
	_ sketch.Aggregator    = sketch.Min
	_ sketch.Aggregator    = sketch.Max
	_ sketch.Aggregator    = sketch.Mean

	// "Invalid Config: a *ConfigError naming the field and value, matched
	// by errors.Is(err, ErrInvalidConfig)."
	_ error = (*sketch.ConfigError)(nil)
	_ error = sketch.ErrInvalidConfig

	// sketch/reference: New and NewRotator exist and give Scorers.
	_ = reference.New
	_ = reference.NewRotator

	// sketch/sketchtest: NewFakeClock() *FakeClock; TestScorer(t, newFunc)
	// and one for rotators.
	_ func() *sketchtest.FakeClock = sketchtest.NewFakeClock
	_                              = sketchtest.TestScorer
	_                              = sketchtest.TestRotator
)

// TestAudit11APISketchConfigLiteral: a Config literal with every field
// API.md names, with the stated types, builds a sketch.
func TestAudit11APISketchConfigLiteral(t *testing.T) {
	var (
		levels uint32               = 4
		cells  uint32               = 1024
		law    decay.Decay          = decay.Exponential(0.5)
		lo, hi float64              = 0, 100
		agg    sketch.Aggregator    = sketch.Min
		hasher sketch.HasherFactory = sketch.SipHash()
		seed   uint64               = 42
		clock  sketch.Clock         = &a11Clock{}
	)
	s, err := sketch.New(sketch.Config{
		Levels:        levels,
		CellsPerLevel: cells,
		Decay:         law,
		Lo:            lo,
		Hi:            hi,
		Aggregator:    agg,
		Hasher:        hasher,
		Seed:          seed,
		Clock:         clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	// Every method with the stated signature.
	var (
		update   func([]byte, float64)               = s.Update
		query    func([]byte) float64                = s.Query
		uaq      func([]byte, float64) float64       = s.UpdateAndQuery
		try      func([]byte, float64, float64) bool = s.TryUpdate
		detailed func([]byte) sketch.Detail          = s.QueryDetailed
		updateS  func(string, float64)               = s.UpdateString
		queryS   func(string) float64                = s.QueryString
		uaqS     func(string, float64) float64       = s.UpdateAndQueryString
		tryS     func(string, float64, float64) bool = s.TryUpdateString
		scorer   sketch.Scorer                       = s
		zeroAgg  sketch.Aggregator
		_, _, _  = update, query, uaq
		_, _, _  = try, detailed, updateS
		_, _, _  = queryS, uaqS, tryS
		_        = scorer
	)
	if zeroAgg != sketch.Min {
		t.Errorf("the zero Aggregator is %v, API.md: zero value means Min", zeroAgg)
	}
	// delta and limit in the stated order: TryUpdate(key, delta, limit).
	if !s.TryUpdate([]byte("k"), 3, 10) {
		t.Fatal("TryUpdate(k, 3, 10) on an empty sketch denied")
	}
	if s.TryUpdate([]byte("k"), 10, 3) {
		t.Fatal("TryUpdate(k, delta=10, limit=3) admitted: arguments read in another order")
	}
	if got := s.Query([]byte("k")); got != 3 {
		t.Fatalf("Query after one admitted +3 = %v, want 3", got)
	}
	if d := s.QueryDetailed([]byte("k")); len(d.Levels) != int(levels) || d.Score != 3 {
		t.Fatalf("QueryDetailed = %+v, want %d levels and score 3", d, levels)
	}
}

// TestAudit11APISketchDefaults: "Levels 0 means 4", "CellsPerLevel 0
// means 100_000", "Decay nil means decay.None()", "at most 8".
func TestAudit11APISketchDefaults(t *testing.T) {
	s, err := sketch.New(sketch.Config{Hi: 10, Clock: &a11Clock{}})
	if err != nil {
		t.Fatal(err)
	}
	d := s.QueryDetailed([]byte("x"))
	if len(d.Levels) != 4 {
		t.Errorf("Levels 0: %d levels, want 4", len(d.Levels))
	}
	c := s.Config()
	if c.Levels != 4 || c.CellsPerLevel != 100_000 {
		t.Errorf("defaults: Levels %d CellsPerLevel %d, want 4 and 100000", c.Levels, c.CellsPerLevel)
	}
	if _, err := sketch.New(sketch.Config{Levels: 8, CellsPerLevel: 16, Hi: 10}); err != nil {
		t.Errorf("Levels 8: %v, API.md: at most 8", err)
	}
	_, err = sketch.New(sketch.Config{Levels: 9, CellsPerLevel: 16, Hi: 10})
	var ce *sketch.ConfigError
	if !errors.As(err, &ce) || ce.Field != "Levels" || !errors.Is(err, sketch.ErrInvalidConfig) {
		t.Errorf("Levels 9: err %v, want a *ConfigError naming Levels", err)
	}
}

// TestAudit11APISketchConfigErrors: each invalid Config is a *ConfigError
// naming the field (and its value), matched by errors.Is; decay parameters
// NaN, Inf, <= 0 are reported by sketch.New naming the field.
func TestAudit11APISketchConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   sketch.Config
		field string
	}{
		{"Lo>0", sketch.Config{Lo: 1, Hi: 10}, "Lo"},
		{"Hi<0", sketch.Config{Lo: -10, Hi: -1}, "Hi"},
		{"HiNaN", sketch.Config{Hi: math.NaN()}, "Hi"},
		{"HiInfNoDecay", sketch.Config{Hi: math.Inf(1)}, "Hi"},
		{"ExpNaN", sketch.Config{Hi: 10, Decay: decay.Exponential(math.NaN())}, "Decay"},
		{"ExpInf", sketch.Config{Hi: 10, Decay: decay.Exponential(math.Inf(1))}, "Decay"},
		{"ExpZero", sketch.Config{Hi: 10, Decay: decay.Exponential(0)}, "Decay"},
		{"LinNeg", sketch.Config{Hi: 10, Decay: decay.Linear(-1)}, "Decay"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := sketch.New(tc.cfg)
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, sketch.ErrInvalidConfig) {
				t.Errorf("%v does not match ErrInvalidConfig", err)
			}
			var ce *sketch.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("%T is not a *ConfigError", err)
			}
			if !strings.Contains(ce.Field, tc.field) || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("Field %q, message %q: want the field %s named", ce.Field, err, tc.field)
			}
		})
	}
	// Hi = +Inf with a decay that drains is valid.
	if _, err := sketch.New(sketch.Config{Hi: math.Inf(1), Decay: decay.Linear(1), CellsPerLevel: 16}); err != nil {
		t.Errorf("Hi=+Inf with Linear: %v", err)
	}
}

// TestAudit11APISuggestLevelsOrder: SuggestLevels(hotKeys, cellsPerLevel,
// targetP), grudge's order. 100,000 hot keys in rows of 1,000 cells fill
// every cell (MaxLevels); 1,000 hot keys in rows of 100,000 need one level
// for a 1% target. Swapped arguments would give the other answer.
func TestAudit11APISuggestLevelsOrder(t *testing.T) {
	var _ func(uint32, uint32, float64) uint32 = sketch.SuggestLevels
	if got := sketch.SuggestLevels(100_000, 1000, 0.01); got != sketch.MaxLevels {
		t.Errorf("SuggestLevels(hot=100000, M=1000, 0.01) = %d, want %d", got, sketch.MaxLevels)
	}
	if got := sketch.SuggestLevels(1000, 100_000, 0.01); got != 1 {
		t.Errorf("SuggestLevels(hot=1000, M=100000, 0.01) = %d, want 1", got)
	}
	// (1 - (1-1/1e5)^1000)^L <= 1e-8: p1 ~ 0.00995, L = 4.
	if got := sketch.SuggestLevels(1000, 100_000, 1e-8); got != 4 {
		t.Errorf("SuggestLevels(1000, 100000, 1e-8) = %d, want 4", got)
	}
}

// TestAudit11APIAtFormsTimeFirst: "one explicit-time form per operation,
// time first"; a time.Time converts to the sketch's own scale, so a
// fake clock's Now() and a stored wall time mean what they say.
func TestAudit11APIAtFormsTimeFirst(t *testing.T) {
	fc := sketchtest.NewFakeClock()
	s, err := sketch.New(sketch.Config{Levels: 2, CellsPerLevel: 64, Hi: 100, Decay: decay.Linear(1), Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	var (
		_ func(time.Time, string, float64)               = s.UpdateAt
		_ func(time.Time, string) float64                = s.QueryAt
		_ func(time.Time, string, float64) float64       = s.UpdateAndQueryAt
		_ func(time.Time, string, float64, float64) bool = s.TryUpdateAt
	)
	// An At time ahead of the clock counts as the clock's reading (the
	// package documentation says so); times up to the clock's reading mean
	// what they say.
	t0 := fc.Now()
	s.UpdateAt(t0, "k", 10)
	fc.Advance(9 * time.Second)
	if got := s.QueryAt(t0.Add(4*time.Second), "k"); math.Abs(got-6) > 1e-3 {
		t.Errorf("QueryAt(t0+4s) = %v, want 6 (10 drained at 1/s)", got)
	}
	// A time.Time without a monotonic reading (a stored wall time).
	wall := t0.Add(6 * time.Second).Round(0)
	if got := s.QueryAt(wall, "k"); math.Abs(got-4) > 1e-3 {
		t.Errorf("QueryAt(stored wall time t0+6s) = %v, want 4", got)
	}
	// The short form is the explicit one at the clock's now.
	if got := s.Query([]byte("k")); math.Abs(got-1) > 1e-3 {
		t.Errorf("Query at t0+9s = %v, want 1", got)
	}
	if !s.TryUpdateAt(fc.Now(), "k", 1, 7) || s.TryUpdateAt(fc.Now(), "k", 7, 1) {
		t.Error("TryUpdateAt(t, key, delta, limit): order not as stated")
	}
}

// TestAudit11APIFakeClock: sketchtest's FakeClock has Advance(Duration),
// Set, Now() time.Time and NowMillis (what the sketch's Clock needs).
func TestAudit11APIFakeClock(t *testing.T) {
	fc := sketchtest.NewFakeClock()
	var _ func(time.Duration) = fc.Advance
	var _ func() time.Time = fc.Now
	var _ func() int64 = fc.NowMillis
	n0, m0 := fc.Now(), fc.NowMillis()
	fc.Advance(1500 * time.Millisecond)
	if d := fc.Now().Sub(n0); d != 1500*time.Millisecond {
		t.Errorf("Now moved %v after Advance(1.5s)", d)
	}
	if d := fc.NowMillis() - m0; d != 1500 {
		t.Errorf("NowMillis moved %d after Advance(1.5s)", d)
	}
}

// TestAudit11APIReferenceSameCells: "For the same Config (Seed, Hasher,
// Levels, CellsPerLevel) both implementations map a key to the same
// cells", and the reference has the Scorer surface.
func TestAudit11APIReferenceSameCells(t *testing.T) {
	for _, h := range []sketch.HasherFactory{nil, sketch.XXH3(), sketch.SipHash()} {
		cfg := sketch.Config{Levels: 5, CellsPerLevel: 997, Hi: 100, Seed: 7, Hasher: h, Clock: &a11Clock{}}
		s, err := sketch.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		r, err := reference.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var sc sketch.Scorer = r
		for i := range 200 {
			k := []byte{byte(i), byte(i >> 8), 'k'}
			a, b := s.QueryDetailed(k), sc.QueryDetailed(k)
			if len(a.Levels) != len(b.Levels) {
				t.Fatalf("levels %d vs %d", len(a.Levels), len(b.Levels))
			}
			for l := range a.Levels {
				if a.Levels[l].Index != b.Levels[l].Index {
					t.Fatalf("key %q level %d: sketch cell %d, reference cell %d", k, l, a.Levels[l].Index, b.Levels[l].Index)
				}
			}
		}
	}
	// Same invalid-config errors.
	_, err := reference.New(sketch.Config{Lo: 1, Hi: 10})
	if !errors.Is(err, sketch.ErrInvalidConfig) {
		t.Errorf("reference.New(Lo=1): %v, want ErrInvalidConfig", err)
	}
	rr, err := reference.NewRotator(reference.RotatorConfig{Sketch: sketch.Config{CellsPerLevel: 64, Hi: 10}, Generations: 2, Period: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var _ sketch.Scorer = rr
	rr.Close()
}

// --- "Semantics that callers rely on", each asserted directly. ---

// TestAudit11APINoAllocs: "no allocation on Update, Query, UpdateAndQuery,
// TryUpdate and the string twins", for Min, Max and Mean.
func TestAudit11APINoAllocs(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage instrumentation allocates")
	}
	for _, agg := range []sketch.Aggregator{sketch.Min, sketch.Max, sketch.Mean} {
		s, err := sketch.New(sketch.Config{CellsPerLevel: 1024, Hi: 1e6, Decay: decay.Exponential(0.1), Aggregator: agg})
		if err != nil {
			t.Fatal(err)
		}
		k, ks := []byte("key"), "key"
		for name, f := range map[string]func(){
			"Update":               func() { s.Update(k, 1) },
			"Query":                func() { _ = s.Query(k) },
			"UpdateAndQuery":       func() { _ = s.UpdateAndQuery(k, 1) },
			"TryUpdate":            func() { _ = s.TryUpdate(k, 1, 1e5) },
			"UpdateString":         func() { s.UpdateString(ks, 1) },
			"QueryString":          func() { _ = s.QueryString(ks) },
			"UpdateAndQueryString": func() { _ = s.UpdateAndQueryString(ks, 1) },
			"TryUpdateString":      func() { _ = s.TryUpdateString(ks, 1, 1e5) },
		} {
			if a := testing.AllocsPerRun(200, f); a != 0 {
				t.Errorf("%v %s: %v allocs/op, want 0", agg, name, a)
			}
		}
	}
}

// TestAudit11APIBackwardsClock: "A backwards clock step counts as zero
// elapsed time, never as growth"; with no write, decay is lazy.
func TestAudit11APIBackwardsClock(t *testing.T) {
	c := &a11Clock{}
	c.ms.Store(1_000_000)
	s, err := sketch.New(sketch.Config{Levels: 3, CellsPerLevel: 64, Hi: 100, Decay: decay.Exponential(1), Clock: c})
	if err != nil {
		t.Fatal(err)
	}
	s.Update([]byte("k"), 50)
	c.ms.Store(1_000_000 - 10_000) // 10 s backwards
	if got := s.Query([]byte("k")); got < 50 || got > 50.001 {
		t.Errorf("after a backwards step: %v, want 50 (no growth, no decay)", got)
	}
	s.Update([]byte("k"), 1)
	if got := s.Query([]byte("k")); got < 51 || got > 51.001 {
		t.Errorf("update after a backwards step: %v, want 51", got)
	}
	c.ms.Store(1_000_000 + 1000) // 1 s after the first write
	got := s.Query([]byte("k"))
	if want := 51 * math.Exp(-1); got < want || got > want*1.001 {
		t.Errorf("1 s after: %v, want %v (not below, within rounding)", got, want)
	}
}

// TestAudit11APINonFinitePanics: "NaN or +/-Inf delta or limit panics with
// a message that starts `sketch:`; no cell is ever left holding NaN or
// Inf."
func TestAudit11APINonFinitePanics(t *testing.T) {
	s, err := sketch.New(sketch.Config{Levels: 2, CellsPerLevel: 8, Hi: 100})
	if err != nil {
		t.Fatal(err)
	}
	s.Update([]byte("k"), 5)
	bad := []float64{math.NaN(), math.Inf(1), math.Inf(-1)}
	for _, v := range bad {
		for name, f := range map[string]func(){
			"Update":          func() { s.Update([]byte("k"), v) },
			"UpdateAndQuery":  func() { s.UpdateAndQuery([]byte("k"), v) },
			"TryUpdate.delta": func() { s.TryUpdate([]byte("k"), v, 10) },
			"TryUpdate.limit": func() { s.TryUpdate([]byte("k"), 1, v) },
			"UpdateString":    func() { s.UpdateString("k", v) },
			"TryUpdateString": func() { s.TryUpdateString("k", 1, v) },
		} {
			msg := sketchtest.Panics(f)
			if !strings.HasPrefix(msg, "sketch:") {
				t.Errorf("%s(%v): panic %q, want one starting \"sketch:\"", name, v, msg)
			}
		}
	}
	for i := range 64 {
		if q := s.Query([]byte{byte(i)}); math.IsNaN(q) || math.IsInf(q, 0) {
			t.Fatalf("a cell holds %v", q)
		}
	}
	if q := s.Query([]byte("k")); q != 5 {
		t.Errorf("k = %v after the panics, want 5", q)
	}
}

// TestAudit11APILimitAboveHi: "Any finite limit is accepted, as in grudge:
// the decision is aggregate + delta <= limit even when limit > Hi (scores
// stay clamped at Hi)."
func TestAudit11APILimitAboveHi(t *testing.T) {
	s, err := sketch.New(sketch.Config{Levels: 2, CellsPerLevel: 8, Hi: 10})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if !s.TryUpdate([]byte("k"), 3, 20) && i < 3 {
			t.Fatalf("TryUpdate %d denied below the limit", i)
		}
	}
	if q := s.Query([]byte("k")); q != 10 {
		t.Errorf("score %v, want clamped at Hi=10", q)
	}
	// aggregate (10) + 3 <= 20: admitted every time, as grudge decides.
	if !s.TryUpdate([]byte("k"), 3, 20) {
		t.Error("TryUpdate(k, 3, 20) at Hi=10 denied: the decision is aggregate+delta <= limit")
	}
	if s.TryUpdate([]byte("k"), 11, 20) {
		t.Error("TryUpdate(k, 11, 20) at score 10 admitted")
	}
}

// TestAudit11APITryUpdateCollidingKeys: "with every key colliding
// (CellsPerLevel=1) the total admitted over all keys never exceeds the
// limit", and N goroutines racing one key admit exactly the limit.
func TestAudit11APITryUpdateCollidingKeys(t *testing.T) {
	for rep := range 5 {
		s, err := sketch.New(sketch.Config{Levels: 3, CellsPerLevel: 1, Hi: 1e6, Seed: uint64(rep)})
		if err != nil {
			t.Fatal(err)
		}
		const limit, g = 500, 16
		var admitted atomic.Int64
		var wg sync.WaitGroup
		for i := range g {
			wg.Add(1)
			go func() {
				defer wg.Done()
				k := []byte{byte(i), 'x'}
				for range 100 {
					if s.TryUpdate(k, 1, limit) {
						admitted.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		if a := admitted.Load(); a != limit {
			t.Fatalf("rep %d: %d admitted over all colliding keys, want exactly %d", rep, a, limit)
		}
	}
}

// TestAudit11APIOneSidedUnderDecay: "Min aggregation never
// under-estimates: Query(k) >= the key's true score (decay rounding is
// upward)", against the float64 closed form.
func TestAudit11APIOneSidedUnderDecay(t *testing.T) {
	c := &a11Clock{}
	for _, law := range []decay.Decay{decay.Exponential(0.37), decay.Linear(2.5), decay.None()} {
		s, err := sketch.New(sketch.Config{Levels: 4, CellsPerLevel: 4096, Hi: 1e6, Decay: law, Clock: c})
		if err != nil {
			t.Fatal(err)
		}
		truth := 0.0
		for i := range 300 {
			dt := int64(i*37%1000 + 1)
			c.ms.Add(dt)
			truth = law.Apply(truth, dt) + float64(i%7) + 0.3
			s.Update([]byte("key"), float64(i%7)+0.3)
			if q := s.Query([]byte("key")); q < truth {
				t.Fatalf("%T step %d: Query %v < truth %v", law, i, q, truth)
			}
		}
	}
}

// TestAudit11APILongIdle: "Any idle time, 1 ms to years, decays as the
// reference (int64 ms) does."
func TestAudit11APILongIdle(t *testing.T) {
	for _, idle := range []int64{1, 999, 86_400_000, 40 * 86_400_000, 3 * 365 * 86_400_000} {
		c := &a11Clock{}
		law := decay.Linear(0.000_001)
		cfg := sketch.Config{Levels: 2, CellsPerLevel: 16, Hi: 1e6, Decay: law, Clock: c}
		s, err := sketch.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		r, err := reference.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		s.Update([]byte("k"), 1000)
		r.Update([]byte("k"), 1000)
		c.ms.Add(idle)
		got, want := s.Query([]byte("k")), r.Query([]byte("k"))
		if got < want || got > want*(1+1e-6)+1e-6 {
			t.Errorf("idle %d ms: sketch %v, reference %v", idle, got, want)
		}
	}
}

// TestAudit11APITouchesExactlyL: "Every operation touches exactly L
// cells": after one write of a key into an empty sketch, the snapshot's
// cell block (docs/snapshots.md: 88-byte header, then 8*L*M bytes, a
// float32 score in the low 4 bytes of each cell) holds exactly L non-zero
// scores, one per row, at the indexes QueryDetailed reports; a Query
// changes no score.
func TestAudit11APITouchesExactlyL(t *testing.T) {
	const L, M = 5, 1000
	ops := map[string]func(*sketch.Sketch){
		"Update":         func(s *sketch.Sketch) { s.Update([]byte("key"), 1) },
		"UpdateAndQuery": func(s *sketch.Sketch) { s.UpdateAndQuery([]byte("key"), 1) },
		"TryUpdate":      func(s *sketch.Sketch) { s.TryUpdate([]byte("key"), 1, 10) },
		"UpdateString":   func(s *sketch.Sketch) { s.UpdateString("key", 1) },
	}
	for name, op := range ops {
		s, err := sketch.New(sketch.Config{Levels: L, CellsPerLevel: M, Hi: 100, Clock: &a11Clock{}})
		if err != nil {
			t.Fatal(err)
		}
		op(s)
		_ = s.Query([]byte("other"))
		data, err := s.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		cells := data[88 : 88+8*L*M]
		var nonzero []int
		for i := 0; i < L*M; i++ {
			if cells[8*i] != 0 || cells[8*i+1] != 0 || cells[8*i+2] != 0 || cells[8*i+3] != 0 {
				nonzero = append(nonzero, i)
			}
		}
		d := s.QueryDetailed([]byte("key"))
		if len(nonzero) != L {
			t.Fatalf("%s: %d cells hold a score, want exactly L=%d (%v)", name, len(nonzero), L, nonzero)
		}
		for l, lv := range d.Levels {
			if want := l*M + int(lv.Index); nonzero[l] != want {
				t.Errorf("%s: row %d's written cell is %d, QueryDetailed says %d", name, l, nonzero[l]-l*M, lv.Index)
			}
		}
	}
}

// TestAudit11APINoGoroutine: "nothing runs in the background; no goroutine
// is ever started".
func TestAudit11APINoGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()
	s, err := sketch.New(sketch.Config{CellsPerLevel: 4096, Hi: 100, Decay: decay.Linear(1)})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		s.UpdateString(string(rune(i)), 1)
		s.TryUpdate([]byte{byte(i)}, 1, 50)
	}
	if after := runtime.NumGoroutine(); after > before {
		t.Errorf("%d goroutines started", after-before)
	}
}

// TestAudit11APIDefaultHasherXXH3: "Hasher HasherFactory // nil means
// XXH3()": for one Seed, a nil Hasher maps keys as XXH3() does.
func TestAudit11APIDefaultHasherXXH3(t *testing.T) {
	cfg := sketch.Config{Levels: 4, CellsPerLevel: 100_003, Hi: 10, Seed: 77}
	def, err := sketch.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Hasher = sketch.XXH3()
	x, err := sketch.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		k := []byte{byte(i), 'z', byte(i * 3)}
		a, b := def.QueryDetailed(k).Levels, x.QueryDetailed(k).Levels
		for l := range a {
			if a[l].Index != b[l].Index {
				t.Fatalf("key %v level %d: nil Hasher cell %d, XXH3() cell %d", k, l, a[l].Index, b[l].Index)
			}
		}
	}
}
