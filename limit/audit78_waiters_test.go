package limit_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// Waiters racing WaitN(1) on one emptied key (10/s, burst 1) at a frozen
// fake clock get a serial order's waits (reserve.go: "reservations of
// one key racing with each other get exactly the delays of a serial
// order"; WaitN "blocks until n tokens for key are available"): with the
// clock stepped 1 ms at a time, no more than k of them have returned
// before 100k ms, and exactly k have by then.
func TestAudit78WaitersSerialRelease(t *testing.T) {
	for _, e := range []limit.Engine{limit.Buckets, limit.CountMin} {
		t.Run(e.String(), func(t *testing.T) {
			sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
				clk := limittest.NewFakeClock()
				clk.Set(a78Start)
				l := limit.MustNew(10, 1, a78Opts(clk, e, 8, limit.WithMaxDebt(10))...)
				if !l.Allow("w") {
					t.Fatal("first Allow denied")
				}
				const G = 6
				var done atomic.Int64
				res := make(chan error, G)
				for range G {
					go func() {
						err := l.WaitN(context.Background(), "w", 1)
						done.Add(1)
						res <- err
					}()
				}
				clk.BlockUntilTimers(G)
				got := 0
				for ms := 1; ms <= G*100; ms++ {
					clk.Advance(time.Millisecond)
					if ms%100 == 0 {
						for got < ms/100 {
							if err := <-res; err != nil {
								t.Fatalf("WaitN: %v", err)
							}
							got++
						}
					}
					if d := done.Load(); d > int64(ms/100) {
						t.Fatalf("%d waiters returned by %d ms; at most %d may (a token each 100 ms)", d, ms, ms/100)
					}
				}
				if tk := l.Tokens("w"); tk != 0 {
					t.Errorf("tokens %v after %d waits; want 0", tk, G)
				}
			})
		})
	}
}
