package limit_test

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// Reservations of one key racing on a frozen clock, half of them
// cancelled at once, on count-min limiters of 2..8 generations: every
// Cancel lands in the reservation's millisecond below MaxDebt, which
// Reservation.Cancel gives back on the count-min even when other
// requests wrote the cells since ("with the count-min so does one
// written since only within the same millisecond, below MaxDebt"). So
// the key ends owing exactly the reservations kept (the receipts of
// generations 2 and later, held apart from the first two, raced too).
func TestAudit59RacingReserveCancelExact(t *testing.T) {
	for _, g := range []uint32{2, 3, 8} {
		t.Run(fmt.Sprintf("G=%d", g), func(t *testing.T) {
			sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
				clk := limittest.NewFakeClock()
				clk.Set(a59Start)
				l := limit.MustNew(10, 100, limit.WithClock(clk), limit.WithSeed(2), limit.WithGenerations(g))
				const workers, each = 4, 15
				var kept atomic.Int64
				var wg sync.WaitGroup
				for w := range workers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := range each {
							n := 1 + (w+i)%3
							r := l.ReserveN(clk.Now(), "k", n)
							if !r.OK() {
								t.Errorf("ReserveN(%d) not OK below MaxDebt", n)
								return
							}
							if (w+i)%2 == 0 {
								r.Cancel()
							} else {
								kept.Add(int64(n))
							}
						}
					}()
				}
				wg.Wait()
				want := 100 - float64(kept.Load())
				if got := l.TokensAt(clk.Now(), "k"); got != want {
					t.Errorf("tokens %v after racing reserve/cancel in one ms; want %v (burst 100 - %d kept)", got, want, kept.Load())
				}
			})
		})
	}
}

// Strict decisions racing on one key at a frozen clock admit exactly the
// burst on an exact count-min (package doc: "Under contention on one
// key, strict decisions never admit past the burst"; the count-min's
// TryUpdate is exact), for 2..8 generations, and never past it on
// Buckets.
func TestAudit59RacingAllowExactCount(t *testing.T) {
	for _, w := range []a59Window{{limit.CountMin, 2}, {limit.CountMin, 3}, {limit.CountMin, 8}, {limit.Buckets, 0}} {
		t.Run(w.String(), func(t *testing.T) {
			sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
				clk := limittest.NewFakeClock()
				clk.Set(a59Start)
				l := limit.MustNew(10, 60, w.opts(clk)...)
				var admitted atomic.Int64
				var wg sync.WaitGroup
				for range 6 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for range 30 {
							if l.AllowN(clk.Now(), "k", 1) {
								admitted.Add(1)
							}
						}
					}()
				}
				wg.Wait()
				got := admitted.Load()
				if got > 60 || (w.engine == limit.CountMin && got != 60) {
					t.Errorf("admitted %d of 180 racing requests; burst 60", got)
				}
			})
		})
	}
}

// A Multi over mixed engines and generation counts, raced on one key
// (and on two keys of one colliding count-min window) at a frozen
// clock: it never admits more than the smallest burst, and every window
// owes at least what the Multi admitted (a refund never gives back more
// than the denied request's take).
func TestAudit59RacingMultiNeverOverAdmits(t *testing.T) {
	for _, mix := range a59Mixes {
		t.Run(fmt.Sprintf("%v", mix), func(t *testing.T) {
			sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
				clk := limittest.NewFakeClock()
				clk.Set(a59Start)
				bursts := [3]int{40, 25, 30}
				var ws [3]*limit.Limiter
				for i, w := range mix {
					ws[i] = limit.MustNew(10, bursts[i], w.opts(clk, limit.WithRejectCost(0))...)
				}
				m, _ := limit.NewMulti(ws[:]...)
				var admitted atomic.Int64
				var wg sync.WaitGroup
				for g := range 6 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := range 20 {
							n := 1 + (g+i)%2
							if m.AllowN(clk.Now(), "k", n) {
								admitted.Add(int64(n))
							}
						}
					}()
				}
				wg.Wait()
				got := admitted.Load()
				if got > 25 {
					t.Errorf("Multi admitted %d tokens; smallest burst 25", got)
				}
				for i, w := range ws {
					if tok := w.TokensAt(clk.Now(), "k"); tok > float64(bursts[i])-float64(got) {
						t.Errorf("window %d (%v): %v tokens left; admitted %d of burst %d", i, mix[i], tok, got, bursts[i])
					}
				}
			})
		})
	}
}

// ReserveN's doc: "reservations of one key racing with each other get
// exactly the delays of a serial order, as x/time/rate's". Racing
// ReserveN(1) of one key at a frozen clock (burst 10 at 10/s, MaxDebt
// 100): the Delays, sorted, are exactly 0 (ten times), 100 ms, 200 ms,
// ..., on count-mins of 2, 3 and 8 generations; on Buckets, when every
// reservation is OK (its racing writes may rarely refuse one), too.
func TestAudit59RacingReserveSerialDelays(t *testing.T) {
	for _, w := range []a59Window{{limit.CountMin, 2}, {limit.CountMin, 3}, {limit.CountMin, 8}, {limit.Buckets, 0}} {
		t.Run(w.String(), func(t *testing.T) {
			sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
				clk := limittest.NewFakeClock()
				clk.Set(a59Start)
				l := limit.MustNew(10, 10, w.opts(clk, limit.WithMaxDebt(100))...)
				const workers, each = 4, 20
				var mu sync.Mutex
				var delays []time.Duration
				var notOK atomic.Int64
				var wg sync.WaitGroup
				for range workers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for range each {
							r := l.ReserveN(clk.Now(), "k", 1)
							if !r.OK() {
								notOK.Add(1)
								continue
							}
							d := r.DelayFrom(clk.Now())
							mu.Lock()
							delays = append(delays, d)
							mu.Unlock()
						}
					}()
				}
				wg.Wait()
				if notOK.Load() > 0 {
					if w.engine == limit.CountMin {
						t.Fatalf("%d reservations not OK below MaxDebt", notOK.Load())
					}
					t.Logf("%d not OK (Buckets' racing writes); delays not checked", notOK.Load())
					return
				}
				slices.Sort(delays)
				for i, d := range delays {
					want := time.Duration(max(0, i+1-10)) * 100 * time.Millisecond
					if d != want {
						t.Fatalf("sorted delay %d: %v; want %v (a serial order's); all: %v", i, d, want, delays)
					}
				}
			})
		})
	}
}

// Reservations of one key cancelled while the key's own requests race
// them, at a frozen clock: Cancel never gives back more than the
// reservation ("a key is never given back more than its own
// reservation"), on Buckets (whose large reservations come back in steps
// that a racing request may interleave) and count-mins of 2, 3 and 8
// generations. So the racing admissions never pass the burst, and the
// key ends owing at least what they took.
func TestAudit59RacingCancelNeverOverRefunds(t *testing.T) {
	for _, w := range []a59Window{{limit.Buckets, 0}, {limit.CountMin, 2}, {limit.CountMin, 3}, {limit.CountMin, 8}} {
		t.Run(w.String(), func(t *testing.T) {
			sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
				clk := limittest.NewFakeClock()
				clk.Set(a59Start)
				l := limit.MustNew(10, 20, w.opts(clk)...)
				var admitted atomic.Int64
				var wg sync.WaitGroup
				for g := range 2 {
					wg.Add(1)
					go func() { // reservers: take and give back
						defer wg.Done()
						for i := range 300 {
							if r := l.ReserveN(clk.Now(), "k", 3+(g+i)%13); r.OK() {
								r.Cancel()
							}
						}
					}()
				}
				for range 2 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for range 300 {
							if l.AllowN(clk.Now(), "k", 1) {
								admitted.Add(1)
							}
						}
					}()
				}
				wg.Wait()
				got := admitted.Load()
				if got > 20 {
					t.Errorf("admitted %d one-token requests at a frozen clock; burst 20", got)
				}
				if tok := l.TokensAt(clk.Now(), "k"); tok > 20-float64(got) {
					t.Errorf("%v tokens left after %d admissions and only cancelled reservations; want <= %v", tok, got, 20-float64(got))
				}
			})
		})
	}
}

// Strict decisions of one key racing while the fake clock crosses
// Period boundaries (count-mins of 2, 3 and 8 generations at the
// shortest Period New accepts), within the first (G-1) periods, where no
// primary can have missed a write (every generation built by New saw
// the key from its first request): with more requests than the bucket
// refills at every step, the admissions are exactly the bucket's,
// burst + floor(rate x elapsed) (package doc: strict decisions are exact
// under contention; the count-min is exact for a key alone).
func TestAudit59RacingAcrossPromotionsNeverOverAdmits(t *testing.T) {
	for _, g := range []uint32{2, 3, 8} {
		t.Run(fmt.Sprintf("G=%d", g), func(t *testing.T) {
			sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
				clk := limittest.NewFakeClock()
				clk.Set(a59Start)
				p := a59Period(g)
				l := limit.MustNew(10, 20, limit.WithClock(clk), limit.WithGenerations(g), limit.WithPeriod(p))
				span := int64(g-1)*p.Milliseconds() - 2 // ms
				var admitted atomic.Int64
				// Each 7 ms step: three goroutines race two requests each.
				for clk.NowMillis()+7 <= a59Start+span {
					var wg sync.WaitGroup
					for range 3 {
						wg.Add(1)
						go func() {
							defer wg.Done()
							for range 2 {
								if l.AllowN(clk.Now(), "k", 1) {
									admitted.Add(1)
								}
							}
						}()
					}
					wg.Wait()
					clk.Advance(7 * time.Millisecond)
				}
				// The last requests were at the reading before the last Advance.
				elapsed := clk.NowMillis() - 7 - a59Start
				want := 20 + 10*elapsed/1000
				if got := admitted.Load(); got != want {
					t.Errorf("admitted %d over %d ms (promotions every %v); the exact bucket admits %d (burst 20 + 10/s)", got, elapsed, p, want)
				}
			})
		})
	}
}
