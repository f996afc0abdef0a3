package bucket_test

// audit27: the end of the engine's 47-bit time scale (4,400 years of ms
// after its epoch), where rel saturates and time stands still: a line
// moved long up to the last ms (its moving bit is bit 47, next to lw's
// top) keeps every debt (over-counting, never under), and never reads a
// phantom from the bit.

import (
	"math/rand/v2"
	"testing"

	"github.com/lfgrudge/grudge/internal/bucket"
	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

func TestAudit27ScaleEndOneSided(t *testing.T) {
	testsize.Serial(t)
	for _, L := range a27Laws[:3] {
		t.Run(L.name, func(t *testing.T) {
			const nkeys, lines = 60, 3
			hs := a27Colliding(nkeys, 4747)
			clk := sketchtest.NewFakeClock()
			clk.Set(1_000)
			e, u, g, ok := a27Engine(t, lines, L.law, a27Factory(hs), clk)
			if !ok {
				t.Skip("ticks longer than a ms")
			}
			span := e.Quantum().Span
			const lwMask = 1<<47 - 1
			lim := float64(span/u) * 3 / 4
			truth := make([]uint64, nkeys)
			rng := rand.New(rand.NewPCG(47, 1))
			start := int64(1_000) + lwMask - 3000 // 3 s before the end of the scale
			clk.Set(start)
			for op := 0; op < 3000; op++ {
				if rng.IntN(10) == 0 {
					clk.Set(clk.NowMillis() + int64(rng.IntN(400)))
				}
				ms := bucket.NowMs(e)
				if ms > lwMask {
					t.Fatalf("NowMs %d past the scale", ms)
				}
				tick := ms*g + a27TickBase
				k := rng.IntN(nkeys)
				n := uint64(1 + rng.IntN(3))
				if e.TryUpdate(a27Key(k), float64(n), lim) {
					truth[k] = max(truth[k], tick) + n*u
				}
				for j := range nkeys {
					want := float64(0)
					if truth[j] > tick {
						want = float64(truth[j]-tick) / float64(u)
					}
					got := e.Query(a27Key(j))
					if got < want-1e-9 {
						t.Fatalf("op %d (ms %d): key %d reads %v below its true debt %v", op, ms, j, got, want)
					}
					if got > float64(span)/float64(u)+1e-9 {
						t.Fatalf("op %d (ms %d): key %d reads %v, above Max (a phantom)", op, ms, j, got)
					}
				}
			}
			if bucket.NowMs(e) != lwMask {
				t.Fatalf("the clock did not reach the end of the scale: %d", bucket.NowMs(e))
			}
		})
	}
}
