package limit_test

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// "A Reservation is safe for concurrent use; Cancel is idempotent ...
// Only the first call does anything" (reserve.go): goroutines racing
// Cancel (and Delay) on each of several reservations of distinct keys
// give each back exactly once: every key reads as if never reserved
// (nothing else wrote it), not below (a double refund would leave it
// above its burst in tokens, or give back another key's debt).
func TestAudit78RacingCancelOnce(t *testing.T) {
	for _, e := range []limit.Engine{limit.Buckets, limit.CountMin} {
		t.Run(e.String(), func(t *testing.T) {
			sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
				clk := limittest.NewFakeClock()
				clk.Set(a78Start)
				l := limit.MustNew(10, 20, a78Opts(clk, e, 5, limit.WithMaxDebt(80))...)
				now := clk.Now()
				const keys = 12
				rs := make([]*limit.Reservation, keys)
				for i := range rs {
					k := fmt.Sprintf("c%d", i)
					l.AllowN(now, k, 1+i%5) // prior debt, kept
					rs[i] = l.ReserveN(now, k, 3+i%30)
					if !rs[i].OK() {
						t.Fatalf("reservation %d not OK", i)
					}
				}
				var wg sync.WaitGroup
				for g := range 6 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for j := range keys {
							r := rs[(j+g)%keys]
							_ = r.Delay()
							r.Cancel()
						}
					}()
				}
				wg.Wait()
				for i := range rs {
					k := fmt.Sprintf("c%d", i)
					if got, want := l.TokensAt(now, k), float64(20-(1+i%5)); math.Abs(got-want) > 1e-9 {
						t.Errorf("key %d: tokens %v after racing Cancels; want %v (the prior debt, the reservation given back once)", i, got, want)
					}
				}
			})
		})
	}
}

// Stats counting (stats.go): "every decision that commits counts once,
// in Admitted or in Denied, when it returns ... Reserve and ReserveN (by
// OK), Wait and WaitN (Admitted once they reserve ...; Denied on
// ErrAboveBurst and on a reservation refused ...) ... Peek, PeekN, Tokens
// and TokensAt ... count nothing ... A Tier's decisions count in its
// limiter's Stats". Raced over GOMAXPROCS, both engines; the counts must
// equal the callers' own tallies exactly.
func TestAudit78StatsExactUnderRace(t *testing.T) {
	for _, e := range []limit.Engine{limit.Buckets, limit.CountMin} {
		t.Run(e.String(), func(t *testing.T) {
			sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
				clk := limittest.NewFakeClock()
				clk.Set(a78Start)
				l := limit.MustNew(10, 20, a78Opts(clk, e, 9, limit.WithMaxDebt(80))...)
				tr, err := l.Tier("slow", 5, 10)
				if err != nil {
					t.Fatal(err)
				}
				var adm, den atomic.Int64
				tally := func(ok bool) {
					if ok {
						adm.Add(1)
					} else {
						den.Add(1)
					}
				}
				var wg sync.WaitGroup
				for g := range 4 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						now := clk.Now()
						for i := range 60 {
							k := fmt.Sprintf("s%d", (g*7+i)%9)
							switch i % 9 {
							case 0:
								tally(l.Allow(k))
							case 1:
								tally(tr.AllowN(now, k, 1+i%3))
							case 2:
								tally(l.DecideN(now, k, 1+i%25).Allowed)
							case 3:
								r := tr.ReserveN(now, k, 1+i%12)
								tally(r.OK())
								if i%2 == 0 {
									r.Cancel()
								}
							case 4:
								tally(l.Reserve(k).OK())
							case 5:
								// A WaitN that needs no wait or is refused
								// (above the burst, past MaxDebt).
								// A deadline at the clock's reading: no wait
								// allowed, so refused (counted denied) unless
								// the tokens are there now.
								ctx := a78Ctx{Context: context.Background(), dl: now}
								err := l.WaitN(ctx, k, 1+i%22)
								tally(err == nil)
							case 6:
								d, _ := tr.DecideContext(context.Background(), k, 1)
								tally(d.Allowed)
							case 7:
								l.PeekN(now, k, 1)
								tr.Peek(k)
								l.TokensAt(now, k)
								tr.Tokens(k)
							case 8:
								// A context already done: nothing counted.
								ctx, cancel := context.WithCancel(context.Background())
								cancel()
								_ = l.WaitN(ctx, k, 1)
							}
						}
					}()
				}
				wg.Wait()
				st := l.Stats()
				if st.Admitted != uint64(adm.Load()) || st.Denied != uint64(den.Load()) {
					t.Errorf("Stats admitted %d denied %d; callers counted %d and %d", st.Admitted, st.Denied, adm.Load(), den.Load())
				}
				_ = time.Second
			})
		})
	}
}

// "ReserveN ignores the decision mode: it always decides with TryUpdate
// (strict), so queued reservations never exceed MaxDebt" (reserve.go),
// and a Multi "always decides strictly" (multi.go): on optimistic
// limiters (WithStrict(false)), racing ReserveN at a frozen clock is OK
// for at most MaxDebt tokens (exactly MaxDebt on the count-min), and a
// racing Multi admits at most the smaller burst.
func TestAudit78OptimisticReserveAndMultiStayStrict(t *testing.T) {
	for _, e := range []limit.Engine{limit.Buckets, limit.CountMin} {
		t.Run(e.String(), func(t *testing.T) {
			sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
				clk := limittest.NewFakeClock()
				clk.Set(a78Start)
				l := limit.MustNew(10, 20, a78Opts(clk, e, 4, limit.WithStrict(false), limit.WithMaxDebt(50))...)
				w2 := limit.MustNew(10, 12, a78Opts(clk, e, 6, limit.WithStrict(false))...)
				m, _ := limit.NewMulti(l, w2)
				var ok, madm atomic.Int64
				var wg sync.WaitGroup
				now := clk.Now()
				for range 6 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := range 15 {
							if l.ReserveN(now, "q", 1).OK() {
								ok.Add(1)
							}
							if m.AllowN(now, fmt.Sprintf("m%d", i%2), 1) {
								madm.Add(1)
							}
						}
					}()
				}
				wg.Wait()
				if got := ok.Load(); got > 50 || (e == limit.CountMin && got != 50) {
					t.Errorf("optimistic limiter: %d racing ReserveN(1) OK; MaxDebt 50 (ReserveN is always strict)", got)
				}
				if got := madm.Load(); got > 24 {
					t.Errorf("Multi of optimistic windows admitted %d on two keys; at most 12 each (a Multi always decides strictly)", got)
				}
			})
		})
	}
}
