package grudge_test

import (
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/grudgetest"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// grudgetest's package doc example: after clock.Advance(15s),
// "ticker.Tick() // r.Rotations() now reads 1".
func TestAudit43GrudgetestDocExample(t *testing.T) {
	clock := grudgetest.NewFakeClock()
	ticker := grudgetest.NewFakeTicker()
	r, err := grudge.NewRotator(grudge.RotatorConfig{
		Sketch: grudge.Config{Lo: 0, Hi: 10, Decay: grudge.Linear(1), Clock: clock},
		Period: 15 * time.Second, Ticker: ticker,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	clock.Advance(15 * time.Second)
	ticker.Tick()
	if got := r.Rotations(); got != 1 {
		t.Errorf("Rotations() = %d after the doc example, doc says it now reads 1", got)
	}
	// migrating.md: "grudgetest.FakeClock starts at the Unix epoch"
	if !grudgetest.NewFakeClock().Now().Equal(time.Unix(0, 0)) {
		t.Errorf("FakeClock start %v, migrating.md: the Unix epoch", grudgetest.NewFakeClock().Now())
	}
}

// README.md's rotator snippet compiles and admits while the debt stays within 20.
func TestAudit43ReadmeRotatorSnippet(t *testing.T) {
	c := sketchtest.NewFakeClock()
	r, err := rotator.New(rotator.Config{
		Sketch: sketch.Config{
			Decay:  decay.Linear(10),
			Hi:     100,
			Hasher: sketch.SipHash(),
			Seed:   sketch.RandomSeed(),
			Clock:  c,
		},
		Period: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := 0; i < 30; i++ {
		if r.TryUpdateString("192.0.2.1", 1, 20) {
			n++
		}
	}
	if n != 20 {
		t.Errorf("admitted %d of 30 at once, README: while the debt stays within 20", n)
	}
	c.Advance(100 * time.Millisecond) // drains 10 per second: one more
	if !r.TryUpdateString("192.0.2.1", 1, 20) || r.TryUpdateString("192.0.2.1", 1, 20) {
		t.Errorf("after 100 ms not exactly one more admitted")
	}
	// rotator Config: "Generations ... 0 means 2"; "a score lives at most
	// Generations x Period": the key is gone after 2 minutes idle of writes
	// even with a decay too slow to drain it.
	r2, _ := rotator.New(rotator.Config{Sketch: sketch.Config{Decay: decay.None(), Hi: 100, Clock: c}, Period: time.Minute})
	r2.UpdateString("x", 50)
	c.Advance(2 * time.Minute)
	if q := r2.QueryString("x"); q != 0 {
		t.Errorf("score %v after Generations x Period, doc: gone", q)
	}
	if g := r2.Sizes(); g.Total == 0 {
		t.Errorf("Sizes zero")
	}
}

// rotator doc: "Period ... counted in whole ms rounded up (2.9 ms is 3)";
// Generations at most 1024 with the quoted message; at least 2.
func TestAudit43RotatorConfigDocs(t *testing.T) {
	c := sketchtest.NewFakeClock()
	r, err := rotator.New(rotator.Config{Sketch: sketch.Config{Hi: 100, Clock: c, Levels: 1, CellsPerLevel: 64}, Period: 2900 * time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	r.UpdateString("k", 1)
	c.Advance(2 * time.Millisecond)
	r.QueryString("k")
	if p := r.Stats().Periods; p != 0 {
		t.Errorf("rotated after 2 ms of a 2.9 ms Period: Periods %d", p)
	}
	c.Advance(time.Millisecond)
	r.QueryString("k")
	if p := r.Stats().Periods; p != 1 {
		t.Errorf("after 3 ms of a 2.9 ms (=3 ms) Period: Periods %d, want 1", p)
	}
	_, err = rotator.New(rotator.Config{Sketch: sketch.Config{Hi: 1, Levels: 1, CellsPerLevel: 8}, Period: time.Second, Generations: 1025})
	if err == nil || !strings.Contains(err.Error(), "rotator: Generations must be <= 1024") {
		t.Errorf("Generations 1025 err %v, migrating.md quotes rotator: Generations must be <= 1024", err)
	}
	_, err = rotator.New(rotator.Config{Sketch: sketch.Config{Hi: 1}, Period: time.Second, Generations: 1})
	if !errors.Is(err, sketch.ErrInvalidConfig) {
		t.Errorf("Generations 1 err %v, doc: at least 2", err)
	}
	_, err = rotator.New(rotator.Config{Sketch: sketch.Config{Hi: 1}, Period: 999 * time.Microsecond})
	if !errors.Is(err, sketch.ErrInvalidConfig) {
		t.Errorf("Period < 1 ms err %v, doc: at least one millisecond", err)
	}
	// Close is an idempotent no-op
	r.Close()
	r.Close()
}

// root doc.go and migrating.md: SuggestLevels at most 8, 0 for degenerate
// inputs; SuggestLevels's errors start "grudge: "; New's errors are
// the core's, prefixed, matching ErrInvalidConfig; the zero Config's
// message says to set Hi; Levels at most 8.
func TestAudit43RootConfigDocs(t *testing.T) {
	for _, c := range []struct {
		h, m uint32
		p    float64
	}{{0, 100, 0.01}, {10, 0, 0.01}, {10, 100, math.NaN()}, {10, 100, 0}, {10, 100, 1}, {10, 100, -1}} {
		if got := suggested(grudge.SuggestLevels(c.h, c.m, c.p)); got != 0 {
			t.Errorf("SuggestLevels(%v) = %d, doc: 0", c, got)
		}
		_, err := grudge.SuggestLevels(c.h, c.m, c.p)
		if err == nil || !strings.HasPrefix(err.Error(), "grudge: ") {
			t.Errorf("SuggestLevels(%v) err %v, doc: starts grudge: ", c, err)
		}
	}
	if got := suggested(grudge.SuggestLevels(1_000_000, 1000, 1e-9)); got != 8 {
		t.Errorf("unreachable target: %d, doc: 8", got)
	}
	// (1-(1-1/M)^H)^L <= p: H=1000, M=100000: q ~ 0.00995; L=2 gives 9.9e-5
	if got := suggested(grudge.SuggestLevels(1000, 100000, 1e-4)); got != 2 {
		t.Errorf("SuggestLevels(1000, 100000, 1e-4) = %d, formula gives 2", got)
	}
	_, err := grudge.New(grudge.Config{})
	if !errors.Is(err, grudge.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "sketch: ") || !strings.Contains(err.Error(), "Hi") {
		t.Errorf("zero Config err %v, migrating.md: prefixed sketch:, says to set Hi", err)
	}
	_, err = grudge.New(grudge.Config{Hi: 1, Levels: 9})
	var ce *grudge.ConfigError
	if !errors.As(err, &ce) || ce.Field != "Levels" {
		t.Errorf("Levels 9 err %v, doc: at most 8, naming the field", err)
	}
	_, err = grudge.NewRotator(grudge.RotatorConfig{Sketch: grudge.Config{Hi: 1}, Period: 0})
	if !errors.Is(err, grudge.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "rotator: ") {
		t.Errorf("rotator without Period nor Ticker: err %v, doc: prefixed rotator:", err)
	}
	// None reads as a call too, and compares with None()
	s, err := grudge.New(grudge.Config{Hi: 100, Decay: grudge.None})
	if err != nil {
		t.Fatal(err)
	}
	s2, err := grudge.New(grudge.Config{Hi: 100, Decay: grudge.None()})
	if err != nil || s2 == nil {
		t.Fatalf("None() refused: %v", err)
	}
	// NaN delta panics
	func() {
		defer func() {
			if recover() == nil {
				t.Errorf("NaN delta did not panic")
			}
		}()
		s.Update([]byte("k"), math.NaN())
	}()
	// "N goroutines racing TryUpdate(k, 1, 1000) admit exactly 1000"
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		s, _ := grudge.New(grudge.Config{Hi: 1e6})
		var mu sync.Mutex
		total := 0
		var wg sync.WaitGroup
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				n := 0
				for i := 0; i < 300; i++ {
					if s.TryUpdate([]byte("k"), 1, 1000) {
						n++
					}
				}
				mu.Lock()
				total += n
				mu.Unlock()
			}()
		}
		wg.Wait()
		if total != 1000 {
			t.Errorf("admitted %d, doc: exactly 1000", total)
		}
	})
	// "a score saturates at ±MaxFloat32 (3.4e38), so an infinite bound works as that value"
	inf, err := grudge.New(grudge.Config{Hi: math.Inf(1), Decay: grudge.Linear(1)})
	if err != nil {
		t.Fatalf("Hi=+Inf with a draining decay refused: %v", err)
	}
	inf.Update([]byte("k"), math.MaxFloat64)
	if q := inf.Query([]byte("k")); q != math.MaxFloat32 {
		t.Errorf("saturated score %v, doc: MaxFloat32", q)
	}
	// Reads capped at Hi for a Hi no float32 holds
	h01, _ := grudge.New(grudge.Config{Hi: 0.1})
	h01.Update([]byte("k"), 1)
	if q := h01.Query([]byte("k")); q != 0.1 {
		t.Errorf("Hi 0.1 read %v, doc: capped at Hi", q)
	}
	if !h01.TryUpdate([]byte("k"), 0, 0.1) {
		t.Errorf("TryUpdate(k, 0, Hi) at the clamp denied")
	}
}

// doc.go: "Update, Query, UpdateAndQuery and TryUpdate do not allocate
// with a built-in aggregator"; migrating.md: "A clock jump over k periods
// retires k generations at once, and Rotations() counts k".
func TestAudit43RootAllocsAndRotations(t *testing.T) {
	clock := grudgetest.NewFakeClock()
	r, err := grudge.NewRotator(grudge.RotatorConfig{
		Sketch: grudge.Config{Hi: 100, Decay: grudge.Linear(1), Clock: clock, Aggregator: grudge.Max},
		Period: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	k := []byte("key")
	for name, f := range map[string]func(){
		"Update":         func() { r.Update(k, 1) },
		"Query":          func() { r.Query(k) },
		"UpdateAndQuery": func() { r.UpdateAndQuery(k, 1) },
		"TryUpdate":      func() { r.TryUpdate(k, 1, 50) },
	} {
		if a := testing.AllocsPerRun(100, f); a != 0 {
			t.Errorf("Rotator.%s: %v allocs", name, a)
		}
	}
	before := r.Rotations()
	clock.Advance(5*time.Second + 500*time.Millisecond)
	if got := r.Rotations() - before; got != 5 {
		t.Errorf("jump of 5.5 periods: Rotations +%d, migrating.md: k = 5", got)
	}
}
