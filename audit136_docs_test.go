package grudge_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	grudge "github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
)

// TestAudit136LazyPeriodRoundedUp: doc.go (61ff768): "a lazy Rotator
// ... its Period is at least 1 ms, rounded up to whole ms";
// docs/migrating.md: "Period must be at least 1 ms and is rounded up to
// whole ms (2.9 ms is 3 ms)" and "with a grudgetest.FakeClock,
// Advance(3 x Period) rotates three times". Checked on a FakeClock: a
// 2.9 ms Period does not rotate at 2.9 ms, rotates once at 3 ms, three
// times at 9 ms (not 8.7); 1 ms is accepted and rotates every 1 ms;
// 999µs is refused (ErrInvalidConfig).
func TestAudit136LazyPeriodRoundedUp(t *testing.T) {
	mk := func(p time.Duration) (*grudge.Rotator, *grudgetest.FakeClock) {
		clk := grudgetest.NewFakeClock()
		r, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: grudge.Config{Hi: 10, Clock: clk}, Period: p})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r, clk
	}
	const us = time.Microsecond
	r, clk := mk(2900 * us)
	clk.Advance(2900 * us)
	if n := r.Rotations(); n != 0 {
		t.Errorf("2.9ms Period after 2.9 ms: %d rotations, want 0 (rounded up to 3 ms)", n)
	}
	clk.Advance(100 * us)
	if n := r.Rotations(); n != 1 {
		t.Errorf("2.9ms Period after 3 ms: %d rotations, want 1", n)
	}
	clk.Advance(5700 * us) // 8.7 ms in all
	if n := r.Rotations(); n != 2 {
		t.Errorf("2.9ms Period after 8.7 ms: %d rotations, want 2", n)
	}
	clk.Advance(300 * us) // 9 ms
	if n := r.Rotations(); n != 3 {
		t.Errorf("2.9ms Period after 9 ms: %d rotations, want 3", n)
	}
	r, clk = mk(time.Millisecond)
	clk.Advance(3 * time.Millisecond)
	if n := r.Rotations(); n != 3 {
		t.Errorf("1ms Period after Advance(3ms): %d rotations, want 3", n)
	}
	if _, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: grudge.Config{Hi: 10}, Period: 999 * us}); err == nil ||
		!strings.Contains(err.Error(), "1ms") {
		t.Errorf("Period 999µs: %v; want a refusal naming 1ms", err)
	}
}

// TestAudit136NegativeInfiniteRateRefused: docs/migrating.md (dcbc9cf):
// more inputs are refused than grudge refuses: "a decay of rate 0 ...,
// or of a negative or infinite rate (New's error: "Exponential lambda
// must be finite and > 0")". Checked: Exponential(-1), Exponential(+Inf)
// give exactly that text in New's error, for the Sketch and the
// Rotator; Linear(-1) and Linear(+Inf) are refused (ErrInvalidConfig).
func TestAudit136NegativeInfiniteRateRefused(t *testing.T) {
	for _, rate := range []float64{-1, math.Inf(1), math.Inf(-1)} {
		_, err := grudge.New(grudge.Config{Hi: 1, Decay: grudge.Exponential(rate)})
		if err == nil || !strings.Contains(err.Error(), "Exponential lambda must be finite and > 0") {
			t.Errorf("New(Exponential(%v)): %v; want the doc's text", rate, err)
		}
		_, err = grudge.NewRotator(grudge.RotatorConfig{Sketch: grudge.Config{Hi: 1, Decay: grudge.Exponential(rate)}, Period: time.Second})
		if err == nil || !strings.Contains(err.Error(), "Exponential lambda must be finite and > 0") {
			t.Errorf("NewRotator(Exponential(%v)): %v; want the doc's text", rate, err)
		}
		if _, err := grudge.New(grudge.Config{Hi: 1, Decay: grudge.Linear(rate)}); !errors.Is(err, grudge.ErrInvalidConfig) {
			t.Errorf("New(Linear(%v)): %v; want ErrInvalidConfig", rate, err)
		}
	}
}
