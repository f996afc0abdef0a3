package grudge_test

import (
	"testing"
	"time"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
)

// Every method, as the first access after the periods that retire a key's
// generations, sees them retired (lazy rotation: "the first access sees
// exactly the generations it would have seen").
func TestAudit30LazyFirstAccessEveryMethod(t *testing.T) {
	k := []byte("k")
	methods := map[string]func(r *grudge.Rotator) float64{
		"Query":          func(r *grudge.Rotator) float64 { return r.Query(k) },
		"QueryDetailed":  func(r *grudge.Rotator) float64 { return r.QueryDetailed(k).Aggregate },
		"UpdateAndQuery": func(r *grudge.Rotator) float64 { return r.UpdateAndQuery(k, 1) - 1 },
		"TryUpdate": func(r *grudge.Rotator) float64 {
			if r.TryUpdate(k, 1, 1) {
				return 0
			}
			return 1
		},
		"Update": func(r *grudge.Rotator) float64 { r.Update(k, 1); return r.Query(k) - 1 },
	}
	for name, m := range methods {
		for _, jump := range []time.Duration{20 * time.Second, 25 * time.Second, 1000 * time.Hour} {
			clk := grudgetest.NewFakeClock()
			r, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: grudge.Config{Hi: 10, Clock: clk}, Generations: 2, Period: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			r.Update(k, 5)
			clk.Advance(jump)
			if got := m(r); got != 0 {
				t.Errorf("%s first after %v: read %v of the retired write, want 0", name, jump, got)
			}
			// One period less: the write is still in the primary.
			clk2 := grudgetest.NewFakeClock()
			r2, _ := grudge.NewRotator(grudge.RotatorConfig{Sketch: grudge.Config{Hi: 10, Clock: clk2}, Generations: 2, Period: 10 * time.Second})
			r2.Update(k, 5)
			clk2.Advance(19999 * time.Millisecond)
			if name != "TryUpdate" {
				if got := m(r2); got != 5 {
					t.Errorf("%s first after 19.999 s: %v, want 5", name, got)
				}
			} else if r2.TryUpdate(k, 1, 5) {
				t.Errorf("TryUpdate first after 19.999 s admitted over 5")
			}
		}
	}
}
