package limit_test

import (
	"errors"
	"math"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"github.com/lfgrudge/grudge/sketch"
)

func a43panic(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			switch v := r.(type) {
			case string:
				msg = v
			case error:
				msg = v.Error()
			default:
				msg = "non-string panic"
			}
		}
	}()
	f()
	return ""
}

func a43mib(b int) float64 { return float64(b) / (1 << 20) }

// README.md: "Its default memory (6.1 MiB) holds a million clients";
// docs/readings.md: "the Buckets engine (99,929 lines, 6.10 MiB)";
// docs/capacity.md: "`Sizes().Cells` 6,395,520 bytes, one of its lines
// alignment slack"; limit/doc.go: default MaxDebt 2 x burst; Buckets
// "does not rotate (Period is 0)".
func TestAudit43DefaultLimiterFacts(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the docs' figures are amd64's: arm64 pads rows to 128-byte lines")
	}
	l := limit.MustNew(10, 20)
	if l.Engine() != limit.Buckets {
		t.Fatalf("limit.New(10, 20) engine %v, docs say Buckets", l.Engine())
	}
	s := l.Sizes()
	if s.Cells != 6_395_520 {
		t.Errorf("Sizes().Cells = %d, docs/capacity.md says 6,395,520", s.Cells)
	}
	if lines := s.Cells/64 - 1; lines != 99_929 {
		t.Errorf("lines = %d, docs say 99,929", lines)
	}
	if got := math.Round(a43mib(s.Total)*100) / 100; got != 6.10 {
		t.Errorf("Sizes().Total = %d B = %.4f MiB, docs say 6.10 MiB", s.Total, a43mib(s.Total))
	}
	if l.MaxDebt() != 40 {
		t.Errorf("MaxDebt = %v, doc says 2 x burst = 40", l.MaxDebt())
	}
	if l.Period() != 0 {
		t.Errorf("Period = %v on Buckets, doc says 0", l.Period())
	}
	if !l.Exact() {
		t.Errorf("Exact() false on Buckets, doc says always exact")
	}
	if st := l.Stats(); st.Bytes != s.Total || st.Engine != limit.Buckets || st.Rotations != 0 {
		t.Errorf("Stats = %+v, want Bytes = Sizes().Total = %d, Engine Buckets", st, s.Total)
	}
	// limit/doc.go: "Capacity(0.0003) reads lower, as it keeps Suggest's margin"
	if c := l.Capacity(0.0003); c >= 1_000_000 || c <= 0 {
		t.Errorf("Capacity(0.0003) = %d, doc says it reads lower than a million", c)
	}
}

// limit-countmin defaults: docs/readings.md "L=4, M=100k, 2 generations,
// Period derived (16 x MaxDebt/rate)"; docs/capacity.md "6.15 MiB by
// Sizes().Total" (6.14 until stop 63 counted the decay tables again:
// audit 124), "6,400,384 bytes of cells".
func TestAudit43CountMinDefaults(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the docs' figures are amd64's: arm64 pads rows to 128-byte lines")
	}
	l := limit.MustNew(10, 20, limit.WithEngine(limit.CountMin))
	s := l.Sizes()
	if s.Cells != 6_400_384 {
		t.Errorf("count-min Sizes().Cells = %d, docs/capacity.md says 6,400,384", s.Cells)
	}
	if got := math.Round(a43mib(s.Total)*100) / 100; got != 6.15 {
		t.Errorf("count-min Sizes().Total %.4f MiB, docs say 6.15", a43mib(s.Total))
	}
	// (G-1) x Period x rate >= MaxDebt: min Period 40/10 = 4 s; x PeriodFactor 16 = 64 s.
	if l.Period() != 64*time.Second || limit.PeriodFactor != 16 {
		t.Errorf("count-min Period %v, docs: 16 x MaxDebt/rate = 64s", l.Period())
	}
	if !l.Exact() {
		t.Errorf("count-min 10/20 not exact")
	}
}

// README.md's sizing table (limit.Suggest columns).
func TestAudit43ReadmeSuggestTable(t *testing.T) {
	rows := []struct {
		keys         int
		deny         float64
		bMiB, cmMiB  float64
		bPrec, cPrec float64
	}{
		{100_000, 0.01, 0.49, 14.6, 100, 10},
		{1_000_000, 0.01, 4.9, 146, 10, 1},
		{1_000_000, 0.001, 5.1, 223, 10, 1},
		{10_000_000, 0.01, 49, 1.4 * 1024, 1, 0},
	}
	for _, r := range rows {
		sz, err := limit.Suggest(r.keys, r.deny)
		if err != nil {
			t.Fatalf("Suggest(%d, %v): %v", r.keys, r.deny, err)
		}
		b := math.Round(a43mib(sz.Buckets.Bytes)*r.bPrec) / r.bPrec
		if b != r.bMiB {
			t.Errorf("Suggest(%d, %v).Buckets = %.4f MiB, README says %v", r.keys, r.deny, a43mib(sz.Buckets.Bytes), r.bMiB)
		}
		cm := a43mib(sz.CountMin.Bytes)
		if r.cPrec == 0 {
			if g := math.Round(cm/1024*10) / 10; g != 1.4 {
				t.Errorf("Suggest(%d, %v).CountMin = %.4f GiB, README says 1.4 GiB", r.keys, r.deny, cm/1024)
			}
		} else if g := math.Round(cm*r.cPrec) / r.cPrec; g != r.cmMiB {
			t.Errorf("Suggest(%d, %v).CountMin = %.4f MiB, README says %v", r.keys, r.deny, cm, r.cmMiB)
		}
		if sz.CountMin.Generations != 2 {
			t.Errorf("CountMin.Generations = %d, README: 2 generations", sz.CountMin.Generations)
		}
		// README: "about 5 bytes per key at its limit"
		if bpk := float64(sz.Buckets.Bytes) / float64(r.keys); bpk < 4.5 || bpk > 5.5 {
			t.Errorf("Buckets bytes per key %.2f, README says about 5", bpk)
		}
	}
}

// limit/doc.go, "Engines": the examples of which limiters Buckets holds.
func TestAudit43EngineExamples(t *testing.T) {
	cases := []struct {
		r    limit.Limit
		b    int
		want limit.Engine
	}{
		{10, 20, limit.Buckets},
		{1000, 1000, limit.Buckets},
		{1, 30, limit.Buckets},
		{18387, 1, limit.CountMin},
		{8e6, 30000, limit.CountMin},
		// "Every(d) for d a whole number of ms with burst <= 30.7 s / d"
		{limit.Every(100 * time.Millisecond), 307, limit.Buckets},
		{limit.Every(100 * time.Millisecond), 308, limit.CountMin},
		{limit.Every(time.Second), 30, limit.Buckets},
		{limit.Every(time.Second), 31, limit.CountMin},
		{limit.Every(10 * time.Millisecond), 3070, limit.Buckets},
	}
	for _, c := range cases {
		l, err := limit.New(c.r, c.b)
		if err != nil {
			t.Fatalf("New(%v, %d): %v", c.r, c.b, err)
		}
		if l.Engine() != c.want {
			t.Errorf("New(%v, %d) engine %v, doc says %v", c.r, c.b, l.Engine(), c.want)
		}
	}
	// "WithEngine(Buckets) where the Buckets engine would not be exact" is an error
	for _, c := range []struct {
		r limit.Limit
		b int
	}{{18387, 1}, {8e6, 30000}} {
		_, err := limit.New(c.r, c.b, limit.WithEngine(limit.Buckets))
		if !errors.Is(err, sketch.ErrInvalidConfig) {
			t.Errorf("New(%v, %d, WithEngine(Buckets)) err = %v, doc: refused", c.r, c.b, err)
		}
	}
	// "WithSize, WithGenerations, WithPeriod and WithConservativeUpdate(true) select CountMin"
	for i, o := range []limit.Option{limit.WithSize(4, 1000), limit.WithGenerations(3), limit.WithPeriod(time.Hour), limit.WithConservativeUpdate(true)} {
		l, err := limit.New(10, 20, o)
		if err != nil {
			t.Fatalf("option %d: %v", i, err)
		}
		if l.Engine() != limit.CountMin {
			t.Errorf("option %d selected %v, doc says CountMin", i, l.Engine())
		}
		if _, err := limit.New(10, 20, o, limit.WithEngine(limit.Buckets)); !errors.Is(err, sketch.ErrInvalidConfig) {
			t.Errorf("option %d with WithEngine(Buckets): err %v, doc: an error", i, err)
		}
	}
}

// limit/doc.go, "Exactness": "(with the default MaxDebt of 2 x burst:
// bursts up to 2330 at 1000/h, 139 at 1/minute, 83886 at 10/s)".
func TestAudit43CountMinExactBurstBounds(t *testing.T) {
	cases := []struct {
		r    limit.Limit
		name string
		max  int
	}{
		{limit.Every(time.Hour / 1000), "1000/h", 2330},
		{limit.Every(time.Minute), "1/minute", 139},
		{10, "10/s", 83886},
	}
	for _, c := range cases {
		in := limit.MustNew(c.r, c.max, limit.WithEngine(limit.CountMin))
		out := limit.MustNew(c.r, c.max+1, limit.WithEngine(limit.CountMin))
		if !in.Exact() || out.Exact() {
			t.Errorf("%s: Exact at %d = %v, at %d = %v; doc: exact up to %d", c.name, c.max, in.Exact(), c.max+1, out.Exact(), c.max)
		}
	}
	// "Every(3*time.Second) is exactly 1/3 per second"
	if l := limit.MustNew(limit.Every(3*time.Second), 10, limit.WithEngine(limit.CountMin)); !l.Exact() {
		t.Errorf("Every(3s) count-min not exact")
	}
}

// limit/doc.go, "Tiers": "l, _ := limit.New(10, 20, limit.WithMaxDebt(80));
// free, _ := l.Tier("free", 2.5, 20) // 20 requests of 400 ms: 8 s of debt".
func TestAudit43TierDocExample(t *testing.T) {
	c := limittest.NewFakeClock()
	c.Set(1_000_000)
	l, err := limit.New(10, 20, limit.WithMaxDebt(80), limit.WithClock(c))
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
	var d limit.Decision
	for i := 0; i < 20; i++ {
		d = free.Decide("k")
		if !d.Allowed {
			t.Fatalf("free request %d denied", i)
		}
	}
	if d.ResetAfter != 8*time.Second {
		t.Errorf("after 20 free requests ResetAfter = %v, doc says 8 s of debt", d.ResetAfter)
	}
	if d.Policy != "free" || d.Limit != 2.5 || d.Burst != 20 {
		t.Errorf("tier Decision %+v: doc says it carries its Limit, Burst and name", d)
	}
	if d := free.Decide("k"); d.Allowed || d.RetryAfter != 400*time.Millisecond {
		t.Errorf("21st free: %+v, want denied, RetryAfter 400ms", d)
	}
	// 8 s of debt is 80 tokens of New's rate: paid (10/s, burst 20) is denied too
	if d := paid.Decide("k"); d.Allowed {
		t.Errorf("paid admitted with 8 s of shared debt (paid burst spans 2 s)")
	}
	// without WithMaxDebt(80) the free tier needs it: a *MaxDebtError
	l2 := limit.MustNew(10, 20)
	_, err = l2.Tier("free", 2.5, 20)
	var mde *limit.MaxDebtError
	if !errors.As(err, &mde) {
		t.Errorf("Tier(2.5, 20) on MaxDebt 40: err %v, doc: *MaxDebtError", err)
	}
}

// limit/doc.go, "Input": panics and their texts.
func TestAudit43PanicTexts(t *testing.T) {
	l := limit.MustNew(10, 20)
	if m := a43panic(func() { l.AllowN(time.Now(), "k", 0) }); m != "limit: AllowN: n must be > 0; got 0" {
		t.Errorf("AllowN(0) panic %q, doc quotes %q", m, "limit: AllowN: n must be > 0; got 0")
	}
	var z limit.Limiter
	if m := a43panic(func() { z.Allow("k") }); m != "limit: zero Limiter; use New" {
		t.Errorf("zero Limiter panic %q, doc quotes %q", m, "limit: zero Limiter; use New")
	}
	var zm limit.Multi
	if m := a43panic(func() { zm.Allow("k") }); !strings.HasPrefix(m, "limit: zero Multi") {
		t.Errorf("zero Multi panic %q", m)
	}
	for _, name := range []string{"DecideN", "PeekN"} {
		var m string
		if name == "DecideN" {
			m = a43panic(func() { l.DecideN(time.Now(), "k", -1) })
		} else {
			m = a43panic(func() { l.PeekN(time.Now(), "k", 0) })
		}
		if !strings.Contains(m, name) {
			t.Errorf("%s(n<=0) panic %q does not name %s (docs/migrating.md)", name, m, name)
		}
	}
}

// limit/doc.go "Input": n > burst is never admitted and its Decision says Never;
// New's refusals are *sketch.ConfigError.
func TestAudit43InputRules(t *testing.T) {
	l := limit.MustNew(10, 20)
	d := l.DecideN(time.Now(), "k", 21)
	if d.Allowed || !d.Never || d.RetryAfter != limit.InfDuration {
		t.Errorf("n > burst: %+v, doc: never admitted, Never, RetryAfter InfDuration", d)
	}
	bad := []struct {
		r limit.Limit
		b int
		o []limit.Option
	}{
		{limit.Limit(math.NaN()), 1, nil}, {0, 1, nil}, {-1, 1, nil}, {1e23, 1, nil}, {10, 0, nil},
		{10, 1, []limit.Option{nil}},
		{10, 20, []limit.Option{limit.WithCapacity(1000, 0.01), limit.WithSize(4, 1000)}},
		{10, 20, []limit.Option{limit.WithGenerations(limit.MaxGenerations + 1)}},
	}
	for i, c := range bad {
		_, err := limit.New(c.r, c.b, c.o...)
		var ce *sketch.ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, sketch.ErrInvalidConfig) {
			t.Errorf("case %d: New err %v, doc: *sketch.ConfigError", i, err)
		}
	}
	_, err := limit.New(10, 1, nil)
	var ce *sketch.ConfigError
	if errors.As(err, &ce) && ce.Field != "Option" {
		t.Errorf("nil Option names field %q, migrating.md says \"Option\"", ce.Field)
	}
}

// limit.ParseLimit and the README / doc forms.
func TestAudit43ParseLimitForms(t *testing.T) {
	cases := map[string]limit.Limit{
		"100/s":    100,
		"1000/h":   limit.Limit(1000.0 / 3600),
		"5/m":      limit.Limit(5.0 / 60),
		"10/250ms": 40,
		"1000-H":   limit.Limit(1000.0 / 3600),
		"inf":      limit.Inf,
		"100":      100,
		"0.5/s":    0.5,
	}
	for s, want := range cases {
		got, err := limit.ParseLimit(s)
		if err != nil {
			t.Errorf("ParseLimit(%q): %v", s, err)
			continue
		}
		if math.Abs(float64(got-want)) > 1e-12*math.Max(1, float64(want)) {
			t.Errorf("ParseLimit(%q) = %v, want %v", s, got, want)
		}
		txt, err := got.MarshalText()
		if err != nil {
			t.Errorf("MarshalText(%v): %v", got, err)
			continue
		}
		var back limit.Limit
		if err := back.UnmarshalText(txt); err != nil || math.Float64bits(float64(back)) != math.Float64bits(float64(got)) {
			t.Errorf("round trip %q -> %q -> %v (err %v), doc: bit for bit", s, txt, back, err)
		}
	}
	if g, _ := limit.ParseLimit("1/250ms"); g != limit.Every(250*time.Millisecond) {
		t.Errorf(`ParseLimit("1/250ms") = %v, doc: exactly Every(250ms) = %v`, g, limit.Every(250*time.Millisecond))
	}
	_, err := limit.ParseLimit("nope")
	var ce *sketch.ConfigError
	if !errors.As(err, &ce) || ce.Field != "Limit" || !strings.HasPrefix(err.Error(), "limit: ") {
		t.Errorf("ParseLimit(nope) err %v, doc: ConfigError field Limit prefixed limit: ", err)
	}
}

// limit/doc.go "Exactness": "a full burst is admitted at once from an empty
// key, and RetryAfter predicts the limiter's own next decision to the
// millisecond: a retry at t+RetryAfter is admitted and one 1 ms earlier is not."
func TestAudit43RetryAfterPredicts(t *testing.T) {
	for _, e := range []limit.Engine{limit.Buckets, limit.CountMin} {
		c := limittest.NewFakeClock()
		c.Set(5_000_000)
		l := limit.MustNew(10, 20, limit.WithEngine(e), limit.WithClock(c))
		t0 := c.Now()
		for i := 0; i < 20; i++ {
			if !l.AllowN(t0, "k", 1) {
				t.Fatalf("%v: burst request %d denied", e, i)
			}
		}
		d := l.DecideN(t0, "k", 3)
		if d.Allowed || d.RetryAfter != 300*time.Millisecond || d.ResetAfter != 2*time.Second || d.NextAfter != 100*time.Millisecond {
			t.Errorf("%v: Decision %+v; want RetryAfter 300ms, ResetAfter 2s, NextAfter 100ms", e, d)
		}
		if l.PeekN(t0.Add(d.RetryAfter-time.Millisecond), "k", 3).Allowed {
			t.Errorf("%v: admitted 1 ms before RetryAfter", e)
		}
		c.Set(5_000_000 + d.RetryAfter.Milliseconds())
		if !l.AllowN(c.Now(), "k", 3) {
			t.Errorf("%v: denied at RetryAfter", e)
		}
	}
}

// docs/snapshots.md table: "snapshot size | 6,395,644 B (99,929 lines) |
// 6,400,308 B (2 x 4 x 100,000 cells)".
func TestAudit43SnapshotSizes(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the docs' figures are amd64's: arm64 pads rows to 128-byte lines")
	}
	if n := limit.MustNew(10, 20).SnapshotSize(); n != 6_395_644 {
		t.Errorf("Buckets SnapshotSize = %d, docs/snapshots.md says 6,395,644", n)
	}
	if n := limit.MustNew(10, 20, limit.WithEngine(limit.CountMin)).SnapshotSize(); n != 6_400_308 {
		t.Errorf("CountMin SnapshotSize = %d, docs/snapshots.md says 6,400,308", n)
	}
}

// limit/doc.go, "Engines": Buckets holds "Every(d) for d a whole number of
// ms with burst <= 30.7 s / d" (and New(p/q) rates that are short fractions
// with MaxDebt/limit <= 61.4 s). A sweep of d.
func TestAudit43EveryBurstSweep(t *testing.T) {
	var bad []string
	for d := 1; d <= 30700; d += 1 + d/testsize.Sample(20, 20, 6) { // a coarser sweep under an emulator
		b := 30700 / d
		if b < 1 {
			break
		}
		l, err := limit.New(limit.Every(time.Duration(d)*time.Millisecond), b, limit.WithCapacity(100, 0.01))
		if err != nil {
			t.Fatalf("Every(%d ms), burst %d: %v", d, b, err)
		}
		if l.Engine() != limit.Buckets || !l.Exact() {
			bad = append(bad, strconv.Itoa(d)+"ms/"+strconv.Itoa(b)+":"+l.Engine().String())
		}
	}
	if len(bad) > 0 {
		t.Errorf("Every(d) with burst <= 30.7 s / d not on Buckets: %v", bad)
	}
}

// limit/doc.go, "Rotation and amnesty": "never amnestied when (G-1) x
// Period x rate >= MaxDebt ... New refuses a shorter Period"; "the default
// Period is PeriodFactor (16) times the minimum".
func TestAudit43PeriodMinimum(t *testing.T) {
	if _, err := limit.New(10, 20, limit.WithPeriod(3999*time.Millisecond)); !errors.Is(err, sketch.ErrInvalidConfig) {
		t.Errorf("Period 3.999 s (minimum 4 s) accepted: %v", err)
	}
	if _, err := limit.New(10, 20, limit.WithPeriod(4*time.Second)); err != nil {
		t.Errorf("Period 4 s refused: %v", err)
	}
	if _, err := limit.New(10, 20, limit.WithGenerations(3), limit.WithPeriod(2*time.Second)); err != nil {
		t.Errorf("G=3 Period 2 s refused: %v", err)
	}
	if _, err := limit.New(10, 20, limit.WithGenerations(3), limit.WithPeriod(1999*time.Millisecond)); !errors.Is(err, sketch.ErrInvalidConfig) {
		t.Errorf("G=3 Period 1.999 s accepted: %v", err)
	}
	if p := limit.MustNew(10, 20, limit.WithGenerations(3)).Period(); p != 32*time.Second {
		t.Errorf("G=3 default Period %v, want 16 x 2 s", p)
	}
}
