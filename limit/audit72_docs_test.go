package limit

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

const mib = 1 << 20

// README.md:47 "Its default memory (6.1 MiB)"; limit/doc.go:35 "the default 6.1 MiB".
func TestAudit72DefaultMemory(t *testing.T) {
	l := MustNew(10, 20)
	if l.Engine() != Buckets {
		t.Fatalf("README.md:49: limit.New(10, 20) on %v, want Buckets", l.Engine())
	}
	b := float64(l.Stats().Bytes) / mib
	if math.Abs(b-6.1) > 0.05 {
		t.Fatalf("README.md:47: default memory %.3f MiB, doc says 6.1 MiB", b)
	}
}

// README.md:54-59: the sizing table (Buckets and count-min columns).
func TestAudit72READMESizingTable(t *testing.T) {
	rows := []struct {
		keys      int
		deny      float64
		buckets   float64 // MiB
		countMin  float64 // MiB
		tolerance float64 // relative
	}{
		{100_000, 0.01, 0.49, 14.6, 0.03},
		{1_000_000, 0.01, 4.9, 146, 0.03},
		{1_000_000, 0.001, 5.1, 223, 0.03},
		{10_000_000, 0.01, 49, 1.4 * 1024, 0.05},
	}
	for _, r := range rows {
		s, err := Suggest(r.keys, r.deny)
		if err != nil {
			t.Fatal(err)
		}
		gb := float64(s.Buckets.Bytes) / mib
		gc := float64(s.CountMin.Bytes) / mib
		t.Logf("keys %d deny %g: buckets %.3f MiB, count-min %.2f MiB (L=%d M=%d G=%d)", r.keys, r.deny, gb, gc, s.CountMin.Levels, s.CountMin.Cells, s.CountMin.Generations)
		if math.Abs(gb-r.buckets)/r.buckets > r.tolerance {
			t.Errorf("README.md sizing table: Suggest(%d, %g).Buckets = %.3f MiB, table says %g MiB", r.keys, r.deny, gb, r.buckets)
		}
		if math.Abs(gc-r.countMin)/r.countMin > r.tolerance {
			t.Errorf("README.md sizing table: Suggest(%d, %g).CountMin = %.2f MiB, table says %g MiB", r.keys, r.deny, gc, r.countMin)
		}
	}
}

// limit/doc.go:44-52: which rates run on Buckets under Auto.
func TestAudit72EngineExamples(t *testing.T) {
	cases := []struct {
		name  string
		limit Limit
		burst int
		want  Engine
	}{
		{"New(10, 20)", 10, 20, Buckets},
		{"New(1000, 1000)", 1000, 1000, Buckets},
		{"New(1, 30)", 1, 30, Buckets},
		{"New(0.3, 5)", 0.3, 5, CountMin},
		{"New(7.3, 20)", 7.3, 20, CountMin},
		{"New(18387, 1)", 18387, 1, CountMin},
		{"New(8e6, 30000)", 8e6, 30000, CountMin},
		// Every(d) for d a whole number of ms with burst <= 30.7 s / d.
		{"Every(100ms) burst 307", Every(100 * time.Millisecond), 307, Buckets},
		{"Every(1s) burst 30", Every(time.Second), 30, Buckets},
		{"Every(1s) burst 31", Every(time.Second), 31, CountMin},
	}
	for _, c := range cases {
		l, err := New(c.limit, c.burst)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if l.Engine() != c.want {
			t.Errorf("limit/doc.go:44-52: %s runs on %v, doc says %v", c.name, l.Engine(), c.want)
		}
	}
	// New(0.3, 5): "MaxDebt must drain within 20.48 s, and its default
	// MaxDebt of 10 tokens, 33.3 s": a MaxDebt of 6 tokens (20 s) fits.
	l, err := New(0.3, 5, WithMaxDebt(6))
	if err != nil {
		t.Fatal(err)
	}
	if l.Engine() != Buckets {
		t.Errorf("limit/doc.go:46-48: New(0.3, 5, WithMaxDebt(6)) (20 s < 20.48 s) runs on %v, want Buckets", l.Engine())
	}
	l, err = New(0.3, 5, WithMaxDebt(6.2))
	if err != nil {
		t.Fatal(err)
	}
	if l.Engine() != CountMin {
		t.Errorf("limit/doc.go:46-48: New(0.3, 5, WithMaxDebt(6.2)) (20.67 s > 20.48 s) runs on %v, want CountMin", l.Engine())
	}
}

// limit/doc.go:92-94: the count-min is exact "with the default MaxDebt of
// 2 x burst: bursts up to 2330 at 1000/h, 139 at 1/minute, 83886 at 10/s".
func TestAudit72CountMinExactBursts(t *testing.T) {
	cases := []struct {
		name  string
		limit Limit
		max   int
	}{
		{"1000/h", Every(time.Hour / 1000), 2330},
		{"1/minute", Every(time.Minute), 139},
		{"10/s", 10, 83886},
	}
	for _, c := range cases {
		for _, b := range []int{c.max, c.max + 1} {
			l, err := New(c.limit, b, WithEngine(CountMin))
			if err != nil {
				t.Fatalf("%s burst %d: %v", c.name, b, err)
			}
			want := b == c.max
			if l.Exact() != want {
				t.Errorf("limit/doc.go:92-94: %s burst %d (count-min, MaxDebt %g): Exact() = %v, want %v", c.name, b, l.MaxDebt(), l.Exact(), want)
			}
		}
	}
}

// limit/doc.go:173: "the default Period is PeriodFactor (16) times the
// minimum", the minimum being MaxDebt / ((G-1) x rate).
func TestAudit72DefaultPeriod(t *testing.T) {
	if PeriodFactor != 16 {
		t.Fatalf("PeriodFactor = %d", PeriodFactor)
	}
	l := MustNew(10, 20, WithEngine(CountMin)) // MaxDebt 40: 4 s to drain, G = 2
	if got, want := l.Period(), 16*4*time.Second; got != want {
		t.Errorf("limit/doc.go:173: default Period %v, want 16 x 4 s = %v", got, want)
	}
	if MustNew(10, 20).Period() != 0 {
		t.Errorf("limit/doc.go:52: Buckets Period %v, want 0", MustNew(10, 20).Period())
	}
}

// limit/doc.go:189-191: WithMaxDebt(80); Tier("free", 2.5, 20): "20
// requests of 400 ms: 8 s of debt".
func TestAudit72TierSnippet(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	l, err := New(10, 20, WithMaxDebt(80), WithClock(clk))
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
	_ = paid
	for i := 0; i < 20; i++ {
		if !free.Allow("k") {
			t.Fatalf("free request %d denied", i)
		}
	}
	d := free.Peek("k")
	if d.Allowed {
		t.Fatalf("21st free request admitted")
	}
	if d.ResetAfter != 8*time.Second {
		t.Errorf("limit/doc.go:190: after 20 free requests ResetAfter = %v, doc says 8 s of debt", d.ResetAfter)
	}
	if !free.Exact() {
		t.Errorf("limit/doc.go:235: tier R/4 not exact")
	}
}

// limit/doc.go:304-319: ParseLimit's examples and the error texts.
func TestAudit72ParseLimitAndPanics(t *testing.T) {
	for s, want := range map[string]Limit{
		"100/s": 100, "1000/h": Limit(1000.0 / 3600), "5/m": Limit(5.0 / 60),
		"10/250ms": 40, "1000-H": Limit(1000.0 / 3600), "inf": Inf,
	} {
		got, err := ParseLimit(s)
		if err != nil {
			t.Errorf("ParseLimit(%q): %v", s, err)
			continue
		}
		if math.Abs(float64(got-want)) > 1e-12*float64(want) {
			t.Errorf("ParseLimit(%q) = %v, want %v", s, got, want)
		}
	}
	msg := func(f func()) (m string) {
		defer func() {
			if r := recover(); r != nil {
				m = "?"
				if s, ok := r.(string); ok {
					m = s
				} else if e, ok := r.(error); ok {
					m = e.Error()
				}
			}
		}()
		f()
		return ""
	}
	l := MustNew(10, 20)
	if m := msg(func() { l.AllowN(time.Now(), "k", 0) }); m != "limit: AllowN: n must be > 0; got 0" {
		t.Errorf("limit/doc.go:314: AllowN(n=0) panics %q", m)
	}
	var z Limiter
	if m := msg(func() { z.Allow("k") }); !strings.HasPrefix(m, "limit: zero Limiter; use New") {
		t.Errorf("limit/doc.go:316: zero Limiter panics %q", m)
	}
	var zm Multi
	if m := msg(func() { zm.Allow("k") }); !strings.Contains(m, "zero") {
		t.Errorf("limit/doc.go:316: zero Multi panics %q", m)
	}
	// Stop 47: tiny rates are an error, not a panic.
	for _, r := range []Limit{5e-324, 1e-307} {
		if m := msg(func() { _, _ = New(r, 1) }); m != "" {
			t.Errorf("migrating.md Stop 47: New(%g, 1) panicked %q", float64(r), m)
		}
	}
}

// limit/doc.go:309-319: New's errors, Never, WaitN's errors.
func TestAudit72ErrorsAndNever(t *testing.T) {
	bad := map[string]func() error{
		"NaN limit":        func() error { _, err := New(Limit(math.NaN()), 1); return err },
		"zero limit":       func() error { _, err := New(0, 1); return err },
		"negative limit":   func() error { _, err := New(-1, 1); return err },
		"burst 0":          func() error { _, err := New(10, 0); return err },
		"nil Option":       func() error { _, err := New(10, 1, nil); return err },
		"Buckets inexact":  func() error { _, err := New(0.3, 5, WithEngine(Buckets)); return err },
		"Buckets+WithSize": func() error { _, err := New(10, 20, WithEngine(Buckets), WithSize(2, 64)); return err },
		"Capacity+Size":    func() error { _, err := New(10, 20, WithCapacity(1000, 0.01), WithSize(2, 64)); return err },
	}
	for name, f := range bad {
		err := f()
		var ce *sketch.ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, sketch.ErrInvalidConfig) {
			t.Errorf("limit/doc.go:309-313: %s: %v (%T), want *sketch.ConfigError", name, err, err)
		}
	}
	clk := sketchtest.NewFakeClock()
	l := MustNew(10, 20, WithClock(clk))
	d := l.DecideN(clk.Now(), "k", 21)
	if d.Allowed || !d.Never || d.RetryAfter != InfDuration {
		t.Errorf("limit/doc.go:315: n > burst: %+v", d)
	}
	err := l.WaitN(context.Background(), "k", 21)
	var we *WaitError
	if !errors.As(err, &we) || !errors.Is(err, ErrAboveBurst) {
		t.Errorf("limit/doc.go:317: WaitN(21): %v", err)
	}
	if !errors.Is(ErrPastDeadline, context.DeadlineExceeded) {
		t.Errorf("limit/doc.go:319: ErrPastDeadline is not context.DeadlineExceeded")
	}
	// RetryAfter predicts the next decision to the millisecond.
	for i := 0; i < 20; i++ {
		l.Allow("r")
	}
	d = l.Peek("r")
	if d.Allowed || d.RetryAfter != 100*time.Millisecond {
		t.Fatalf("after the burst: %+v", d)
	}
	clk.Advance(d.RetryAfter - time.Millisecond)
	if l.Allow("r") {
		t.Errorf("limit/doc.go:105: admitted 1 ms before RetryAfter")
	}
	clk.Advance(time.Millisecond)
	if !l.Allow("r") {
		t.Errorf("limit/doc.go:105: denied at RetryAfter")
	}
}

// limit/doc.go:202-209: SetLimit keeps a key's debt as time.
func TestAudit72SetLimitKeepsDebtAsTime(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	l := MustNew(10, 20, WithClock(clk), WithMaxDebt(80))
	for i := 0; i < 20; i++ {
		l.Allow("k")
	}
	before := l.Peek("k").ResetAfter
	if err := l.SetLimit(5); err != nil {
		t.Fatal(err)
	}
	// A denied peek, so that ResetAfter counts only the debt (an admitted
	// one counts its own cost too).
	da := l.PeekN(clk.Now(), "k", 20)
	if da.Allowed {
		t.Fatalf("peek of 20 admitted: %+v", da)
	}
	after := da.ResetAfter
	if before != 2*time.Second || after != before {
		t.Errorf("limit/doc.go:205: ResetAfter %v before SetLimit(5), %v after; doc: drains in the same time", before, after)
	}
	if l.Limit() != 5 || l.MaxDebt() != 80 {
		t.Errorf("limit/doc.go:208-209: Limit %v MaxDebt %v", l.Limit(), l.MaxDebt())
	}
}
