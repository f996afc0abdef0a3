package limit_test

import (
	"fmt"
	"testing"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// Stop 46: a Multi's count-min windows hold their reservation receipts
// inline (first two generations); the refund of a denied decision must
// still give every earlier window its take back, for 2 and 3 generations
// and for 4 and 5 windows, across a rotation.
func TestAudit64Stop46MultiRefund(t *testing.T) {
	for _, gens := range []uint32{2, 3} {
		for _, nw := range []int{2, 4, 5} {
			t.Run(fmt.Sprintf("gens=%d/windows=%d", gens, nw), func(t *testing.T) {
				clk := sketchtest.NewFakeClock()
				var ws []*limit.Limiter
				for i := 0; i < nw; i++ {
					b := 5
					if i == nw-1 {
						b = 3 // the last window denies
					}
					ws = append(ws, limit.MustNew(1, b, limit.WithClock(clk), limit.WithName(fmt.Sprint("w", i)),
						limit.WithEngine(limit.CountMin), limit.WithSize(4, 1024), limit.WithGenerations(gens)))
				}
				m, err := limit.NewMulti(ws...)
				if err != nil {
					t.Fatal(err)
				}
				last := ws[nw-1]
				for round := 0; round < 3; round++ {
					key := fmt.Sprint("k", round)
					for i := 0; i < 3; i++ {
						if !last.Allow(key) {
							t.Fatal("last window's own burst")
						}
					}
					for i := 0; i < 10; i++ {
						if d := m.DecideKeys(clk.Now(), 1, key); d.Allowed {
							t.Fatalf("Multi admitted with the last window spent: %+v", d)
						}
					}
					for i, w := range ws[:nw-1] {
						if tok := w.Tokens(key); tok != 5 {
							t.Fatalf("round %d: window %d Tokens %v after 10 denied Multi decisions, want 5 (its takes refunded)", round, i, tok)
						}
					}
					clk.Advance(ws[0].Period()) // a rotation between rounds
				}
			})
		}
	}
}
