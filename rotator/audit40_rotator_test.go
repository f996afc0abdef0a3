package rotator_test

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

func a40Rot(t testing.TB, clk sketch.Clock, n uint32, period time.Duration, pre bool) *rotator.Rotator {
	t.Helper()
	r, err := rotator.New(rotator.Config{
		Sketch:      sketch.Config{Levels: 3, CellsPerLevel: 512, Hi: 1e9, Decay: decay.None(), Seed: 9, Clock: clk},
		Generations: n, Period: period, Prefetch: pre,
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func a40Clock() *sketchtest.FakeClock {
	c := sketchtest.NewFakeClock()
	c.SetTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	return c
}

// Reads come from the oldest generation, writes go to all; Stats counts
// promotions and periods; a jump of k periods is one promotion counting
// k; a step back rotates nothing; Close is an idempotent no-op.
func TestAudit40ReadsOldestWritesAll(t *testing.T) {
	for _, pre := range []bool{false, true} {
		clk := a40Clock()
		r := a40Rot(t, clk, 3, 10*time.Millisecond, pre)
		r.UpdateString("k", 1) // in A, B, C (all created at 0)
		clk.Advance(10 * time.Millisecond)
		r.UpdateString("k", 2) // B, C, D(created 10)
		steps := []float64{3, 3, 2, 0}
		for i, want := range steps {
			if i > 0 {
				clk.Advance(10 * time.Millisecond)
			}
			if got := r.QueryString("k"); got != want {
				t.Fatalf("prefetch=%v step %d: Query %v, want %v", pre, i, got, want)
			}
		}
		st := r.Stats()
		if st.Promotions != 4 || st.Periods != 4 || st.Allocated != 7 {
			t.Fatalf("stats %+v, want 4 promotions, 4 periods, 7 sketches", st)
		}
		clk.Advance(-25 * time.Millisecond)
		r.UpdateString("x", 1)
		if st2 := r.Stats(); st2 != st {
			t.Fatalf("step back rotated: %+v -> %+v", st, st2)
		}
		clk.Advance(25*time.Millisecond + 75*time.Millisecond) // 7.5 periods past the last deadline-ish
		r.QueryString("k")
		st3 := r.Stats()
		if st3.Promotions != st.Promotions+1 {
			t.Fatalf("a jump is one promotion: %+v -> %+v", st, st3)
		}
		if st3.Periods != st.Periods+7 {
			t.Fatalf("jump of 75ms past the deadline (now 115ms, deadline 50ms) counts %d periods, want 7", st3.Periods-st.Periods)
		}
		if st3.Allocated != st.Allocated+3 {
			t.Fatalf("a jump of >= N periods builds N: %+v", st3)
		}
		r.Close()
		r.Close()
		r.UpdateString("k", 1)
		if r.QueryString("k") != 1 {
			t.Fatalf("rotator unusable after Close")
		}
	}
}

// TryUpdate is exact across one promotion: racers TryUpdate(k, 1, L)
// while the clock crosses the deadline (every generation created at New
// holds every admission) are admitted exactly L times.
func TestAudit40TryUpdateExactAcrossPromotion(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		for round := 0; round < 10; round++ {
			clk := a40Clock()
			r := a40Rot(t, clk, 2, 50*time.Millisecond, round%2 == 0)
			clk.Advance(49 * time.Millisecond)
			const L = 500
			var got atomic.Int64
			var wg sync.WaitGroup
			start := make(chan struct{})
			for w := 0; w < 8; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					<-start
					for i := 0; i < 120; i++ {
						if w == 0 && i == 30 {
							clk.Advance(time.Millisecond) // the deadline, mid-race
						}
						if r.TryUpdateString("k", 1, L) {
							got.Add(1)
						}
					}
				}(w)
			}
			close(start)
			wg.Wait()
			if g := got.Load(); g != L {
				t.Fatalf("round %d: %d admissions across a promotion, want exactly %d", round, g, L)
			}
			if st := r.Stats(); st.Promotions != 1 {
				t.Fatalf("round %d: %d promotions, want 1", round, st.Promotions)
			}
			if q := r.QueryString("k"); q != L {
				t.Fatalf("round %d: primary reads %v, want %d", round, q, L)
			}
		}
	})
}

func a40Typed(err error) bool {
	return errors.Is(err, sketch.ErrCorruptSnapshot) || errors.Is(err, sketch.ErrSnapshotMismatch)
}

// Hostile bytes into ReadFrom and UnmarshalBinary: every single-byte flip
// and every truncation is a typed error, and the rotator is unchanged.
func TestAudit40SnapshotHostile(t *testing.T) {
	clk := a40Clock()
	src := a40Rot(t, clk, 2, 10*time.Second, false)
	src2, _ := rotator.New(rotator.Config{
		Sketch:      sketch.Config{Levels: 2, CellsPerLevel: 8, Hi: 1e9, Decay: decay.Linear(1), Seed: 9, Clock: clk},
		Generations: 2, Period: 10 * time.Second,
	})
	for i := 0; i < 10; i++ {
		src2.UpdateString(fmt.Sprint(i), float64(i+1))
	}
	_ = src
	snap, err := src2.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	dst, _ := rotator.New(rotator.Config{
		Sketch:      sketch.Config{Levels: 2, CellsPerLevel: 8, Hi: 1e9, Decay: decay.Linear(1), Seed: 9, Clock: clk},
		Generations: 2, Period: 10 * time.Second,
	})
	dst.UpdateString("mine", 5)
	state := func() string {
		st := dst.Stats()
		s := fmt.Sprint(st.Promotions, st.Periods) // Allocated counts the sketches a decode builds, failed or not
		for i := 0; i < 10; i++ {
			s += fmt.Sprint(" ", dst.QueryString(fmt.Sprint(i)))
		}
		return s + fmt.Sprint(" ", dst.QueryString("mine"))
	}
	want := state()
	check := func(what string, data []byte) {
		for _, via := range []string{"ReadFrom", "UnmarshalBinary"} {
			var err error
			if via == "ReadFrom" {
				_, err = dst.ReadFrom(bytes.NewReader(data))
			} else {
				err = dst.UnmarshalBinary(data)
			}
			if err == nil {
				t.Errorf("%s %s: accepted", via, what)
				return
			}
			if !a40Typed(err) {
				t.Errorf("%s %s: untyped error %v", via, what, err)
			}
			if got := state(); got != want {
				t.Errorf("%s %s: rotator changed: %s, was %s", via, what, got, want)
			}
		}
	}
	for i := range snap {
		d := append([]byte(nil), snap...)
		d[i] ^= 0x81
		check(fmt.Sprintf("flip %d", i), d)
	}
	for n := 0; n < len(snap); n++ {
		check(fmt.Sprintf("truncated %d", n), snap[:n])
	}
	if err := dst.UnmarshalBinary(append(append([]byte(nil), snap...), 0)); err == nil || !a40Typed(err) {
		t.Errorf("trailing byte: %v", err)
	}
	// and the real thing restores
	if err := dst.UnmarshalBinary(snap); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		if a, b := src2.QueryString(fmt.Sprint(i)), dst.QueryString(fmt.Sprint(i)); a != b {
			t.Errorf("key %d: restored %v, source %v", i, b, a)
		}
	}
}
