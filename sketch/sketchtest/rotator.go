package sketchtest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch"
)

// RotatorFactory builds the rotator under test: generations sketches,
// each configured by cfg (as a Factory's), each the primary for period.
// It must rotate on cfg.Clock (a *FakeClock whenever the check drives
// time): lazily on access, as rotator.Rotator and the grudge face's
// rotator without a Ticker do, or by any means that has rotated by the
// time an operation reads the clock past a deadline. A rotator that
// rotates on a real time.Ticker (the reference's) or on ticks (a
// grudgetest.FakeTicker) is out of its scope: run TestScorer on those.
type RotatorFactory func(t testing.TB, cfg sketch.Config, generations uint32, period time.Duration) sketch.Scorer

// TestRotator checks a rotator against its contract (package rotator):
// every TestScorer check, on rotators of 2 generations and a period of a
// day (a long idle time forgets a score, as a rotator must: from 2 days
// on it reads 0); the window, for 2 and 3 generations (a write made with
// any of Update, UpdateAndQuery and TryUpdate reads in full while it is
// younger than (Generations-1) x Period, and 0 from Generations x Period
// on, so it went to every generation and a retired one is gone);
// TryUpdate exact across rotations (racing goroutines never lift the
// primary past the limit while the clock crosses deadlines, and at a
// frozen instant fill it exactly to the limit); and Close, when the
// rotator has one, idempotent and leaving the rotator usable.
func TestRotator(t *testing.T, newRotator RotatorFactory) {
	const day = 24 * time.Hour
	checkScorer(t, func(t testing.TB, cfg sketch.Config) sketch.Scorer { return newRotator(t, cfg, 2, day) }, 2*day)
	t.Run("Window", func(t *testing.T) { checkWindow(t, newRotator) })
	t.Run("TryUpdateAcrossRotations", func(t *testing.T) { checkTryAcrossRotations(t, newRotator) })
	t.Run("Close", func(t *testing.T) { checkClose(t, newRotator) })
}

// checkWindow: keys written once each, every quarter period; at every
// quarter period each key reads 1 while younger than (G-1) x Period and
// 0 from G x Period on (in between either, depending on where the
// deadlines fall), and UpdateAndQuery(k, 0) reads what Query reads.
func checkWindow(t *testing.T, newRotator RotatorFactory) {
	const period = 10 * time.Second
	const step = period / 4
	for _, gens := range []uint32{2, 3} {
		t.Run(fmt.Sprintf("generations=%d", gens), func(t *testing.T) {
			clk := NewFakeClock()
			clk.Set(1_700_000_000_000)
			r := newRotator(t, sketch.Config{Levels: 3, CellsPerLevel: 4096, Hi: 1e9, Seed: 7, Clock: clk}, gens, period)
			keep, gone := time.Duration(gens-1)*period, time.Duration(gens)*period
			var written []time.Duration // written[i]: when key i was written, from the start
			for i := range int(4*gens + 6) {
				now := time.Duration(i) * step
				k := fmt.Sprintf("w%d", i)
				switch i % 3 {
				case 0:
					r.UpdateString(k, 1)
				case 1:
					if got := r.UpdateAndQueryString(k, 1); got != 1 {
						t.Fatalf("at %v: UpdateAndQuery(%s, 1) on a fresh key = %v, want 1", now, k, got)
					}
				default:
					if !r.TryUpdateString(k, 1, 1) {
						t.Fatalf("at %v: TryUpdate(%s, 1, 1) on a fresh key denied", now, k)
					}
				}
				written = append(written, now)
				for j, w := range written {
					k, age := fmt.Sprintf("w%d", j), now-w
					got := r.QueryString(k)
					switch {
					case age < keep && got != 1:
						t.Fatalf("at %v: %s, written %v ago, reads %v; want 1 (younger than (Generations-1) x Period = %v)", now, k, age, got, keep)
					case age >= gone && got != 0:
						t.Fatalf("at %v: %s, written %v ago, reads %v; want 0 (a score lives at most Generations x Period = %v)", now, k, age, got, gone)
					case got != 0 && got != 1:
						t.Fatalf("at %v: %s, written %v ago, reads %v; want 1 or 0", now, k, age, got)
					}
					if j%4 == 0 {
						if u := r.UpdateAndQueryString(k, 0); u != got {
							t.Fatalf("at %v: %s: UpdateAndQuery(0) = %v, Query = %v", now, k, u, got)
						}
					}
				}
				clk.Advance(step)
			}
		})
	}
}

// checkTryAcrossRotations: goroutines race TryUpdate(k, 1, limit), no
// decay, while one of them moves the clock across deadlines; the primary
// never holds more than the limit. Then, at frozen instants a half period
// apart, a race admits exactly the limit less what the primary held, and
// leaves it at the limit.
func checkTryAcrossRotations(t *testing.T, newRotator RotatorFactory) {
	const period = 100 * time.Millisecond
	const limit = 200
	ForEachGOMAXPROCS(t, func(t *testing.T) {
		for rep := range reps(5, 2) {
			clk := NewFakeClock()
			clk.Set(1_700_000_000_000)
			r := newRotator(t, sketch.Config{Levels: 3, CellsPerLevel: 1024, Hi: 1e9, Seed: uint64(rep), Clock: clk}, 2, period)
			k := []byte("hot")
			var wg sync.WaitGroup
			var stop atomic.Bool
			for g := range 8 {
				wg.Go(func() {
					for i := 0; !stop.Load() || i < 50; i++ {
						r.TryUpdate(k, 1, limit)
						if g == 0 && i%16 == 0 {
							clk.Advance(period / 7)
						}
						if g == 0 && i >= 16*7*6 {
							stop.Store(true) // six periods crossed
						}
					}
				})
			}
			wg.Wait()
			if got := r.Query(k); got > limit {
				t.Fatalf("rep %d: the primary holds %v after racing TryUpdate(k, 1, %d) across rotations", rep, got, limit)
			}
			for round := range 4 {
				clk.Advance(period / 2)
				before := r.Query(k)
				admitted := race(8, func() bool { return r.TryUpdate(k, 1, limit) })
				if want := int64(limit - before); admitted != want {
					t.Fatalf("rep %d, round %d: %d admitted at a frozen instant, the primary at %v: want exactly %d", rep, round, admitted, before, want)
				}
				if got := r.Query(k); got != limit {
					t.Fatalf("rep %d, round %d: Query = %v after the race, want %d", rep, round, got, limit)
				}
			}
		}
	})
}

// checkClose: a rotator with a Close method may be closed twice, and
// keeps working after it.
func checkClose(t *testing.T, newRotator RotatorFactory) {
	clk := NewFakeClock()
	r := newRotator(t, sketch.Config{Levels: 2, CellsPerLevel: 64, Hi: 100, Clock: clk}, 2, time.Second)
	c, ok := r.(interface{ Close() })
	if !ok {
		return
	}
	r.UpdateString("k", 1)
	c.Close()
	c.Close()
	r.UpdateString("k", 1)
	if got := r.QueryString("k"); got != 2 {
		t.Fatalf("Query after Close = %v, want 2", got)
	}
	if !r.TryUpdateString("k", 1, 3) || r.TryUpdateString("k", 1, 3) {
		t.Fatalf("TryUpdate after Close does not decide on %v", r.QueryString("k"))
	}
}
