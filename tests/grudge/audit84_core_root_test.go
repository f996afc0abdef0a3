package grudge_test

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spaolacci/murmur3"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit84CoreTicker: API.md: "grudgetest.NewFakeTicker() (Tick()
// rotates once; Rotations() read right after sees it). With a Ticker,
// rotation follows its ticks"; Close "is idempotent" and "stops
// ticker-driven rotation"; "Operations keep working after Close".
func TestAudit84CoreTicker(t *testing.T) {
	for _, period := range []time.Duration{0, time.Millisecond, time.Second} {
		for n := uint32(2); n <= 4; n++ {
			clk := grudgetest.NewFakeClock()
			tk := grudgetest.NewFakeTicker()
			r, err := grudge.NewRotator(grudge.RotatorConfig{
				Sketch:      grudge.Config{Levels: 2, CellsPerLevel: 64, Hi: 100, Clock: clk},
				Generations: n, Period: period, Ticker: tk,
			})
			if err != nil {
				t.Fatalf("period %v: %v", period, err)
			}
			r.Update([]byte("a"), 3)
			clk.Advance(100 * time.Hour) // the clock alone rotates nothing
			if got := r.Rotations(); got != 0 {
				t.Fatalf("period %v N=%d: %d rotations without a tick", period, n, got)
			}
			for i := uint32(1); i <= n; i++ {
				tk.Tick()
				if got := r.Rotations(); got != int64(i) {
					t.Fatalf("period %v N=%d: Rotations() = %d right after tick %d", period, n, got, i)
				}
				want := 3.0
				if i == n {
					want = 0 // the write was in the first n generations only
				}
				if got := r.Query([]byte("a")); got != want {
					t.Fatalf("period %v N=%d: after %d ticks a reads %v; want %v", period, n, i, got, want)
				}
			}
			var wg sync.WaitGroup
			for range 4 {
				wg.Add(1)
				go func() { defer wg.Done(); tk.Tick() }()
			}
			wg.Wait()
			if got := r.Rotations(); got != int64(n)+4 {
				t.Fatalf("period %v N=%d: Rotations() = %d after %d + 4 concurrent ticks", period, n, got, n)
			}
			r.Update([]byte("b"), 7)
			r.Close()
			r.Close()
			if !tk.Stopped() {
				t.Fatalf("Close did not stop the ticker")
			}
			before := r.Rotations()
			tk.Tick()
			clk.Advance(1000 * time.Hour)
			if got := r.Rotations(); got != before {
				t.Fatalf("period %v N=%d: Rotations %d -> %d after Close", period, n, before, got)
			}
			if got := r.Query([]byte("b")); got != 7 {
				t.Fatalf("period %v N=%d: b reads %v after Close; want 7 (no rotation)", period, n, got)
			}
			if !r.TryUpdate([]byte("b"), 3, 10) || r.TryUpdate([]byte("b"), 1, 10) {
				t.Fatalf("TryUpdate after Close is not exact")
			}
		}
	}
}

// TestAudit84CoreLazyRotations: without a Ticker, Rotations counts the
// periods elapsed ("a clock jump over k periods counts k"), a backwards
// clock rotates nothing, and Close is an idempotent no-op.
func TestAudit84CoreLazyRotations(t *testing.T) {
	clk := grudgetest.NewFakeClock()
	r, err := grudge.NewRotator(grudge.RotatorConfig{
		Sketch: grudge.Config{Levels: 2, CellsPerLevel: 64, Hi: 100, Clock: clk}, Generations: 3, Period: 10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	r.Close()
	r.Update([]byte("a"), 1)
	clk.Advance(29 * time.Millisecond)
	if got, q := r.Rotations(), r.Query([]byte("a")); got != 2 || q != 1 {
		t.Fatalf("after 29 ms: Rotations %d, a %v; want 2, 1", got, q)
	}
	clk.Advance(-time.Hour)
	if got, q := r.Rotations(), r.Query([]byte("a")); got != 2 || q != 1 {
		t.Fatalf("after a step back: Rotations %d, a %v; want 2, 1", got, q)
	}
	clk.Advance(time.Hour + 1*time.Millisecond) // 30 ms
	if got, q := r.Rotations(), r.Query([]byte("a")); got != 3 || q != 0 {
		t.Fatalf("at 30 ms: Rotations %d, a %v; want 3, 0", got, q)
	}
	clk.Advance(10_000 * time.Millisecond)
	if got := r.Rotations(); got != 1003 {
		t.Fatalf("after 10 s more: Rotations %d; want 1003", got)
	}
}

// audit84coreSecond is a custom aggregator: the second smallest score.
func audit84coreSecond(v []float64) float64 {
	c := slices.Clone(v)
	slices.Sort(c)
	return c[min(1, len(c)-1)]
}

// audit84coreOnlyNow is a user Clock with Now alone (no NowMillis).
type audit84coreOnlyNow struct{ c *grudgetest.FakeClock }

func (c audit84coreOnlyNow) Now() time.Time { return c.c.Now() }

// TestAudit84CoreCustomAggregator: any func works as Aggregator; Query,
// UpdateAndQuery and TryUpdate's decision use it.
func TestAudit84CoreCustomAggregator(t *testing.T) {
	fc := grudgetest.NewFakeClock()
	fc.Set(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	for _, agg := range []grudge.Aggregator{audit84coreSecond, func(v []float64) float64 { return v[len(v)-1] }} {
		s, err := grudge.New(grudge.Config{Levels: 4, CellsPerLevel: 2, Hi: 1000, Aggregator: agg,
			Decay: grudge.Linear(1), Clock: audit84coreOnlyNow{fc}})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 50 {
			k := []byte(fmt.Sprint("k", i%7))
			s.Update(k, float64(i%5))
			d := s.QueryDetailed(k)
			if want := agg(d.LevelScores); d.Aggregate != want || s.Query(k) != want {
				t.Fatalf("step %d: aggregate %v, Query %v; want agg(%v) = %v", i, d.Aggregate, s.Query(k), d.LevelScores, want)
			}
			lim := d.Aggregate + 2
			if !s.TryUpdate(k, 2, lim) {
				t.Fatalf("step %d: TryUpdate(k, 2, agg+2) denied (levels %v)", i, d.LevelScores)
			}
			if d2 := s.QueryDetailed(k); s.TryUpdate(k, 0.5, agg(d2.LevelScores)+0.25) {
				t.Fatalf("step %d: TryUpdate over the custom aggregate admitted", i)
			}
			fc.Advance(300 * time.Millisecond)
			if i%10 == 9 {
				fc.Advance(-5 * time.Second) // backwards: no growth
			}
		}
	}
}

// TestAudit84CoreMurmur3: Murmur3 is "MurmurHash3 x64 (the first 64 bits of
// the 128-bit variant ...), seeded with the seed folded to 32 bits", and
// level l of a key uses (h1 + l*h2) reduced to [0, M), h2 forced odd.
func TestAudit84CoreMurmur3(t *testing.T) {
	for _, seed := range []uint64{0, 1, 0xdeadbeefcafef00d, math.MaxUint64} {
		h := grudge.Murmur3()(seed)
		for _, k := range []string{"", "a", "hello world", strings.Repeat("x", 100)} {
			want := murmur3.Sum64WithSeed([]byte(k), uint32(seed)^uint32(seed>>32))
			if got := h.Hash64([]byte(k)); got != want {
				t.Fatalf("Murmur3()(%#x).Hash64(%q) = %#x; want %#x", seed, k, got, want)
			}
		}
	}
	var seen []uint64
	var mu sync.Mutex
	rec := func(seed uint64) grudge.Hasher {
		mu.Lock()
		seen = append(seen, seed)
		mu.Unlock()
		return grudge.Murmur3()(seed)
	}
	const m = 1000
	s, err := grudge.New(grudge.Config{Levels: 8, CellsPerLevel: m, Hi: 1, Hasher: rec})
	if err != nil {
		t.Fatal(err)
	}
	seed := seen[len(seen)-1]
	for _, k := range []string{"a", "b", "user:42"} {
		h := murmur3.Sum64WithSeed([]byte(k), uint32(seed)^uint32(seed>>32))
		h1, h2 := uint32(h), uint32(h>>32)|1
		d := s.QueryDetailed([]byte(k))
		for l, idx := range d.CellIndexes {
			g := h1 + uint32(l)*h2
			if want := uint32(uint64(g) * m >> 32); idx != want && idx != g%m {
				t.Fatalf("key %q level %d: index %d; want %d (multiply-shift) or %d (mod)", k, l, idx, want, g%m)
			}
		}
	}
}

// TestAudit84CoreSuggestLevels: "refuses degenerate inputs with an error
// naming the argument and its value (prefix "grudge: ")".
func TestAudit84CoreSuggestLevels(t *testing.T) {
	bad := []struct {
		h, m uint32
		p    float64
		arg  string
	}{
		{0, 100, 0.01, "hotKeys"}, {10, 0, 0.01, "cellsPerLevel"},
		{10, 100, math.NaN(), "targetP"}, {10, 100, 0, "targetP"}, {10, 100, 1, "targetP"},
		{10, 100, -0.5, "targetP"}, {10, 100, 2, "targetP"}, {10, 100, math.Inf(1), "targetP"},
		{10, 100, math.Inf(-1), "targetP"}, {10, 100, math.Copysign(0, -1), "targetP"},
	}
	for _, b := range bad {
		l, err := grudge.SuggestLevels(b.h, b.m, b.p)
		if err == nil || !strings.HasPrefix(err.Error(), "grudge: ") || !strings.Contains(err.Error(), b.arg) {
			t.Errorf("SuggestLevels(%d, %d, %v) = %d, %v; want an error starting \"grudge: \" naming %s", b.h, b.m, b.p, l, err, b.arg)
		}
	}
	for _, c := range []struct {
		h, m uint32
		p    float64
	}{{1000, 100_000, 0.01}, {1, 1, 0.5}, {100_000, 100, 1e-9}, {5, 1 << 30, 1e-300}, {1, 2, math.SmallestNonzeroFloat64}} {
		l, err := grudge.SuggestLevels(c.h, c.m, c.p)
		if err != nil {
			t.Fatalf("SuggestLevels(%d, %d, %v): %v", c.h, c.m, c.p, err)
		}
		fp := func(L uint32) float64 {
			return math.Pow(1-math.Pow(1-1/float64(c.m), float64(c.h)), float64(L))
		}
		want := uint32(8)
		for L := uint32(1); L <= 8; L++ {
			if fp(L) <= c.p {
				want = L
				break
			}
		}
		if l != want {
			t.Errorf("SuggestLevels(%d, %d, %v) = %d; want %d", c.h, c.m, c.p, l, want)
		}
	}
}

// TestAudit84CoreConfigErrors: invalid configs are *ConfigError naming the
// field, matched by errors.Is(err, ErrInvalidConfig).
func TestAudit84CoreConfigErrors(t *testing.T) {
	nilHasher := func(uint64) grudge.Hasher { return nil }
	cases := []struct {
		cfg   grudge.Config
		field string
	}{
		{grudge.Config{Lo: 1, Hi: 2}, "Lo"},
		{grudge.Config{Lo: -2, Hi: -1}, "Hi"},
		{grudge.Config{Lo: 0, Hi: 0}, ""},
		{grudge.Config{Lo: math.NaN(), Hi: 1}, "Lo"},
		{grudge.Config{Hi: math.NaN()}, "Hi"},
		{grudge.Config{Hi: math.Inf(1)}, "Hi"},
		{grudge.Config{Hi: math.Inf(1), Decay: grudge.None}, "Hi"},
		{grudge.Config{Lo: math.Inf(-1), Hi: 1, Decay: grudge.None()}, "Lo"},
		{grudge.Config{Hi: 1, Levels: 9}, "Levels"},
		{grudge.Config{Hi: 1, Decay: grudge.Exponential(0)}, ""},
		{grudge.Config{Hi: 1, Decay: grudge.Exponential(math.NaN())}, ""},
		{grudge.Config{Hi: 1, Decay: grudge.Linear(-1)}, ""},
		{grudge.Config{Hi: 1, Decay: grudge.Linear(math.Inf(1))}, ""},
		{grudge.Config{Hi: 1, Hasher: nilHasher}, "Hasher"},
		{grudge.Config{Hi: 1e39}, "Hi"},
	}
	for _, c := range cases {
		_, err := grudge.New(c.cfg)
		var ce *grudge.ConfigError
		if err == nil || !errors.Is(err, grudge.ErrInvalidConfig) || !errors.As(err, &ce) || (c.field != "" && ce.Field != c.field) {
			t.Errorf("New(%+v) = %v; want a *ConfigError naming %q matching ErrInvalidConfig", c.cfg, err, c.field)
		}
		_, err = grudge.NewRotator(grudge.RotatorConfig{Sketch: c.cfg, Period: time.Second})
		if err == nil || !errors.Is(err, grudge.ErrInvalidConfig) {
			t.Errorf("NewRotator(%+v) = %v; want ErrInvalidConfig", c.cfg, err)
		}
	}
	for _, rc := range []grudge.RotatorConfig{
		{Sketch: grudge.Config{Hi: 1}},                                      // no Period, no Ticker
		{Sketch: grudge.Config{Hi: 1}, Period: -time.Second},                // negative
		{Sketch: grudge.Config{Hi: 1}, Period: time.Microsecond},            // below 1 ms
		{Sketch: grudge.Config{Hi: 1}, Period: time.Second, Generations: 1}, // < 2
		{Sketch: grudge.Config{Hi: 1}, Period: -1, Ticker: grudgetest.NewFakeTicker()},
	} {
		r, err := grudge.NewRotator(rc)
		if err == nil || !errors.Is(err, grudge.ErrInvalidConfig) {
			t.Errorf("NewRotator(%+v) = %v; want ErrInvalidConfig", rc, err)
			if r != nil {
				r.Close()
			}
		}
	}
}

// TestAudit84CoreRootPanics: NaN or ±Inf delta or limit panics with a
// message starting "sketch:" on the root Sketch and Rotator, and leaves the
// key's cells as they were.
func TestAudit84CoreRootPanics(t *testing.T) {
	clk := grudgetest.NewFakeClock()
	s, err := grudge.New(grudge.Config{Levels: 3, CellsPerLevel: 1, Lo: -5, Hi: 5, Clock: clk, Aggregator: audit84coreSecond})
	if err != nil {
		t.Fatal(err)
	}
	tk := grudgetest.NewFakeTicker()
	r, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: grudge.Config{Hi: 5, Clock: clk, Hasher: grudge.SipHash()}, Ticker: tk})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	k := []byte("k")
	s.Update(k, 2)
	r.Update(k, 2)
	type op struct {
		name string
		f    func(float64)
	}
	ops := []op{
		{"Sketch.Update", func(v float64) { s.Update(k, v) }},
		{"Sketch.UpdateAndQuery", func(v float64) { s.UpdateAndQuery(k, v) }},
		{"Sketch.TryUpdate/delta", func(v float64) { s.TryUpdate(k, v, 3) }},
		{"Sketch.TryUpdate/limit", func(v float64) { s.TryUpdate(k, 1, v) }},
		{"Rotator.Update", func(v float64) { r.Update(k, v) }},
		{"Rotator.UpdateAndQuery", func(v float64) { r.UpdateAndQuery(k, v) }},
		{"Rotator.TryUpdate/delta", func(v float64) { r.TryUpdate(k, v, 3) }},
		{"Rotator.TryUpdate/limit", func(v float64) { r.TryUpdate(k, 1, v) }},
		{"Native.UpdateAt", func(v float64) { s.Native().UpdateAt(clk.Now(), "k", v) }},
		{"Native.TryUpdateAt", func(v float64) { r.Native().TryUpdateAt(clk.Now(), "k", 0, v) }},
	}
	for _, o := range ops {
		for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
			msg := sketchtest.Panics(func() { o.f(v) })
			if !strings.HasPrefix(msg, "sketch:") {
				t.Errorf("%s(%v): panic %q; want \"sketch:\" prefix", o.name, v, msg)
			}
			for _, d := range []grudge.Result{s.QueryDetailed(k), r.QueryDetailed(k)} {
				for _, x := range d.LevelScores {
					if x != 2 {
						t.Fatalf("%s(%v): a cell reads %v; want 2", o.name, v, x)
					}
				}
			}
		}
	}
	tk.Tick()
	if got := r.Rotations(); got != 1 {
		t.Fatalf("Rotations %d", got)
	}
	_ = sketch.Min
}

// TestAudit84CoreRootTryUpdate: "Any finite limit is accepted, above Hi
// too (scores stay clamped at Hi)"; N goroutines racing TryUpdate(k, 1,
// 1000) admit exactly 1000.
func TestAudit84CoreRootTryUpdate(t *testing.T) {
	s, err := grudge.New(grudge.Config{Hi: 10, Lo: -10})
	if err != nil {
		t.Fatal(err)
	}
	k := []byte("k")
	s.Update(k, 100)
	if !s.TryUpdate(k, 5, 15) || s.Query(k) != 10 || s.TryUpdate(k, 5, 14.5) {
		t.Fatalf("limit above Hi not decided as aggregate + delta <= limit")
	}
	if !s.TryUpdate(k, -25, -15) || s.Query(k) != -10 {
		t.Fatalf("negative delta to the Lo clamp: %v", s.Query(k))
	}
	tk := grudgetest.NewFakeTicker()
	r, _ := grudge.NewRotator(grudge.RotatorConfig{Sketch: grudge.Config{Hi: 1e6}, Ticker: tk, Generations: 3})
	defer r.Close()
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted := 0
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 0
			for i := range 400 {
				if r.TryUpdate(k, 1, 1000) {
					n++
				}
				if g == 0 && i%100 == 50 {
					tk.Tick() // rotations during the race: the new primary was written all along
				}
			}
			mu.Lock()
			admitted += n
			mu.Unlock()
		}()
	}
	wg.Wait()
	// With ticks during the race the primary changed: what it holds never
	// exceeds the limit, and topping it up stops at exactly 1000.
	if q := r.Query(k); q > 1000 || admitted < 1000 {
		t.Fatalf("primary holds %v after %d admissions; want <= 1000 and >= 1000 admitted", q, admitted)
	}
	for r.TryUpdate(k, 1, 1000) {
	}
	if q := r.Query(k); q != 1000 {
		t.Fatalf("primary holds %v after topping up; want 1000", q)
	}
	s2, _ := grudge.New(grudge.Config{Hi: 1e6})
	admitted = 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 0
			for range 300 {
				if s2.TryUpdate(k, 1, 1000) {
					n++
				}
			}
			mu.Lock()
			admitted += n
			mu.Unlock()
		}()
	}
	wg.Wait()
	if admitted != 1000 {
		t.Fatalf("admitted %d; want exactly 1000", admitted)
	}
}
