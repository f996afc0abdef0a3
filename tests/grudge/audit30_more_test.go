package grudge_test

import (
	"testing"
	"time"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
)

// Negative scores decay toward 0 from below and clamp at Lo.
func TestAudit30NegativeScores(t *testing.T) {
	clk := grudgetest.NewFakeClock()
	for _, d := range []grudge.Decay{grudge.Linear(1), grudge.Exponential(0.1)} {
		s, _ := grudge.New(grudge.Config{Lo: -100, Hi: 100, Decay: d, Clock: clk})
		k := []byte("k")
		if got := s.UpdateAndQuery(k, -500); got != -100 {
			t.Errorf("%T: clamp at Lo: %v, want -100", d, got)
		}
		clk.Advance(10 * time.Second)
		want := d.Apply(-100, 10_000)
		if got := s.Query(k); got < want-1e-4 || got > want+1e-4 || got > 0 {
			t.Errorf("%T: after 10 s %v, want %v", d, got, want)
		}
		clk.Advance(time.Hour)
		if got := s.Query(k); got > 0 || got < -0.01 {
			t.Errorf("%T: after an hour %v, want ~0 from below", d, got)
		}
	}
}

// A function assigned to grudge.Min is used as a custom aggregator.
func TestAudit30ReassignedMin(t *testing.T) {
	saved := grudge.Min
	defer func() { grudge.Min = saved }()
	grudge.Min = func(s []float64) float64 { return -42 }
	s, err := grudge.New(grudge.Config{Hi: 10, Aggregator: grudge.Min})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.UpdateAndQuery([]byte("k"), 1); got != -42 {
		t.Errorf("reassigned Min: %v, want -42", got)
	}
	grudge.Min = saved
	s2, _ := grudge.New(grudge.Config{Hi: 10, Aggregator: grudge.Min})
	if got := s2.UpdateAndQuery([]byte("k"), 1); got != 1 {
		t.Errorf("restored Min: %v, want 1", got)
	}
}

// realTicker wraps *time.Ticker in the Ticker interface.
type audit30RealTicker struct{ t *time.Ticker }

func (r audit30RealTicker) C() <-chan time.Time { return r.t.C }
func (r audit30RealTicker) Stop()               { r.t.Stop() }

// A real ticker drives rotation; Close stops it and leaves no goroutine
// (goleak in TestMain).
func TestAudit30RealTickerClose(t *testing.T) {
	r, err := grudge.NewRotator(grudge.RotatorConfig{
		Sketch: grudge.Config{Hi: 1}, Ticker: audit30RealTicker{time.NewTicker(time.Millisecond)},
	})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for r.Rotations() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("no 3 rotations in 10 s with a 1 ms ticker: %d", r.Rotations())
		}
		time.Sleep(time.Millisecond)
	}
	r.Close()
	n := r.Rotations()
	time.Sleep(20 * time.Millisecond)
	if m := r.Rotations(); m != n {
		t.Errorf("rotations continued after Close: %d -> %d", n, m)
	}
	r.Close()
}
