package rotator_test

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit88NegRotatorPairsNeverBelowSuffix: one key alone (no other
// key in the rotator), no decay, Lo < 0, N = 3 generations with a 4 ms
// Period while the workers move the fake clock 1 ms at a time, so that
// promotions land in the middle of the other goroutines' work (their
// TryUpdates' held stripes, the younger generations' writes, the
// close of a retiring primary). Each worker runs pairs whose negative
// half comes first: TryUpdate(k, -1, 0) then, if admitted,
// Update(k, +1); Update(k, -3) then Update(k, +3); UpdateAndQuery(k,
// -2) then UpdateAndQuery(k, +2); TryUpdateAt(now, k, -5, 2) then, if
// admitted, TryUpdate(k, 5, 1e9). A generation receives the operations
// of each worker from some point on (a suffix of its sequence), so its
// true score is a sum of suffixes of negative-first pairs: at least 0
// once the workers are done. Every live generation must then read at
// least 0 (API.md: "Query(k) >= the key's true score ..., whatever the
// clamps, roll-backs, refunds, rotations"); a decrement kept by a
// denied TryUpdate, or written to a generation without its admission,
// reads below. Also, every UpdateAndQuery's return and every Query
// made while the worker holds no pair open must be >= -(decrements in
// flight of the other workers): each worker has at most 5 outstanding.
func TestAudit88NegRotatorPairsNeverBelowSuffix(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{1, 2, 4} {
		for _, prefetch := range []bool{false, true} {
			t.Run(fmt.Sprintf("procs%d/prefetch%v", procs, prefetch), func(t *testing.T) {
				runtime.GOMAXPROCS(procs)
				clk := sketchtest.NewFakeClock()
				clk.Set(1_700_000_000_000)
				r, err := rotator.New(rotator.Config{
					Sketch:      sketch.Config{Levels: 4, CellsPerLevel: 64, Decay: decay.None(), Lo: -1e6, Hi: 1e6, Clock: clk},
					Generations: 3, Period: 4 * time.Millisecond, Prefetch: prefetch,
				})
				if err != nil {
					t.Fatal(err)
				}
				k := []byte("k")
				const workers = 4
				var wg sync.WaitGroup
				errs := make(chan string, workers)
				for w := range workers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := range 400 {
							if i%5 == w {
								clk.Advance(time.Millisecond) // promotions every 4 ms, mid-way through the others' pairs
							}
							switch (i + w) % 4 {
							case 0:
								if r.TryUpdate(k, -1, 0) {
									r.Update(k, 1)
								}
							case 1:
								r.Update(k, -3)
								r.Update(k, 3)
							case 2:
								if v := r.UpdateAndQuery(k, -2); v < -2-5*(workers-1) {
									select {
									case errs <- fmt.Sprintf("UpdateAndQuery(k, -2) = %v, below -2 less the other workers' outstanding decrements", v):
									default:
									}
								}
								r.UpdateAndQuery(k, 2)
							case 3:
								if r.TryUpdateAt(clk.Now(), string(k), -5, 2) {
									if !r.TryUpdate(k, 5, 1e9) {
										select {
										case errs <- "TryUpdate(k, 5, 1e9) denied":
										default:
										}
									}
								}
							}
						}
					}()
				}
				wg.Wait()
				close(errs)
				for e := range errs {
					t.Error(e)
				}
				if st := r.Stats(); st.Promotions < 50 {
					t.Errorf("only %d promotions", st.Promotions)
				}
				for i, g := range core.RotatorOf(r).Current().Gens {
					if v := g.Query(k); v < 0 {
						t.Errorf("generation %d reads %v for a key whose true score there is a sum of suffixes of negative-first pairs (>= 0)", i, v)
					}
				}
				if v := r.Query(k); v < 0 {
					t.Errorf("Query(k) = %v < 0", v)
				}
			})
		}
	}
}

// TestAudit88NegRotatorHeldPrimaryConflict: forced interleavings on a
// rotator of two generations, one key alone, no decay, Lo < 0. The
// primary's TryUpdate(k, -1, limit) is held before its CAS on level 1
// (it has committed level 0 and holds its stripe); meanwhile an
// Update(k, 3) writes both generations, so the CAS fails and the call
// decides again. With limit 0 it is denied: every generation must read
// 3 (its -1 given back, nothing written to the younger one). With
// limit 5 it is admitted: every generation must read 2. With a Rotate
// started while it is held (the promotion waits for the held stripe),
// the admitted -1 must be in the generation that becomes the primary.
func TestAudit88NegRotatorHeldPrimaryConflict(t *testing.T) {
	for _, tc := range []struct {
		name   string
		limit  float64
		rotate bool
		admit  bool
		want   float64
	}{
		{"denied", 0, false, false, 3},
		{"admitted", 5, false, true, 2},
		{"admitted-across-rotate", 5, true, true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			clk.Set(1_700_000_000_000)
			r, err := rotator.New(rotator.Config{
				Sketch:      sketch.Config{Levels: 2, CellsPerLevel: 64, Lo: -100, Hi: 100, Clock: clk},
				Generations: 2, Period: time.Hour,
			})
			if err != nil {
				t.Fatal(err)
			}
			k := []byte("k")
			gens := core.RotatorOf(r).Current().Gens
			var once sync.Once
			reached, release := make(chan struct{}), make(chan struct{})
			core.SetHooks(gens[0], core.Hooks{BeforeCAS: func(level uint32) {
				if level == 1 {
					once.Do(func() {
						close(reached)
						<-release
					})
				}
			}})
			done := make(chan bool)
			go func() { done <- r.TryUpdate(k, -1, tc.limit) }()
			select {
			case <-reached:
			case <-time.After(10 * time.Second):
				t.Fatal("the TryUpdate never reached level 1's CAS")
			}
			r.Update(k, 3)
			rotated := make(chan struct{})
			if tc.rotate {
				go func() { core.RotatorOf(r).Rotate(); close(rotated) }()
			} else {
				close(rotated)
			}
			close(release)
			if got := <-done; got != tc.admit {
				t.Fatalf("TryUpdate(k, -1, %v) = %v, want %v", tc.limit, got, tc.admit)
			}
			<-rotated
			cur := core.RotatorOf(r).Current().Gens
			live := cur
			if tc.rotate {
				live = cur[:1] // the new generation was born after both writes
				if cur[0] != gens[1] {
					t.Fatal("the rotation did not promote generation 1")
				}
			}
			for i, g := range live {
				if v := g.Query(k); v < tc.want || v > tc.want+1 {
					t.Errorf("generation %d reads %v, want %v (the truth) up to %v", i, v, tc.want, tc.want+1)
				}
			}
			if v := r.Query(k); v < tc.want {
				t.Errorf("Query(k) = %v, below the truth %v", v, tc.want)
			}
		})
	}
}

// TestAudit88NegRotatorDenialKeepsIncrement: the exception documented in
// rotator.TryUpdate's doc (internal/core/rotator.go): "A denial writes
// nothing, except as Sketch.TryUpdate's does after a commit conflict (a
// positive increment it could not roll back stays, an over-estimate)";
// docs/design.md, "Roll-backs", case 4. One key alone, no decay, a fixed
// clock; the key has seen a negative delta (Update(k, 5), (k, -1), (k,
// 1): [5, 5] in the primary). TryUpdate(k, 1, 6) is admitted on 5,
// commits the primary's level 0 (6) and is held; Update(k, 0.5) lands;
// the CAS on level 1 fails; level 0, written since with negative deltas
// in use, cannot be undone and the call, deciding again on 6.5, is
// denied with its +1 left in level 0: the primary reads [6.5, 5.5] for a
// truth of 5.5. Regression bounds: every level of the primary, and the
// rotator's Query, read at least the truth 5.5 and at most 5.5 plus the
// denied call's own +1; the younger generation, which the denied call
// never wrote, reads exactly 5.5.
func TestAudit88NegRotatorDenialKeepsIncrement(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	r, err := rotator.New(rotator.Config{
		Sketch:      sketch.Config{Levels: 2, CellsPerLevel: 64, Lo: -100, Hi: 100, Clock: clk},
		Generations: 2, Period: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	k := []byte("k")
	for _, d := range []float64{5, -1, 1} {
		r.Update(k, d)
	}
	p := core.RotatorOf(r).Current().Gens[0]
	var once sync.Once
	reached, release := make(chan struct{}), make(chan struct{})
	core.SetHooks(p, core.Hooks{BeforeCAS: func(level uint32) {
		if level == 1 {
			once.Do(func() {
				close(reached)
				<-release
			})
		}
	}})
	done := make(chan bool)
	go func() { done <- r.TryUpdate(k, 1, 6) }()
	select {
	case <-reached:
	case <-time.After(10 * time.Second):
		t.Fatal("the TryUpdate never reached level 1's CAS")
	}
	r.Update(k, 0.5)
	close(release)
	if <-done {
		t.Fatal("TryUpdate(k, 1, 6) admitted on 6.5")
	}
	core.SetHooks(p, core.Hooks{})
	const truth, inc = 5.5, 1.0
	for i, g := range core.RotatorOf(r).Current().Gens {
		_, levels := core.Detailed(g, k, func(_, _ uint32, score float64) float64 { return score })
		for l, v := range levels {
			if v < truth || v > truth+inc {
				t.Errorf("generation %d level %d reads %v after the denied TryUpdate(k, %v, 6), want the truth %v up to %v (the denial keeps at most its own increment)", i, l, v, inc, truth, truth+inc)
			} else if i > 0 && v != truth {
				t.Errorf("younger generation %d level %d reads %v after the denied TryUpdate(k, %v, 6), want exactly the truth %v (a denial writes nothing there)", i, l, v, inc, truth)
			}
		}
	}
	if v := r.Query(k); v < truth || v > truth+inc {
		t.Errorf("Query(k) = %v after the denied TryUpdate, want the truth %v up to %v", v, truth, truth+inc)
	}
}
