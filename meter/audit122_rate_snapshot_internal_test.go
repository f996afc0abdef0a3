package meter

import (
	"bytes"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

const a122Limit = 10 * time.Second

// TestAudit122RateSnapshotStalledObserveAcrossPromotion (regression,
// passes): meter/doc.go: "WriteTo runs concurrently with everything else
// and stops nothing: each cell is one atomic load, so a snapshot under
// traffic is not a global cut (an event in flight may be in it or not)";
// "a restored meter reads what the never-stopped one would"; Rate: "never
// lower it, except the rotation term". Interleaving: events on six keys
// complete before D-1 (D the deadline); A = Observe(k) at D-1 is stopped
// at its load of generation g (g = 0: before writing the primary; g = 1:
// the primary written, the younger generation not yet); the clock crosses
// D by one or two Periods and B = ObserveAt on another key promotes; WriteTo
// runs (A still stopped), then A resumes. Observation wanted: the
// snapshot, restored into a fresh Rate at the snapshot's time and 3 ms
// later, reads every key at or above the exact decayed count of the
// events completed before WriteTo (those the primary must hold); the
// live meter, once A returns, at or above the count with A's event.
func TestAudit122RateSnapshotStalledObserveAcrossPromotion(t *testing.T) {
	const window = 10 * time.Millisecond
	wms := float64(window / time.Millisecond)
	keys := []string{"k", "b", "p0", "p1", "p2", "p3"}
	for _, gen := range []int{0, 1} {
		for _, jump := range []int64{1, 2} {
			for _, sz := range [][2]uint32{{2, 1}, {2, 64}} {
				t.Run(fmt.Sprintf("gen=%d/jump=%d/size=%dx%d", gen, jump, sz[0], sz[1]), func(t *testing.T) {
					opts := func(c *sketchtest.FakeClock) []Option {
						return []Option{WithClock(c), WithSize(sz[0], sz[1]), WithSeed(122), WithPeriodWindows(1)}
					}
					clk := sketchtest.NewFakeClock()
					clk.Set(1_000_000)
					r, err := NewRate(window, opts(clk)...)
					if err != nil {
						t.Fatal(err)
					}
					cur := r.rot().Current()
					d := cur.Deadline
					pms := core.PeriodMillis(r.rot().Config().Period)
					var done []a122Ev
					obs := func(k string, n float64) {
						tt := clk.Now()
						r.ObserveAt(tt, k, n)
						done = append(done, a122Ev{k, tt.UnixMilli(), n})
					}
					for i := int64(0); i < 8; i++ {
						clk.Set(d - 8 + i)
						for j, k := range keys {
							obs(k, float64(j+1)*0.5)
						}
					}
					clk.Set(d - 1)
					g := cur.Gens[gen]
					var armed, fired atomic.Bool
					stalled, release := make(chan struct{}), make(chan struct{})
					core.SetHooks(g, core.Hooks{Load: func(uint32) {
						if !armed.Load() || fired.Swap(true) {
							return
						}
						close(stalled)
						select {
						case <-release:
						case <-time.After(a122Limit):
						}
					}})
					aDone := make(chan struct{})
					armed.Store(true)
					go func() {
						defer close(aDone)
						r.Observe("k")
					}()
					select {
					case <-stalled:
					case <-time.After(a122Limit):
						close(release)
						t.Fatal("A never reached its load")
					}
					clk.Set(d + (jump-1)*pms)
					obs("b", 3)
					obs("p1", 2)
					if r.rot().Current().Gens[0] == cur.Gens[0] {
						close(release)
						t.Fatal("no promotion")
					}
					var buf bytes.Buffer
					if _, err := r.WriteTo(&buf); err != nil {
						close(release)
						t.Fatalf("WriteTo with A stalled: %v", err)
					}
					snapAt := clk.NowMillis()
					close(release)
					select {
					case <-aDone:
					case <-time.After(a122Limit):
						t.Fatal("A never returned")
					}
					core.SetHooks(g, core.Hooks{})
					for _, lag := range []int64{0, 3} {
						c2 := sketchtest.NewFakeClock()
						c2.Set(snapAt + lag)
						r2, err := NewRate(window, opts(c2)...)
						if err != nil {
							t.Fatal(err)
						}
						if _, err := r2.ReadFrom(bytes.NewReader(buf.Bytes())); err != nil {
							t.Fatalf("ReadFrom: %v", err)
						}
						tr := snapAt + lag
						for _, k := range keys {
							got := r2.rot().QueryStringAt(time.UnixMilli(tr), k)
							want := a122Truth(done, k, tr, a122Bound(r2), wms)
							if got < want {
								t.Errorf("restored (+%d ms): %q reads %.9g, below %.9g, the exact count of events completed before WriteTo", lag, k, got, want)
							}
						}
					}
					withA := append(append([]a122Ev(nil), done...), a122Ev{"k", d - 1, 1})
					tr := clk.NowMillis()
					for _, k := range keys {
						got := r.rot().QueryStringAt(time.UnixMilli(tr), k)
						want := a122Truth(withA, k, tr, a122Bound(r), wms)
						if got < want {
							t.Errorf("live, A returned: %q reads %.9g, below %.9g", k, got, want)
						}
					}
					runtime.Gosched()
				})
			}
		}
	}
}
