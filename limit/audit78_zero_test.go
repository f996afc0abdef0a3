package limit_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// The zero values panic rather than admit: "The zero Limiter and the zero
// Multi panic ("limit: zero Limiter; use New") rather than admit"
// (doc.go); "The zero Tier is not usable: its methods panic" (tier.go);
// the zero Multi's "methods panic with "limit: zero Multi; use
// NewMulti"" (multi.go). Every decision method of the less-travelled
// surface, with its message.
func TestAudit78ZeroValuesPanic(t *testing.T) {
	var l limit.Limiter
	var tr limit.Tier
	var m limit.Multi
	now := time.UnixMilli(a78Start)
	ctx := context.Background()
	for _, c := range []struct {
		name, want string
		f          func()
	}{
		{"Limiter.ReserveN", "zero Limiter", func() { l.ReserveN(now, "k", 1) }},
		{"Limiter.Reserve", "zero Limiter", func() { l.Reserve("k") }},
		{"Limiter.WaitN", "zero Limiter", func() { _ = l.WaitN(ctx, "k", 1) }},
		{"Limiter.Wait", "zero Limiter", func() { _ = l.Wait(ctx, "k") }},
		{"Limiter.PeekN", "zero Limiter", func() { l.PeekN(now, "k", 1) }},
		{"Limiter.Peek", "zero Limiter", func() { l.Peek("k") }},
		{"Limiter.TokensAt", "zero Limiter", func() { l.TokensAt(now, "k") }},
		{"Limiter.Stats", "zero Limiter", func() { l.Stats() }},
		{"Limiter.SetLimit", "zero Limiter", func() { _ = l.SetLimit(5) }},
		{"Limiter.SetBurst", "zero Limiter", func() { _ = l.SetBurst(5) }},
		{"Limiter.Tier", "zero Limiter", func() { _, _ = l.Tier("x", 5, 5) }},
		{"Tier.Allow", "zero Tier", func() { tr.Allow("k") }},
		{"Tier.ReserveN", "zero Tier", func() { tr.ReserveN(now, "k", 1) }},
		{"Tier.Reserve", "zero Tier", func() { tr.Reserve("k") }},
		{"Tier.WaitN", "zero Tier", func() { _ = tr.WaitN(ctx, "k", 1) }},
		{"Tier.PeekN", "zero Tier", func() { tr.PeekN(now, "k", 1) }},
		{"Tier.DecideN", "zero Tier", func() { tr.DecideN(now, "k", 1) }},
		{"Tier.TokensAt", "zero Tier", func() { tr.TokensAt(now, "k") }},
		{"Tier.MaxDebt", "zero Tier", func() { tr.MaxDebt() }},
		{"Multi.AllowN", "zero Multi", func() { m.AllowN(now, "k", 1) }},
		{"Multi.Allow", "zero Multi", func() { m.Allow("k") }},
		{"Multi.DecideKeys", "zero Multi", func() { m.DecideKeys(now, 1, "k") }},
		{"Multi.DecideContext", "zero Multi", func() { _, _ = m.DecideContext(ctx, "k", 1) }},
		{"Multi.Stats", "zero Multi", func() { m.Stats() }},
	} {
		if got := sketchtest.Panics(c.f); !strings.Contains(got, c.want) {
			t.Errorf("%s on the zero value: panic %q; want one naming %q", c.name, got, c.want)
		}
	}
}

// TestAudit78ZeroTierAccessorsDoc: tier.go (stop 48): "its decision
// methods and MaxDebt panic ("limit: zero Tier"); its plain accessors,
// Limit, Burst, Name, Exact, Policies and Limiter, return zero values".
func TestAudit78ZeroTierAccessorsDoc(t *testing.T) {
	var tr limit.Tier
	if tr.Limit() != 0 || tr.Burst() != 0 || tr.Name() != "" || tr.Exact() || tr.Policies() != nil || tr.Limiter() != nil {
		t.Fatalf("zero Tier accessors: %v %v %q %v %v %v; want zero values", tr.Limit(), tr.Burst(), tr.Name(), tr.Exact(), tr.Policies(), tr.Limiter())
	}
	if msg := sketchtest.Panics(func() { tr.MaxDebt() }); !strings.Contains(msg, "zero Tier") {
		t.Fatalf("zero Tier MaxDebt: panic %q; want \"limit: zero Tier\"", msg)
	}
}
