package rotator_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// With N = 3, racers across two deadlines: the primary after both
// promotions was built at New and holds every admission, so exactly L.
func TestAudit40TryUpdateExactAcrossTwoPromotions(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		for round := 0; round < 8; round++ {
			clk := a40Clock()
			r := a40Rot(t, clk, 3, 20*time.Millisecond, round%2 == 1)
			clk.Advance(19 * time.Millisecond)
			const L = 700
			var got atomic.Int64
			var wg sync.WaitGroup
			for w := 0; w < 8; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					for i := 0; i < 150; i++ {
						if w == 0 && (i == 20 || i == 60) {
							clk.Advance(time.Millisecond) // deadline 20
						}
						if w == 1 && i == 90 {
							clk.Advance(19 * time.Millisecond) // deadline 40
						}
						if r.TryUpdateString("k", 1, L) {
							got.Add(1)
						}
					}
				}(w)
			}
			wg.Wait()
			r.QueryString("k")
			if st := r.Stats(); st.Periods > 2 {
				t.Fatalf("round %d: %+v", round, st)
			}
			if g := got.Load(); g != L {
				t.Fatalf("round %d: %d admissions across two promotions with 3 generations, want exactly %d", round, g, L)
			}
		}
	})
}

// The base seed is checked by ReadFrom (not adopted).
func TestAudit40SnapshotSeedMismatch(t *testing.T) {
	clk := a40Clock()
	mk := func(seed uint64) *rotator.Rotator {
		r, err := rotator.New(rotator.Config{
			Sketch:      sketch.Config{Levels: 2, CellsPerLevel: 16, Hi: 1e9, Decay: decay.None(), Seed: seed, Clock: clk},
			Generations: 2, Period: time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	src := mk(1)
	src.UpdateString("a", 3)
	data, _ := src.MarshalBinary()
	dst := mk(2)
	dst.UpdateString("b", 4)
	if err := dst.UnmarshalBinary(data); !errors.Is(err, sketch.ErrSnapshotMismatch) {
		t.Fatalf("seed 1 into seed 2: %v, want ErrSnapshotMismatch", err)
	}
	if dst.QueryString("b") != 4 || dst.QueryString("a") != 0 {
		t.Fatalf("dst changed")
	}
	// a different N or Period too
	for _, cfg := range []rotator.Config{
		{Sketch: sketch.Config{Levels: 2, CellsPerLevel: 16, Hi: 1e9, Decay: decay.None(), Seed: 1, Clock: clk}, Generations: 3, Period: time.Second},
		{Sketch: sketch.Config{Levels: 2, CellsPerLevel: 16, Hi: 1e9, Decay: decay.None(), Seed: 1, Clock: clk}, Generations: 2, Period: 2 * time.Second},
		{Sketch: sketch.Config{Levels: 2, CellsPerLevel: 16, Hi: 2e9, Decay: decay.None(), Seed: 1, Clock: clk}, Generations: 2, Period: time.Second},
	} {
		d, _ := rotator.New(cfg)
		if err := d.UnmarshalBinary(data); !errors.Is(err, sketch.ErrSnapshotMismatch) {
			t.Errorf("%+v: %v, want ErrSnapshotMismatch", cfg, err)
		}
	}
}

// A restored rotator promotes on its next access when the deadline passed
// during the downtime, counting the periods, as the never-stopped one.
func TestAudit40SnapshotDeadlineDowntime(t *testing.T) {
	clk := a40Clock()
	r := a40Rot(t, clk, 3, 10*time.Millisecond, false)
	r.UpdateString("k", 1)
	clk.Advance(7 * time.Millisecond)
	data, _ := r.MarshalBinary()
	for _, down := range []time.Duration{0, 2 * time.Millisecond, 3 * time.Millisecond, 13 * time.Millisecond, 23 * time.Millisecond, 33 * time.Millisecond} {
		c2 := sketchtest.NewFakeClock()
		c2.SetTime(clk.Now().Add(down))
		r2 := a40Rot(t, c2, 3, 10*time.Millisecond, false)
		if err := r2.UnmarshalBinary(data); err != nil {
			t.Fatal(err)
		}
		c3 := sketchtest.NewFakeClock()
		c3.SetTime(clk.Now())
		r3 := a40Rot(t, c3, 3, 10*time.Millisecond, false)
		r3.UnmarshalBinary(data)
		c3.Advance(down)
		a, b := r2.QueryString("k"), r3.QueryString("k")
		sa, sb := r2.Stats(), r3.Stats()
		if a != b || sa.Periods != sb.Periods {
			t.Errorf("down %v: restored late reads %v (%d periods), restored then advanced %v (%d periods)", down, a, sa.Periods, b, sb.Periods)
		}
		want := 1.0
		if down >= 23*time.Millisecond {
			want = 0 // written at 0: gone after N x Period = 30ms
		}
		if a != want {
			t.Errorf("down %v: reads %v, want %v", down, a, want)
		}
	}
}
