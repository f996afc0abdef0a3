package limit_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testpanic"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit125ZeroValuesClearPanic: the zero Limiter, Multi and Tier panic
// with "limit: zero X" on their decision methods (never admit silently).
func TestAudit125ZeroValuesClearPanic(t *testing.T) {
	var l limit.Limiter
	var m limit.Multi
	var tr limit.Tier
	now := time.Unix(0, 0)
	for _, c := range []struct {
		name, want string
		f          func()
	}{
		{"Limiter.Allow", "limit: zero Limiter", func() { l.Allow("k") }},
		{"Limiter.AllowN", "limit: zero Limiter", func() { l.AllowN(now, "k", 1) }},
		{"Limiter.ReserveN", "limit: zero Limiter", func() { l.ReserveN(now, "k", 1) }},
		{"Limiter.Tokens", "limit: zero Limiter", func() { l.Tokens("k") }},
		{"Limiter.SetLimit", "limit: zero Limiter", func() { _ = l.SetLimit(1) }},
		{"Limiter.SetBurst", "limit: zero Limiter", func() { _ = l.SetBurst(1) }},
		{"Limiter.Tier", "limit: zero Limiter", func() { _, _ = l.Tier("t", 1, 1) }},
		{"Multi.Allow", "limit: zero Multi", func() { m.Allow("k") }},
		{"Multi.DecideKeys", "limit: zero Multi", func() { m.DecideKeys(now, 1, "k") }},
		{"Tier.Allow", "limit: zero Tier", func() { tr.Allow("k") }},
	} {
		if got := testpanic.Message(c.f); !strings.HasPrefix(got, c.want) {
			t.Errorf("%s: panic %q, want one starting %q", c.name, got, c.want)
		}
	}
}

// TestAudit125BadArgumentsTypedAndNoStateChange: bad constructor arguments
// and options are *sketch.ConfigError (errors.Is ErrInvalidConfig) prefixed
// "limit: "; n <= 0 panics "limit:" in every decision form; a refused
// SetLimit, SetBurst or Tier leaves the limiter and the key's tokens as they
// were.
func TestAudit125BadArgumentsTypedAndNoStateChange(t *testing.T) {
	for _, c := range []struct {
		name  string
		lim   limit.Limit
		burst int
		opts  []limit.Option
	}{
		{"limit NaN", limit.Limit(math.NaN()), 1, nil},
		{"limit -Inf", limit.Limit(math.Inf(-1)), 1, nil},
		{"limit -0", limit.Limit(math.Copysign(0, -1)), 1, nil},
		{"limit 1e308", 1e308, 1, nil},
		{"limit subnormal", 5e-324, 1, nil},
		{"burst 0", 1, 0, nil},
		{"burst MinInt64", 1, math.MinInt64, nil},
		{"burst MaxInt64", 1, math.MaxInt64, nil},
		{"nil option", 1, 1, []limit.Option{nil}},
		{"MaxDebt NaN", 1, 1, []limit.Option{limit.WithMaxDebt(math.NaN())}},
		{"RejectCost -1", 1, 1, []limit.Option{limit.WithRejectCost(-1)}},
		{"Capacity deny NaN", 1, 1, []limit.Option{limit.WithCapacity(10, math.NaN())}},
		{"Capacity and Size", 1, 1, []limit.Option{limit.WithCapacity(10, 0.01), limit.WithSize(2, 16)}},
		{"Buckets and Size", 1, 1, []limit.Option{limit.WithEngine(limit.Buckets), limit.WithSize(2, 16)}},
		{"Engine 99", 1, 1, []limit.Option{limit.WithEngine(99)}},
		{"Generations 1", 1, 1, []limit.Option{limit.WithGenerations(1)}},
		{"MaxBytes -1", 1, 1, []limit.Option{limit.WithMaxBytes(-1)}},
	} {
		l, err := limit.New(c.lim, c.burst, c.opts...)
		var ce *sketch.ConfigError
		if l != nil || !errors.As(err, &ce) || !errors.Is(err, sketch.ErrInvalidConfig) || !strings.HasPrefix(fmt.Sprint(err), "limit: ") {
			t.Errorf("%s: New = %v, %v; want nil and a *sketch.ConfigError prefixed \"limit: \"", c.name, l, err)
		}
	}

	clk := sketchtest.NewFakeClock()
	l, err := limit.New(10, 5, limit.WithSize(2, 16), limit.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	m, err := limit.NewMulti(l)
	if err != nil {
		t.Fatal(err)
	}
	tier, err := l.Tier("tier", 5, 2)
	if err != nil {
		t.Fatal(err)
	}
	now := clk.Now()
	l.AllowN(now, "k", 2)
	tokens := l.Tokens("k")
	for _, n := range []int{0, -1, math.MinInt64} {
		for _, c := range []struct {
			name string
			f    func()
		}{
			{"AllowN", func() { l.AllowN(now, "k", n) }},
			{"DecideN", func() { l.DecideN(now, "k", n) }},
			{"PeekN", func() { l.PeekN(now, "k", n) }},
			{"ReserveN", func() { l.ReserveN(now, "k", n) }},
			{"WaitN", func() { _ = l.WaitN(context.Background(), "k", n) }},
			{"DecideContext", func() { _, _ = l.DecideContext(context.Background(), "k", n) }},
			{"Multi.DecideKeys", func() { m.DecideKeys(now, n, "k") }},
			{"Tier.AllowN", func() { tier.AllowN(now, "k", n) }},
			{"Tier.ReserveN", func() { tier.ReserveN(now, "k", n) }},
			{"Tier.WaitN", func() { _ = tier.WaitN(context.Background(), "k", n) }},
		} {
			if got := testpanic.Message(c.f); !strings.HasPrefix(got, "limit:") {
				t.Errorf("%s(n=%d): panic %q, want one starting \"limit:\"", c.name, n, got)
			}
		}
	}
	for _, v := range []limit.Limit{limit.Limit(math.NaN()), -1, 0, limit.Limit(math.Inf(1)), 1e23, 0.001} {
		if err := l.SetLimit(v); !errors.Is(err, sketch.ErrInvalidConfig) {
			t.Errorf("SetLimit(%v) = %v, want an error matching ErrInvalidConfig", v, err)
		}
		if _, err := l.Tier("t", v, 1); !errors.Is(err, sketch.ErrInvalidConfig) {
			t.Errorf("Tier(%v) = %v, want an error matching ErrInvalidConfig", v, err)
		}
	}
	for _, b := range []int{-1, 0, 1<<24 + 1, math.MaxInt64, 100} {
		if err := l.SetBurst(b); !errors.Is(err, sketch.ErrInvalidConfig) {
			t.Errorf("SetBurst(%d) = %v, want an error matching ErrInvalidConfig", b, err)
		}
	}
	if l.Limit() != 10 || l.Burst() != 5 || l.Tokens("k") != tokens {
		t.Errorf("after refused changes: Limit %v Burst %d Tokens %v, want 10 5 %v", l.Limit(), l.Burst(), l.Tokens("k"), tokens)
	}
	// n above the burst is a documented Never, not a panic, and charges nothing.
	if d := l.DecideN(now, "k", math.MaxInt64); d.Allowed || !d.Never {
		t.Errorf("DecideN(MaxInt64) = %+v, want a denial with Never", d)
	}
	if got := l.Tokens("k"); got != tokens {
		t.Errorf("after DecideN(MaxInt64): Tokens %v, want %v", got, tokens)
	}
	if got := testpanic.Message(func() { l.Capacity(math.NaN()) }); !strings.HasPrefix(got, "limit:") {
		t.Errorf("Capacity(NaN): panic %q, want one starting \"limit:\"", got)
	}
	if _, err := limit.NewMulti(nil); !errors.Is(err, sketch.ErrInvalidConfig) {
		t.Errorf("NewMulti(nil) = %v, want ErrInvalidConfig", err)
	}
	if _, err := limit.ParseLimit("NaN/s"); !errors.Is(err, sketch.ErrInvalidConfig) {
		t.Errorf("ParseLimit(NaN/s) = %v, want ErrInvalidConfig", err)
	}
}
