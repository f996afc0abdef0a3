package limit_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// TestAudit89ReserveNearFloat32MaxDebt: reservations at a count-min
// MaxDebt that no float32 holds in units (audit 67's inexact rates, with
// MaxDebt = burst above 65,536 tokens, where a key at MaxDebt is held at
// the float32 above it): ReserveN of burst-1 and of the whole burst on an
// empty key are OK with Delay 0 ("a full burst is admitted at once from
// an empty key"); a Cancel with nothing written since gives burst-1 back
// whole (the key reads as a fresh key: "as if the reservation had never
// been taken"), and keeps the burst's, which filled the key to MaxDebt
// ("never given back (either engine)"; its Delay is that of a key at
// the clamp, late by less than 2^-23 of MaxDebt's drain: 40 ms at
// 0.944/s, 32.8 s at 5.6e-4/s); n = burst + 1 is not OK and debits
// nothing; WaitN of burst-1 on an empty key returns at once. A key's
// debt never reads below what it was given.
func TestAudit89ReserveNearFloat32MaxDebt(t *testing.T) {
	for _, c := range []struct {
		r limit.Limit
		b int
	}{{0.9444444444444444, 958687}, {3.4977583072838137, 535500}, {0.0005581315387422752, 1040836}} {
		t.Run(fmt.Sprint(c.r), func(t *testing.T) {
			clk := limittest.NewFakeClock()
			clk.Set(1_000_000)
			l := limit.MustNew(c.r, c.b, limit.WithClock(clk), limit.WithSeed(1), limit.WithMaxDebt(float64(c.b)))
			if l.Engine() != limit.CountMin {
				t.Fatalf("runs on %v", l.Engine())
			}
			now := clk.Now()
			fresh := l.PeekN(now, "fresh", 1)
			r := l.ReserveN(now, "a", c.b-1)
			if !r.OK() || r.Delay() != 0 {
				t.Fatalf("ReserveN(burst-1) on an empty key: OK %v Delay %v", r.OK(), r.Delay())
			}
			if tok := l.TokensAt(now, "a"); tok > 1 || tok < 0 {
				t.Errorf("after ReserveN(burst-1): tokens %v, want in [0, 1] (never above the truth)", tok)
			}
			r.Cancel()
			if got := l.PeekN(now, "a", 1); got != fresh {
				t.Errorf("Cancel of ReserveN(burst-1): %+v, want a fresh key's %+v", got, fresh)
			}
			// The whole burst fills MaxDebt: the key reads at the clamp,
			// whose durations "may be late by up to that step's drain,
			// less than 2^-23 of MaxDebt's" (doc.go, "Exactness").
			full := l.ReserveN(now, "b", c.b)
			bound := time.Duration(float64(c.b) / float64(c.r) * float64(time.Second) / (1 << 23))
			if !full.OK() || full.Delay() > bound {
				t.Fatalf("ReserveN(burst) on an empty key: OK %v Delay %v, want at most %v", full.OK(), full.Delay(), bound)
			}
			full.Cancel()
			if d := l.PeekN(now, "b", 1); d.Allowed || d.Remaining != 0 {
				t.Errorf("Cancel of a reservation that filled MaxDebt gave back: %+v", d)
			}
			if over := l.ReserveN(now, "c", c.b+1); over.OK() {
				t.Errorf("ReserveN(burst+1) OK")
			}
			if got := l.PeekN(now, "c", 1); got != fresh {
				t.Errorf("a refused ReserveN(burst+1) debited: %+v", got)
			}
			errc := make(chan error, 1)
			go func() { errc <- l.WaitN(context.Background(), "d", c.b-1) }()
			err, returned := a89rsTimerOrResult(clk, errc)
			if !returned {
				clk.Advance(time.Hour) // release it
				err = <-errc
			}
			if !returned || err != nil {
				t.Errorf("WaitN(burst-1) on an empty key: %v, waited %v; want nil at once", err, !returned)
			}
			if d := l.PeekN(now, "d", 2); d.Allowed || d.Remaining != 0 {
				t.Errorf("after WaitN(burst-1): %+v, want room for 1 at most", d)
			}
		})
	}
}
