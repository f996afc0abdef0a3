package grudge_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/grudgetest"
	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/reference"
	"github.com/spaolacci/murmur3"
)

// TestAudit41FacadeConfig: New's validation (ConfigError, ErrInvalidConfig,
// the field), both spellings of None, the built-in and custom aggregators,
// a nil Hasher from a factory reported as a ConfigError naming Hasher.
func TestAudit41FacadeConfig(t *testing.T) {
	for i, c := range []struct {
		cfg   grudge.Config
		field string
	}{
		{grudge.Config{}, "Hi"}, {grudge.Config{Lo: 1, Hi: 2}, "Lo"}, {grudge.Config{Hi: -1}, "Hi"},
		{grudge.Config{Hi: math.NaN()}, "Hi"}, {grudge.Config{Levels: 9, Hi: 1}, "Levels"},
		{grudge.Config{Hi: 1, Decay: grudge.Linear(-1)}, "Decay"}, {grudge.Config{Hi: 1, Decay: grudge.Exponential(math.Inf(1))}, "Decay"},
		{grudge.Config{Hi: math.Inf(1), Decay: grudge.None}, "Hi"},
		{grudge.Config{Hi: 1, Hasher: func(uint64) grudge.Hasher { return nil }}, "Hasher"},
	} {
		_, err := grudge.New(c.cfg)
		var ce *grudge.ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, grudge.ErrInvalidConfig) || ce.Field != c.field {
			t.Errorf("config %d: err %v (%T), want a ConfigError naming %s", i, err, err, c.field)
		}
	}
	clk := grudgetest.NewFakeClock()
	for name, d := range map[string]grudge.Decay{"None": grudge.None, "None()": grudge.None(), "nil": nil} {
		s, err := grudge.New(grudge.Config{Hi: 100, Decay: d, Clock: clk})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		s.Update([]byte("k"), 7)
		clk.Advance(time.Hour)
		if got := s.Query([]byte("k")); got != 7 {
			t.Errorf("%s: Query = %v after an hour, want 7", name, got)
		}
	}
	// Aggregators: built-ins and a custom median-ish function give the
	// aggregate of QueryDetailed's levels.
	custom := func(v []float64) float64 { return v[len(v)-1] } // the last level
	for name, agg := range map[string]grudge.Aggregator{"Min": grudge.Min, "Max": grudge.Max, "Mean": grudge.Mean, "custom": custom} {
		s, err := grudge.New(grudge.Config{Levels: 4, CellsPerLevel: 4, Hi: 1e6, Aggregator: agg})
		if err != nil {
			t.Fatal(err)
		}
		for j := range 40 {
			s.Update([]byte(fmt.Sprint("k", j)), float64(j))
		}
		r := s.QueryDetailed([]byte("k3"))
		want := agg(append([]float64(nil), r.LevelScores...))
		if math.Abs(r.Aggregate-want) > 1e-9 || s.Query([]byte("k3")) != r.Aggregate || len(r.CellIndexes) != 4 {
			t.Errorf("%s: QueryDetailed %+v, aggregate of its levels %v, Query %v", name, r, want, s.Query([]byte("k3")))
		}
	}
}

// TestAudit41FacadeHashers: Murmur3 is MurmurHash3 x64-128's first 64
// bits (spaolacci/murmur3) under the seed folded to 32 bits (the known
// vector for "hello", seed 0: cbd8a7b341bd9b02), and SipHash is
// sketch.SipHash under the same seed.
func TestAudit41FacadeHashers(t *testing.T) {
	if got := grudge.Murmur3()(0).Hash64([]byte("hello")); got != 0xcbd8a7b341bd9b02 {
		t.Errorf("Murmur3()(0).Hash64(hello) = %x, want cbd8a7b341bd9b02", got)
	}
	for _, seed := range []uint64{0, 1, 0xdeadbeef, 1 << 32, math.MaxUint64} {
		fold := uint32(seed) ^ uint32(seed>>32)
		for _, k := range []string{"", "a", "hello", strings.Repeat("xyz", 100)} {
			if a, b := grudge.Murmur3()(seed).Hash64([]byte(k)), murmur3.Sum64WithSeed([]byte(k), fold); a != b {
				t.Errorf("Murmur3 seed %x key %q: %x, want %x", seed, k, a, b)
			}
			if a, b := grudge.SipHash()(seed).Hash64([]byte(k)), sketch.SipHash()(seed).Sum64([]byte(k)); a != b {
				t.Errorf("SipHash seed %x key %q: %x, sketch.SipHash %x", seed, k, a, b)
			}
		}
	}
	if grudge.SipHash()(1).Hash64([]byte("k")) == grudge.SipHash()(2).Hash64([]byte("k")) {
		t.Error("SipHash: seeds 1 and 2 hash k alike")
	}
}

// TestAudit41FacadeSuggestLevels: the smallest L in 1..8 with
// (1 - (1 - 1/M)^H)^L <= targetP, 8 when none; degenerate inputs: 0 and
// an error naming the argument.
func TestAudit41FacadeSuggestLevels(t *testing.T) {
	testsize.Serial(t)
	fp := func(l, m, h uint32) float64 {
		return math.Pow(1-math.Pow(1-1/float64(m), float64(h)), float64(l))
	}
	n := 0
	for _, m := range []uint32{1, 2, 10, 1000, 100_000, 1 << 30} {
		for _, h := range []uint32{1, 10, 1000, 1e6, math.MaxUint32} {
			for _, p := range []float64{1e-12, 1e-6, 0.001, 0.01, 0.1, 0.5, 0.999} {
				got := suggested(grudge.SuggestLevels(h, m, p))
				got2, err := grudge.SuggestLevels(h, m, p)
				if err != nil || got2 != got {
					t.Fatalf("SuggestLevels(%d, %d, %v) = %d, %v; SuggestLevels %d", h, m, p, got2, err, got)
				}
				want := uint32(8)
				for l := uint32(1); l <= 8; l++ {
					if fp(l, m, h) <= p {
						want = l
						break
					}
				}
				if got != want {
					// tolerate a tie within float rounding
					if !(math.Abs(fp(min(got, want), m, h)-p) <= 1e-12*p) {
						t.Errorf("SuggestLevels(%d, %d, %v) = %d, want %d (fp at L=%d: %v)", h, m, p, got, want, want, fp(want, m, h))
					}
				}
				n++
			}
		}
	}
	for _, c := range []struct {
		h, m uint32
		p    float64
		arg  string
	}{{0, 10, 0.1, "hotKeys"}, {10, 0, 0.1, "cellsPerLevel"}, {10, 10, 0, "targetP"}, {10, 10, 1, "targetP"},
		{10, 10, math.NaN(), "targetP"}, {10, 10, -0.5, "targetP"}, {10, 10, math.Inf(1), "targetP"}} {
		if got := suggested(grudge.SuggestLevels(c.h, c.m, c.p)); got != 0 {
			t.Errorf("SuggestLevels(%d, %d, %v) = %d, want 0", c.h, c.m, c.p, got)
		}
		if _, err := grudge.SuggestLevels(c.h, c.m, c.p); err == nil || !strings.Contains(err.Error(), c.arg) {
			t.Errorf("SuggestLevels(%d, %d, %v): %v, want an error naming %s", c.h, c.m, c.p, err, c.arg)
		}
	}
	t.Logf("%d inputs", n)
}

// TestAudit41FacadeTickerRotator: with a FakeTicker each Tick rotates
// once and Rotations() right after sees it; reads come from the oldest
// generation, writes go to all; Close is idempotent, stops the ticker,
// and later Ticks rotate nothing.
func TestAudit41FacadeTickerRotator(t *testing.T) {
	tk := grudgetest.NewFakeTicker()
	clk := grudgetest.NewFakeClock()
	r, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: grudge.Config{Hi: 100, Clock: clk}, Generations: 3, Ticker: tk})
	if err != nil {
		t.Fatal(err)
	}
	k := []byte("k")
	r.Update(k, 5)
	for i, want := range []float64{5, 5, 0} {
		tk.Tick()
		if got := r.Rotations(); got != int64(i+1) {
			t.Fatalf("after %d ticks: Rotations = %d", i+1, got)
		}
		if got := r.Query(k); got != want {
			t.Fatalf("after %d ticks (3 generations): Query = %v, want %v", i+1, got, want)
		}
	}
	clk.Advance(100 * time.Hour) // time alone does not rotate a ticker-driven rotator
	if got := r.Rotations(); got != 3 {
		t.Fatalf("Rotations = %d after a clock jump, want 3 (ticks only)", got)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(tk.Tick)
	}
	wg.Wait()
	if got := r.Rotations(); got != 7 {
		t.Fatalf("4 concurrent Ticks: Rotations = %d, want 7", got)
	}
	r.Close()
	r.Close()
	if !tk.Stopped() {
		t.Fatal("Close did not stop the ticker")
	}
	tk.Tick()
	if got := r.Rotations(); got != 7 {
		t.Fatalf("a Tick after Close rotated: %d", got)
	}
	r.Update(k, 1) // operations keep working after Close; writes reach the primary
	if got := r.Query(k); got != 1 {
		t.Fatalf("Query after Close and Update(1) = %v, want 1", got)
	}
}

// TestAudit41FacadeLazyRotator: without a Ticker rotation follows the
// clock, Rotations counts elapsed periods (a jump of k counts k), and
// Period/Generations are validated.
func TestAudit41FacadeLazyRotator(t *testing.T) {
	clk := grudgetest.NewFakeClock()
	clk.Set(time.UnixMilli(1_700_000_000_000))
	r, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: grudge.Config{Hi: 100, Clock: clk}, Period: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.Update([]byte("k"), 3)
	clk.Advance(10 * time.Second)
	if got := r.Rotations(); got != 1 {
		t.Fatalf("Rotations = %d after one period", got)
	}
	if got := r.Query([]byte("k")); got != 3 {
		t.Fatalf("Query = %v one period on (2 generations), want 3", got)
	}
	clk.Advance(35 * time.Second)
	if got := r.Rotations(); got != 4 {
		t.Fatalf("Rotations = %d after 4.5 periods, want 4", got)
	}
	if got := r.Query([]byte("k")); got != 0 {
		t.Fatalf("Query = %v after 4.5 periods, want 0", got)
	}
	for i, rc := range []grudge.RotatorConfig{
		{Sketch: grudge.Config{Hi: 1}},
		{Sketch: grudge.Config{Hi: 1}, Period: time.Second, Generations: 1},
		{Sketch: grudge.Config{Hi: 1}, Period: time.Second, Generations: 1025},
		{Sketch: grudge.Config{}, Period: time.Second},
		{Sketch: grudge.Config{Hi: 1}, Period: -time.Second},
	} {
		if _, err := grudge.NewRotator(rc); !errors.Is(err, grudge.ErrInvalidConfig) {
			t.Errorf("rotator config %d: %v, want ErrInvalidConfig", i, err)
		}
	}
	r2, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: grudge.Config{Hi: 1}, Ticker: grudgetest.NewFakeTicker()})
	if err != nil {
		t.Fatalf("Ticker without Period: %v", err)
	}
	r2.Close()
}

// TestAudit41FakeClocks: grudgetest's and sketchtest's fake clocks start
// at the Unix epoch, Advance keeps sub-millisecond parts (backwards too),
// Set jumps, NowMillis == Now().UnixMilli(), concurrent Advances add up.
func TestAudit41FakeClocks(t *testing.T) {
	g := grudgetest.NewFakeClock()
	if !g.Now().Equal(time.Unix(0, 0)) || g.NowMillis() != 0 {
		t.Fatalf("grudgetest clock starts at %v (%d ms)", g.Now(), g.NowMillis())
	}
	for range 10 {
		g.Advance(100 * time.Microsecond)
	}
	if g.NowMillis() != 1 || !g.Now().Equal(time.Unix(0, int64(time.Millisecond))) {
		t.Fatalf("10 x 100us: %v (%d ms)", g.Now(), g.NowMillis())
	}
	g.Advance(-1500 * time.Microsecond)
	if g.NowMillis() != -1 || !g.Now().Equal(time.Unix(0, -500_000)) || g.Now().UnixMilli() != g.NowMillis() {
		t.Fatalf("back 1.5 ms: %v (%d ms)", g.Now(), g.NowMillis())
	}
	at := time.Date(2030, 1, 2, 3, 4, 5, 678_912_345, time.UTC)
	g.Set(at)
	if !g.Now().Equal(at) || g.NowMillis() != at.UnixMilli() {
		t.Fatalf("Set(%v): %v (%d ms)", at, g.Now(), g.NowMillis())
	}
	g.Advance(87_655 * time.Nanosecond) // completes the millisecond
	if g.NowMillis() != at.UnixMilli()+1 || !g.Now().Equal(at.Add(87_655)) {
		t.Fatalf("Set then Advance: %v (%d ms), want %v", g.Now(), g.NowMillis(), at.Add(87_655))
	}
	s := grudgetest.NewFakeClock()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				s.Advance(300 * time.Microsecond)
			}
		})
	}
	wg.Wait()
	if s.NowMillis() != 2400 || !s.Now().Equal(time.UnixMilli(2400)) {
		t.Fatalf("8 x 1000 x 300us concurrently: %v (%d ms), want 2400 ms", s.Now(), s.NowMillis())
	}
	// Through a sketch: Linear(1) and the grudge clock.
	sk, err := grudge.New(grudge.Config{Hi: 100, Decay: grudge.Linear(1), Clock: g})
	if err != nil {
		t.Fatal(err)
	}
	sk.Update([]byte("k"), 10)
	g.Advance(5 * time.Second)
	if got := sk.Query([]byte("k")); got != 5 {
		t.Fatalf("Linear(1), 5 s: %v", got)
	}
	g.Advance(-time.Hour)
	if got := sk.Query([]byte("k")); got != 5 {
		t.Fatalf("a step back of an hour: %v, want 5 (no time)", got)
	}
}

// TestAudit41FixedRotatorFieldNotQualified: sketch/errors.go gave
// "Sketch.Hi" as an example of ConfigError.Field, but the rotators
// (rotator.Config, grudge.RotatorConfig, reference.RotatorConfig) report
// an invalid Sketch.Hi as Field "Hi" (and Sketch.Decay as "Decay"), and
// no constructor produced "Sketch.Hi". Fixed in the doc: a rotator's
// Sketch fields go by their own names; this pins that.
func TestAudit41FixedRotatorFieldNotQualified(t *testing.T) {
	var bad []string
	check := func(who string, err error, want string) {
		var ce *sketch.ConfigError
		if !errors.As(err, &ce) {
			bad = append(bad, fmt.Sprintf("%s: %v is not a ConfigError", who, err))
			return
		}
		if ce.Field != want {
			bad = append(bad, fmt.Sprintf("%s: Field %q, want %q (%q)", who, ce.Field, want, err))
		}
	}
	sc := sketch.Config{Hi: 0}
	_, err := rotator.New(rotator.Config{Sketch: sc, Period: time.Second})
	check("rotator.New, Sketch.Hi = 0", err, "Hi")
	_, err = grudge.NewRotator(grudge.RotatorConfig{Sketch: grudge.Config{Hi: 0}, Period: time.Second})
	check("grudge.NewRotator, Sketch.Hi = 0", err, "Hi")
	_, err = reference.NewRotator(reference.RotatorConfig{Sketch: sc, Period: time.Second})
	check("reference.NewRotator, Sketch.Hi = 0", err, "Hi")
	_, err = rotator.New(rotator.Config{Sketch: sketch.Config{Hi: 1, Decay: decay.Linear(-1)}, Period: time.Second})
	check("rotator.New, Sketch.Decay = Linear(-1)", err, "Decay")
	if len(bad) > 0 {
		t.Fatalf("want a rotator's Sketch fields by their own names (sketch/errors.go); got:\n%s", strings.Join(bad, "\n"))
	}
}

// TestAudit41SketchSuggestLevels: sketch.SuggestLevels (the unchecked
// native form): no hot keys need one level, a NaN target gives MaxLevels,
// cellsPerLevel 0 means DefaultCellsPerLevel, and it agrees with the
// grudge face on non-degenerate inputs.
func TestAudit41SketchSuggestLevels(t *testing.T) {
	if got := sketch.SuggestLevels(0, 1000, 0.01); got != 1 {
		t.Errorf("SuggestLevels(0 hot keys) = %d, want 1", got)
	}
	if got := sketch.SuggestLevels(10, 1000, math.NaN()); got != sketch.MaxLevels {
		t.Errorf("SuggestLevels(NaN target) = %d, want %d", got, sketch.MaxLevels)
	}
	if a, b := sketch.SuggestLevels(5000, 0, 1e-4), sketch.SuggestLevels(5000, sketch.DefaultCellsPerLevel, 1e-4); a != b {
		t.Errorf("cellsPerLevel 0: %d, DefaultCellsPerLevel: %d", a, b)
	}
	for _, h := range []uint32{1, 100, 10000} {
		for _, p := range []float64{1e-9, 1e-3, 0.2} {
			if a, b := sketch.SuggestLevels(h, 4096, p), suggested(grudge.SuggestLevels(h, 4096, p)); a != b {
				t.Errorf("SuggestLevels(%d, 4096, %v): sketch %d, grudge %d", h, p, a, b)
			}
		}
	}
}
