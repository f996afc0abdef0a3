package grudge_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
	"github.com/lfgrudge/grudge/internal/testpanic"
)

// TestAudit125FixedZeroGrudgeValuesRawNilPanic (audit 125; fixed at stop 63, the text below says what was wrong): the zero grudge.Sketch
// and grudge.Rotator ("The zero value is not usable: build one with New",
// sketch.go:9) crash with "runtime error: invalid memory address or nil
// pointer dereference" on every operation (and on Rotator.Rotations, while
// the zero Rotator's Close is a silent no-op). The team rule asks for a
// clear panic, and the module's other zero values do give one: limit.Limiter
// ("limit: zero Limiter; use New"), limit.Multi, limit.Tier, meter.Rate,
// meter.Inflight, meter.Novelty, httplimit.Middleware (docs/migrating.md row
// "never admit silently"). Expected: a panic starting "grudge: zero Sketch"
// / "grudge: zero Rotator". Observed: a runtime nil dereference.
// Fix: a nil check of s.s / rot.r in the methods of sketch.go and rotator.go
// (or a shared helper, as meter/rate.go:180 rot() does).
func TestAudit125FixedZeroGrudgeValuesRawNilPanic(t *testing.T) {
	var s grudge.Sketch
	var r grudge.Rotator
	key := []byte("k")
	for _, c := range []struct {
		name, want string
		f          func()
	}{
		{"Sketch.Update", "grudge: zero Sketch", func() { s.Update(key, 1) }},
		{"Sketch.Query", "grudge: zero Sketch", func() { s.Query(key) }},
		{"Sketch.TryUpdate", "grudge: zero Sketch", func() { s.TryUpdate(key, 1, 2) }},
		{"Rotator.Update", "grudge: zero Rotator", func() { r.Update(key, 1) }},
		{"Rotator.Query", "grudge: zero Rotator", func() { r.Query(key) }},
		{"Rotator.Rotations", "grudge: zero Rotator", func() { r.Rotations() }},
	} {
		if got := testpanic.Message(c.f); !strings.HasPrefix(got, c.want) {
			t.Errorf("zero %s: panic %q, want one starting %q", c.name, got, c.want)
		}
	}
}

// TestAudit125FixedTickerPeriodErrorStatesWrongRule (audit 125; fixed at stop 63, the text below says what was wrong): RotatorConfig.Period
// "with [a Ticker] is optional and unused (any value >= 0: the ticks alone
// rotate)". NewRotator with a Ticker and Period -1ns is refused (right), but
// the error reads "rotator: Period must be > 0; got -1ns", a rule that is
// false for this config (Period 0 with a Ticker is accepted): rotator.go:70
// maps only [0, 1ms) to periodWithTicker and lets a negative Period reach
// internal/core/rotator_config.go:69, whose message is the lazy rotator's.
// Expected: an error naming the rule that applies ("Period must be >= 0
// with a Ticker"). Fix: check cfg.Period < 0 with a Ticker in rotator.go
// before building the native config, with its own message.
func TestAudit125FixedTickerPeriodErrorStatesWrongRule(t *testing.T) {
	r, err := grudge.NewRotator(grudge.RotatorConfig{
		Sketch: grudge.Config{Hi: 10, CellsPerLevel: 16},
		Period: -1,
		Ticker: grudgetest.NewFakeTicker(),
	})
	if r != nil {
		r.Close()
		t.Fatal("NewRotator accepted Period -1ns with a Ticker")
	}
	if msg := fmt.Sprint(err); strings.Contains(msg, "> 0") || !strings.Contains(msg, ">= 0") {
		t.Errorf("Period -1ns with a Ticker: error %q; want one stating the Ticker rule (Period >= 0), not \"> 0\"", msg)
	}
}
