package tests

// Audit 3 (docs): examples and numbers quoted in the package
// documentation (go doc), checked against the code.

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/grudgetest"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

func audit3Panic(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	f()
	return "<no panic>"
}

// sketchtest's package doc: Linear(1), Update(k, 10), Advance(5s),
// "s.Query(k) // 5".
func TestAudit3DocsSketchtestExample(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	s, err := sketch.New(sketch.Config{Hi: 100, Decay: decay.Linear(1), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	k := []byte("k")
	s.Update(k, 10)
	clk.Advance(5 * time.Second)
	if got := s.Query(k); got != 5 {
		t.Errorf("Query = %v, the doc says 5", got)
	}
}

// grudgetest's package doc: after Advance(15s) and Tick(),
// "r.Rotations() now reads 1".
func TestAudit3DocsGrudgetestExample(t *testing.T) {
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
		t.Errorf("Rotations() = %d right after Tick, the doc says 1", got)
	}
}

// sketch.ConfigError's doc: its message carries the package prefix, "for
// example "sketch: CellsPerLevel must be <= 1073741824; got 2000000000"".
func TestAudit3DocsConfigErrorExample(t *testing.T) {
	_, err := sketch.New(sketch.Config{Hi: 1, CellsPerLevel: 2_000_000_000})
	if err == nil {
		t.Fatal("CellsPerLevel 2e9 accepted")
	}
	if got, want := err.Error(), "sketch: CellsPerLevel must be <= 1073741824; got 2000000000"; got != want {
		t.Errorf("error %q, the doc quotes %q", got, want)
	}
	var ce *sketch.ConfigError
	if !errors.As(err, &ce) || ce.Field != "CellsPerLevel" || !errors.Is(err, sketch.ErrInvalidConfig) {
		t.Errorf("error %v: want a *ConfigError with Field CellsPerLevel matching ErrInvalidConfig", err)
	}
	if sketch.MaxCellsPerLevel != 1073741824 {
		t.Errorf("MaxCellsPerLevel = %d, the doc's example names 1073741824", sketch.MaxCellsPerLevel)
	}
}

// httplimit's package doc, "Answers": `RateLimit-Policy: "default";q=20;w=2`
// and `RateLimit: "default";r=13;t=1` for limit.MustNew(10, 20): q the
// burst, w = ceil(burst/rate), r the Remaining, t the NextAfter rounded up.
// Seven requests at one instant leave r = 13.
func TestAudit3DocsHTTPLimitFieldsExample(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	l := limit.MustNew(10, 20, limit.WithClock(clk))
	h := httplimit.Wrap(l, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	var w *httptest.ResponseRecorder
	for range 7 {
		w = httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	}
	if got, want := w.Header().Get("RateLimit-Policy"), `"default";q=20;w=2`; got != want {
		t.Errorf("RateLimit-Policy %q, the doc shows %q", got, want)
	}
	if got, want := w.Header().Get("RateLimit"), `"default";r=13;t=1`; got != want {
		t.Errorf("RateLimit %q, the doc shows %q", got, want)
	}
}

// limit's package doc, "Engines": Buckets "holds a limiter only where it
// is exact: ... limit.New(10, 20), New(1000, 1000), New(1, 30), Every(d)
// for d a whole number of ms with burst <= 30.7 s / d"; Auto "picks
// Buckets wherever it is exact and CountMin elsewhere"; "New refuses
// WithEngine(Buckets) otherwise".
func TestAudit3DocsLimitEngineExamples(t *testing.T) {
	for _, c := range []struct {
		lim   limit.Limit
		burst int
		want  limit.Engine
	}{
		{10, 20, limit.Buckets},
		{1000, 1000, limit.Buckets},
		{1, 30, limit.Buckets},
		{limit.Every(100 * time.Millisecond), 307, limit.Buckets}, // 30.7 s / 100 ms
		{1, 31, limit.CountMin},                                   // MaxDebt 62 s > 61.4 s
		{limit.Every(100 * time.Millisecond), 308, limit.CountMin},
	} {
		l, err := limit.New(c.lim, c.burst)
		if err != nil {
			t.Fatalf("New(%v, %d): %v", c.lim, c.burst, err)
		}
		if got := l.Engine(); got != c.want {
			t.Errorf("New(%v, %d).Engine() = %v, want %v", c.lim, c.burst, got, c.want)
		}
		if !l.Exact() {
			t.Errorf("New(%v, %d) is not Exact", c.lim, c.burst)
		}
		if c.want == limit.CountMin {
			_, err := limit.New(c.lim, c.burst, limit.WithEngine(limit.Buckets))
			if !errors.Is(err, sketch.ErrInvalidConfig) {
				t.Errorf("New(%v, %d, WithEngine(Buckets)) = %v, want a *sketch.ConfigError", c.lim, c.burst, err)
			}
		}
	}
}

// limit's documented defaults: WithMaxDebt "default 2 x burst capped at
// 2^24"; PeriodFactor "is K in the default rotation Period, K x MaxDebt /
// (rate x (Generations-1))"; WithGenerations "at most MaxGenerations".
func TestAudit3DocsLimitDefaults(t *testing.T) {
	for _, c := range []struct {
		burst int
		want  float64
	}{{20, 40}, {1 << 23, 1 << 24}, {1<<23 + 1, 1 << 24}, {1 << 24, 1 << 24}} {
		l, err := limit.New(10, c.burst)
		if err != nil {
			t.Fatalf("New(10, %d): %v", c.burst, err)
		}
		if got := l.MaxDebt(); got != c.want {
			t.Errorf("New(10, %d).MaxDebt() = %v, want %v", c.burst, got, c.want)
		}
	}
	for _, g := range []uint32{2, 3, 5} {
		l, err := limit.New(10, 20, limit.WithGenerations(g))
		if err != nil {
			t.Fatal(err)
		}
		want := time.Duration(float64(limit.PeriodFactor) * 40 / (10 * float64(g-1)) * float64(time.Second))
		if got := l.Period(); got != want {
			t.Errorf("Generations %d: Period() = %v, want PeriodFactor x MaxDebt/(rate x (G-1)) = %v", g, got, want)
		}
	}
	if _, err := limit.New(10, 20, limit.WithGenerations(limit.MaxGenerations)); err != nil {
		t.Errorf("WithGenerations(MaxGenerations): %v", err)
	}
	if _, err := limit.New(10, 20, limit.WithGenerations(limit.MaxGenerations+1)); !errors.Is(err, sketch.ErrInvalidConfig) {
		t.Errorf("WithGenerations(MaxGenerations+1) = %v, want a *sketch.ConfigError", err)
	}
}

// limit's Allow: "It does not allocate", with no exception for
// Generations (the rotator: "The hot methods do not allocate"; the
// MaxGenerations doc's "past 4 the rotator allocates per call" is what
// docs/migrating.md says was fixed).
func TestAudit3DocsLimitAllowNoAllocAtMaxGenerations(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	l := limit.MustNew(10, 20, limit.WithClock(clk), limit.WithGenerations(limit.MaxGenerations))
	keys := make([]string, 256)
	for i := range keys {
		keys[i] = fmt.Sprint("k", i)
	}
	i := 0
	if a := testing.AllocsPerRun(500, func() { l.Allow(keys[i%len(keys)]); i++ }); a != 0 {
		t.Errorf("Allow with %d generations allocates %v per call", limit.MaxGenerations, a)
	}
}

// limit's package doc, "Tiers": New(10, 20, WithMaxDebt(80)); free :=
// Tier("free", 2.5, 20) "// 20 requests of 400 ms: 8 s of debt"; paid :=
// Tier("paid", 10, 20).
func TestAudit3DocsLimitTierExample(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	l, err := limit.New(10, 20, limit.WithMaxDebt(80), limit.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	free, err := l.Tier("free", 2.5, 20)
	if err != nil {
		t.Fatal(err)
	}
	paid, err := l.Tier("paid", 10, 20)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for range 25 {
		if free.Allow("key") {
			n++
		}
	}
	if n != 20 {
		t.Errorf("free tier admitted %d at once, want its burst of 20", n)
	}
	if d := paid.Peek("key"); d.ResetAfter != 8*time.Second || d.Allowed {
		t.Errorf("paid view after the free burst: ResetAfter %v Allowed %v, want 8s of debt and a denial", d.ResetAfter, d.Allowed)
	}
}

// The zero values' panics, quoted in the docs: "limit: zero Limiter; use
// New", "limit: zero Multi; use NewMulti", "meter: zero Rate; use
// NewRate" (and Inflight, Novelty), "httplimit: zero Middleware; use New";
// n <= 0: "limit: AllowN: n must be > 0; got 0".
func TestAudit3DocsZeroValuePanics(t *testing.T) {
	var zl limit.Limiter
	var zm limit.Multi
	var zr meter.Rate
	var zi meter.Inflight
	var zn meter.Novelty
	var zw httplimit.Middleware
	l := limit.MustNew(10, 20)
	for _, c := range []struct {
		name, want string
		f          func()
	}{
		{"zero Limiter", "limit: zero Limiter; use New", func() { zl.Allow("k") }},
		{"zero Multi", "limit: zero Multi; use NewMulti", func() { zm.Allow("k") }},
		{"zero Rate", "meter: zero Rate; use NewRate", func() { zr.Observe("k") }},
		{"zero Inflight", "meter: zero Inflight; use NewInflight", func() { zi.Acquire("k") }},
		{"zero Novelty", "meter: zero Novelty; use NewNovelty", func() { zn.Seen("k") }},
		{"zero Middleware", "httplimit: zero Middleware; use New", func() {
			zw.Allow(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
		}},
		{"AllowN n=0", "limit: AllowN: n must be > 0; got 0", func() { l.AllowN(l.Now(), "k", 0) }},
	} {
		if got := audit3Panic(c.f); got != c.want {
			t.Errorf("%s: panic %q, the doc quotes %q", c.name, got, c.want)
		}
	}
	// meter: "the panics on bad input start with "meter: "".
	r, _ := meter.NewRate(time.Second)
	if got := audit3Panic(func() { r.ObserveAt(time.Now(), "k", math.Inf(1)) }); !strings.HasPrefix(got, "meter: ") {
		t.Errorf("ObserveAt(+Inf) panic %q, want the prefix \"meter: \"", got)
	}
}
