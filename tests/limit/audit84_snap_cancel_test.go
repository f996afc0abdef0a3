package limit_test

// Audit 84: a Reservation taken on a limiter before ReadFrom, cancelled
// after it, must not give tokens back into the restored state: the
// restored debts are the snapshot's, and the reservation's debit is not
// in them (limit doc, Reservation.Cancel: "a key is never given back
// more than its own reservation"; "Saving and restoring": the restored
// limiter decides as the never-stopped one would). The worst case is a
// restored entry bit for bit the one the reservation wrote (same seed,
// same debt, same instant). Until audit 84's fix the Buckets engine gave
// such a reservation back (the key read 5 tokens where the snapshot held
// 2); its Receipts now carry the engine's count of snapshot loads, as
// the sketch's do.

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

func TestAudit84SnapFixedCancelAfterRestore(t *testing.T) {
	for _, e := range audit84snapEngines() {
		for _, sameSeed := range []bool{true, false} {
			for _, took := range []int{3, 5} {
				t.Run(fmt.Sprintf("%v/sameSeed=%v/took=%d", e, sameSeed, took), func(t *testing.T) {
					clk := sketchtest.NewFakeClock()
					clk.Set(audit84snapT0)
					src := audit84snapNew(t, e, clk, limit.WithSeed(77))
					for range took {
						if !src.Allow("k") {
							t.Fatal("burst refused")
						}
					}
					var buf bytes.Buffer
					if _, err := src.WriteTo(&buf); err != nil {
						t.Fatal(err)
					}
					seed := uint64(77)
					if !sameSeed {
						seed = 78
					}
					dst := audit84snapNew(t, e, clk, limit.WithSeed(seed))
					r := dst.ReserveN(clk.Now(), "k", 3)
					if !r.OK() || r.Delay() != 0 {
						t.Fatalf("reservation: ok %v delay %v", r.OK(), r.Delay())
					}
					if _, err := dst.ReadFrom(&buf); err != nil {
						t.Fatal(err)
					}
					want := src.Tokens("k")
					if got := dst.Tokens("k"); got != want {
						t.Fatalf("restored: %v tokens, the original has %v", got, want)
					}
					r.Cancel()
					if got := dst.Tokens("k"); got > want+1e-9 {
						t.Fatalf("a reservation taken before ReadFrom, cancelled after it, gave %v tokens back: %v tokens, the snapshot had %v", got-want, got, want)
					}
					// And the decisions: as the original, step by step.
					for step := range 40 {
						if got, tw := dst.Allow("k"), src.Allow("k"); got != tw {
							t.Fatalf("step %d: restored %v, original %v", step, got, tw)
						}
						clk.Advance(17 * time.Millisecond)
					}
				})
			}
		}
	}
}
