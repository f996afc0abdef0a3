package rotator_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a132Within reports whether ch delivers within d.
func a132Within[T any](ch <-chan T, d time.Duration) (T, bool) {
	select {
	case v := <-ch:
		return v, true
	case <-time.After(d):
		var zero T
		return zero, false
	}
}

// TestAudit132PromotionWaitsForAdmissionInYounger holds an admitted
// TryUpdate(k, 1, 1) after the primary's commit, at the younger
// generation's write (its Load hook): the primary holds the 1, the
// younger generation, the next primary, not yet. A promotion then
// starts (Rotate, or an operation past the deadline). rotator/doc.go:
// "an admission holds its stripe of the primary until its increment is
// in every generation, a promotion closes the primary's stripes before
// it publishes the next set ... The promoting operation waits for the
// admissions in flight on the primary". So the promotion must not
// publish while the call is held, a TryUpdate(k, 1, 1) racing it must
// be denied, and after the release the new primary must hold the 1.
// If the promotion published first, the new primary would read 0 and
// admit a second call: 2 admitted with limit 1.
func TestAudit132PromotionWaitsForAdmissionInYounger(t *testing.T) {
	for _, how := range []string{"rotate", "deadline"} {
		t.Run(how, func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			clk.Set(1_700_000_000_000)
			r, err := rotator.New(rotator.Config{
				Sketch:      sketch.Config{Levels: 2, CellsPerLevel: 64, Hi: 100, Decay: decay.None(), Clock: clk},
				Generations: 2, Period: time.Hour,
			})
			if err != nil {
				t.Fatal(err)
			}
			cr := core.RotatorOf(r)
			k := []byte("k")
			gens := cr.Current().Gens
			reached, release := make(chan struct{}), make(chan struct{})
			var calls atomic.Int32
			core.SetHooks(gens[1], core.Hooks{Load: func(uint32) {
				if calls.Add(1) == 1 {
					close(reached)
					<-release
				}
			}})
			xDone := make(chan bool, 1)
			go func() { xDone <- r.TryUpdate(k, 1, 1) }()
			select {
			case <-reached:
			case <-time.After(10 * time.Second):
				t.Fatal("the admission never reached the younger generation")
			}
			if q := gens[0].Query(k); q != 1 {
				t.Fatalf("primary reads %v with the admission held at the younger generation, want 1", q)
			}
			promoted := make(chan float64, 1)
			if how == "rotate" {
				go func() { cr.Rotate(); promoted <- 0 }()
			} else {
				clk.Advance(time.Hour)
				go func() { promoted <- r.Query(k) }()
			}
			if _, ok := a132Within(promoted, 100*time.Millisecond); ok {
				t.Fatal("the promotion completed while an admission of the primary was in flight")
			}
			if cr.Current().Gens[0] != gens[0] {
				t.Fatal("the next set was published while an admission of the primary was in flight")
			}
			yDone := make(chan bool, 1)
			go func() { yDone <- r.TryUpdate(k, 1, 1) }()
			close(release)
			if !<-xDone {
				t.Fatal("X denied on 0 + 1 <= 1")
			}
			q := <-promoted
			if <-yDone {
				t.Error("a TryUpdate(k, 1, 1) racing the promotion was admitted: 2 admitted with limit 1")
			}
			cur := cr.Current().Gens
			if cur[0] != gens[1] {
				t.Fatal("the promotion did not make generation 1 the primary")
			}
			if how == "deadline" && q != 1 {
				t.Errorf("the promoting Query read %v, want 1", q)
			}
			if v := r.Query(k); v != 1 {
				t.Errorf("the new primary reads %v, want 1 (the held admission)", v)
			}
			if r.TryUpdate(k, 1, 1) {
				t.Error("TryUpdate(k, 1, 1) admitted on the new primary after one admission")
			}
		})
	}
}
