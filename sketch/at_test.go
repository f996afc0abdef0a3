package sketch_test

import (
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/internal/ref"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// atScorer is what the time-first At twins of every implementation share.
type atScorer interface {
	UpdateAt(t time.Time, key string, delta float64)
	QueryAt(t time.Time, key string) float64
	QueryString(key string) float64
	Update(key []byte, delta float64)
}

func atImpls(t *testing.T, cfg sketch.Config) map[string]atScorer {
	ref, err := ref.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rot, err := rotator.New(rotator.Config{Sketch: cfg, Period: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return map[string]atScorer{"lockfree": mustNewSketch(t, cfg), "reference": ref, "rotator": rot}
}

// TestAtDefaultClock is the case that used to stop time: on the default
// (monotonic) clock, UpdateAt with time.Now() or with a stored wall time
// of now must not move the sketch ahead of its clock, so decay goes on.
func TestAtDefaultClock(t *testing.T) {
	cfg := sketch.Config{Levels: 2, CellsPerLevel: 64, Hi: 1e7, Decay: decay.Linear(1000)}
	for name, s := range atImpls(t, cfg) {
		t.Run(name, func(t *testing.T) {
			k := "k"
			s.UpdateAt(time.Now(), k, 1e5)
			s.UpdateAt(time.UnixMilli(time.Now().UnixMilli()), "wall", 1)
			s.UpdateAt(time.Now().Add(10000*time.Hour), "far", 1)
			time.Sleep(30 * time.Millisecond)
			if got := s.QueryString(k); !(got <= 1e5-10) {
				t.Fatalf("Query(k) = %v 30 ms after 1e5 at 1000/s, want <= %v: decay stopped", got, 1e5-10)
			}
		})
	}
}

// TestAtTimebaseStaysBehindClock: whatever time the At twins are given,
// the high-water mark never runs ahead of the clock.
func TestAtTimebaseStaysBehindClock(t *testing.T) {
	s := mustNewSketch(t, sketch.Config{Hi: 1})
	s.UpdateAt(time.Now().Add(24*time.Hour), "k", 1)
	s.QueryAt(time.UnixMilli(time.Now().UnixMilli()+86_400_000), "k")
	tb := core.SketchOf(s).Timebase()
	if hw, now := tb.HighWater(), tb.NowMillis(); hw > now {
		t.Fatalf("high-water mark %d is ahead of the clock %d", hw, now)
	}
	if d := time.Since(tb.Now()); d < -time.Second || d > time.Second {
		t.Fatalf("Timebase.Now() is %v from time.Now()", -d)
	}
}

// TestAtRotatorNoPromotionFromTheFuture: a future time does not rotate.
func TestAtRotatorNoPromotionFromTheFuture(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	r, err := rotator.New(rotator.Config{Sketch: sketch.Config{Hi: 10, Clock: clk}, Period: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r.UpdateAt(clk.Now().Add(time.Hour), "k", 1)
	if p := r.Stats().Promotions; p != 0 {
		t.Fatalf("%d promotions after an UpdateAt an hour ahead, want 0", p)
	}
	clk.Advance(time.Second)
	r.Update([]byte("k"), 1)
	if p := r.Stats().Promotions; p != 1 {
		t.Fatalf("%d promotions after one period, want 1", p)
	}
}
