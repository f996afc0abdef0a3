package limit

import (
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// Reservation.Cancel on Buckets: "The Buckets engine's cell is the key's
// entry: it is given back exactly when nothing has written it since (no
// request of the key, nor of a key sharing its fingerprint and a line)";
// a reservation larger than one step "is given back in steps, and a
// request of the key (or of a key sharing its fingerprint and a line)
// that lands between two of them keeps the part not yet given back"
// (reserve.go). So keys sharing the key's lines with other fingerprints,
// writing while the reservation is taken and given back, and while the
// clock moves, must not stop an exact give-back: after each Cancel the
// key reads as if never reserved (0 debt: it had none), the lines being
// far from full (no eviction).
func TestAudit78BucketsCancelAmidLineNeighbors(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		clk := sketchtest.NewFakeClock()
		clk.Set(7_000_000)
		l, err := New(10, 20, WithClock(clk), WithEngine(Buckets), WithSeed(3), WithMaxDebt(80), WithCapacity(20000, 0.001))
		if err != nil {
			t.Fatal(err)
		}
		const key = "victim"
		a0, a1, afp := l.b.Locate(key)
		var neigh []string
		for i := 0; len(neigh) < 6 && i < 5_000_000; i++ {
			k := fmt.Sprintf("n%d", i)
			b0, b1, bfp := l.b.Locate(k)
			if bfp != afp && (b0 == a0 || b0 == a1 || b1 == a0 || b1 == a1) {
				neigh = append(neigh, k)
			}
		}
		if len(neigh) < 6 {
			t.Skip("no neighbors found")
		}
		for rep := range 40 {
			var wg sync.WaitGroup
			stop := make(chan struct{})
			for g := range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						k := neigh[(g*3+i)%len(neigh)]
						l.AllowN(l.Now(), k, 1)
						if i%16 == 0 {
							clk.Advance(time.Duration(i%3) * time.Millisecond)
						}
					}
				}()
			}
			r := l.ReserveN(l.Now(), key, 5+rep%16)
			if !r.OK() {
				t.Fatalf("rep %d: reservation not OK", rep)
			}
			r.Cancel()
			close(stop)
			wg.Wait()
			if got := l.TokensAt(l.Now(), key); math.Abs(got-20) > 1e-9 {
				t.Fatalf("rep %d: victim tokens %v after Cancel amid other-fingerprint writes to its lines; want 20 (exact give-back: nothing wrote its entry)", rep, got)
			}
			clk.Advance(10 * time.Second) // everyone drains
		}
	})
}
