package limit_test

// Audit 4: Reservation.Cancel racing other requests.
//
// Reservation.Cancel: "Cancel gives the reservation back, all or nothing
// per cell: a cell of the key that no other request has written since
// the reservation gets its previous value back (the key reads as if the
// reservation had never been taken, the part drained since included),
// and with the count-min so does one written since only within the same
// millisecond, below MaxDebt; any other cell keeps the debit, on the
// safe side (a key is never given back more than its own reservation
// ...). The Buckets engine's cell is the key's entry: it is given back
// exactly when nothing has written it since (no request of the key, nor
// of a key sharing its fingerprint and a line), and otherwise keeps the
// debit, within the same millisecond too ... A Reservation is safe for
// concurrent use; Cancel is idempotent ... Only the first call does
// anything." Stats: "a Reservation's Cancel ... gives tokens back but
// does not uncount".

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit4CancelRaceShared: goroutines race on three shared keys at one
// frozen millisecond: reservations of the Limiter and of a Tier, AllowN
// and DecideN of both, and Cancels of reservations taken by any
// goroutine (some cancelled by two goroutines at once). With kept the
// admitted costs minus the cancelled reservations' (each counted once),
// and every take below MaxDebt:
//
//   - on the count-min every Cancel is in the same millisecond below
//     MaxDebt, so it gives back exactly: the key's debt is kept, exactly;
//   - on Buckets a Cancel gives back its reservation or nothing: the
//     debt is within [kept, kept + cancelled], never below kept.
//
// Stats counts every decision once, whatever was cancelled.
func TestAudit4CancelRaceShared(t *testing.T) {
	a4procs(t, func(t *testing.T, procs int, e limit.Engine) {
		clk := sketchtest.NewFakeClock()
		clk.Set(1 << 35)
		// 10/s burst 20; MaxDebt 600 tokens = 60 s (within the Buckets
		// engine's 61.4 s), far above what a round can take (384 tokens).
		l, err := limit.New(10, 20, append(a4opts(e, 21), limit.WithClock(clk), limit.WithMaxDebt(600))...)
		if err != nil {
			t.Fatal(err)
		}
		probe, _ := l.Tier("probe", 10, 1)
		tier, _ := l.Tier("slow", 5, 10) // 200 ms a token
		type res struct {
			r   *limit.Reservation
			key int
			c   int64
		}
		var tally a4tally
		rng := rand.New(rand.NewPCG(uint64(procs), 8))
		const G, per, rounds, nkeys = 8, 12, 16, 3
		cancelledAny := false
		for round := range rounds {
			now := clk.Now()
			keys := a4keys(fmt.Sprint("cr", round), nkeys)
			var mu sync.Mutex
			var pool []res
			cancelled := map[*limit.Reservation]bool{}
			var cancelledMs [nkeys]int64
			var admitted [nkeys]int64
			seeds := make([]uint64, G)
			for g := range seeds {
				seeds[g] = rng.Uint64()
			}
			a4race(G, func(g int) {
				r := rand.New(rand.NewPCG(seeds[g], 9))
				for range per {
					runtime.Gosched()
					k := r.IntN(nkeys)
					n := 1 + r.IntN(2)
					useTier := r.IntN(2) == 0
					tok := int64(100)
					if useTier {
						tok = 200
					}
					c := int64(n) * tok
					switch r.IntN(4) {
					case 0, 1:
						var rv *limit.Reservation
						if useTier {
							rv = tier.ReserveN(now, keys[k], n)
						} else {
							rv = l.ReserveN(now, keys[k], n)
						}
						tally.add(rv.OK())
						if !rv.OK() {
							t.Errorf("a reservation far below MaxDebt refused")
							return
						}
						mu.Lock()
						admitted[k] += c
						pool = append(pool, res{rv, k, c})
						mu.Unlock()
					case 2:
						mu.Lock()
						if len(pool) == 0 {
							mu.Unlock()
							continue
						}
						i := r.IntN(len(pool))
						x := pool[i]
						if r.IntN(3) != 0 {
							pool = append(pool[:i], pool[i+1:]...)
						} // else: left in the pool, to be cancelled again
						first := !cancelled[x.r]
						if first {
							cancelled[x.r] = true
							cancelledMs[x.key] += x.c
						}
						mu.Unlock()
						x.r.Cancel()
						x.r.Cancel() // idempotent
					default:
						var ok bool
						if useTier {
							ok = tier.DecideN(now, keys[k], n).Allowed
						} else {
							ok = l.AllowN(now, keys[k], n)
						}
						tally.add(ok)
						if ok {
							mu.Lock()
							admitted[k] += c
							mu.Unlock()
						}
					}
				}
			})
			if t.Failed() {
				t.FailNow()
			}
			for k, key := range keys {
				kept := admitted[k] - cancelledMs[k]
				got := a4debt(probe, now, key)
				hi := kept
				if e == limit.Buckets {
					hi += cancelledMs[k]
				}
				if got < kept || got > hi {
					t.Fatalf("round %d key %d: debt %d ms, want within [%d, %d] (admitted %d ms, cancelled %d ms)", round, k, got, kept, hi, admitted[k], cancelledMs[k])
				}
				cancelledAny = cancelledAny || cancelledMs[k] > 0
			}
			clk.Advance(time.Duration(rng.IntN(500)) * time.Millisecond)
		}
		if !cancelledAny {
			t.Fatal("nothing was cancelled")
		}
		a4checkStats(t, "Limiter", l.Stats(), &tally)
	})
}

// TestAudit4CancelOwnKeyExact: each goroutine drives a key of its own
// (Reserve through the Limiter or a Tier, AllowN, DecideN, Cancel of its
// latest reservation, a second Cancel, Peek) while the others drive
// theirs, in engines of the default size, round after round with the
// clock moving between rounds (sometimes by 9 to 39 s: every debt
// drains). (In a Buckets engine of two lines, where every key shares
// both lines with every other, this test fails now and then for the
// reason TestAudit4BucketsIdleLineRace isolates, not for Cancel's.) No request of a
// key comes between its latest reservation and that reservation's
// Cancel (possibly rounds later), so the doc promises the exact undo:
// the key reads as if the reservation had never been taken, the part
// drained since included. Every step is checked against the key's exact
// bucket in time form: admissions, RetryAfter, each reservation's OK and
// Delay, and the key's debt after every step.
func TestAudit4CancelOwnKeyExact(t *testing.T) {
	a4procs(t, func(t *testing.T, procs int, e limit.Engine) {
		clk := sketchtest.NewFakeClock()
		clk.Set(1 << 34)
		l, err := limit.New(10, 20, append(a4opts(e, 33), limit.WithClock(clk), limit.WithMaxDebt(80))...)
		if err != nil {
			t.Fatal(err)
		}
		probe, _ := l.Tier("probe", 10, 1)
		tier, _ := l.Tier("slow", 5, 10) // 200 ms a token, 2000 ms burst
		const maxDebt = 8000
		const G, rounds, per = 8, 30, 8
		base, slow := a4polOf(10, 20), a4polOf(5, 10)
		type pend struct {
			r      *limit.Reservation
			before int64 // the key's zero time before it (ms)
		}
		type state struct {
			zero    int64 // the key's debt drains to 0 at this ms
			top     *pend // the latest reservation, if nothing was written since
			rng     *rand.Rand
			cancels int
			log     []string // the key's latest steps, for a failure's message
		}
		st := make([]state, G)
		for g := range st {
			st[g].rng = rand.New(rand.NewPCG(uint64(procs), uint64(g)))
		}
		var tally a4tally
		for round := range rounds {
			now, nowMs := clk.Now(), clk.NowMillis()
			a4race(G, func(g int) {
				s := &st[g]
				key := fmt.Sprint("own-", g)
				debt := func() int64 { return max(s.zero-nowMs, 0) }
				fail := func(format string, args ...any) {
					t.Errorf("round %d key %s (debt %d ms): %s; its latest steps: %v", round, key, debt(), fmt.Sprintf(format, args...), s.log)
				}
				logf := func(format string, args ...any) {
					s.log = append(s.log, fmt.Sprintf("@%d ", nowMs-(1<<34))+fmt.Sprintf(format, args...))
					if len(s.log) > 12 {
						s.log = s.log[1:]
					}
				}
				for i := range per {
					if i%2 == 0 {
						runtime.Gosched()
					}
					n := 1 + s.rng.IntN(3)
					switch op := s.rng.IntN(6); op {
					case 0, 1: // reserve
						p, rv := base, (*limit.Reservation)(nil)
						if op == 1 {
							p, rv = slow, tier.ReserveN(now, key, n)
						} else {
							rv = l.ReserveN(now, key, n)
						}
						tally.add(rv.OK())
						c := int64(n) * p.tok
						if want := debt()+c <= maxDebt; rv.OK() != want {
							fail("reservation of %d ms: OK %v, want %v", c, rv.OK(), want)
							return
						}
						if !rv.OK() {
							logf("reserve %d ms refused", c)
							continue
						}
						if got, want := a4ms(rv.DelayFrom(now)), max(debt()+c-p.cap, 0); got != want {
							fail("reservation of %d ms: Delay %d ms, want %d", c, got, want)
							return
						}
						s.top = &pend{r: rv, before: s.zero}
						s.zero = max(s.zero, nowMs) + c
						logf("reserve %d ms (zero %d)", c, s.zero-(1<<34))
					case 2: // admit
						p := base
						var d limit.Decision
						if s.rng.IntN(2) == 0 {
							p, d = slow, tier.DecideN(now, key, n)
						} else {
							d = l.DecideN(now, key, n)
						}
						tally.add(d.Allowed)
						c := int64(n) * p.tok
						want := debt()+c <= p.cap
						hi := debt()
						if want {
							hi += c // an admission's ResetAfter reads the debt after it
						}
						if err := a4checkDecision(a4rec{key: g, n: n, ok: want, pol: p, d: d}, debt(), hi); err != nil {
							fail("%v", err)
							return
						}
						if d.Allowed {
							s.zero = max(s.zero, nowMs) + c
							s.top = nil // written since: its Cancel is no longer exact
						}
						logf("decide %d ms: %v (zero %d)", c, d.Allowed, s.zero-(1<<34))
					case 3, 4: // cancel the latest reservation: exact
						if s.top == nil {
							logf("cancel: none")
							continue
						}
						s.top.r.Cancel()
						s.zero = s.top.before
						logf("cancel (zero %d)", s.zero-(1<<34))
						s.cancels++
						if op == 4 {
							s.top.r.Cancel() // only the first call does anything
						}
						s.top = nil
					default:
						logf("peek")
						if d := l.PeekN(now, key, 1); d.Allowed != (debt()+base.tok <= base.cap) {
							fail("Peek %+v", d)
							return
						}
					}
					if got := a4debt(probe, now, key); got != debt() {
						fail("debt %d ms after step %d, want %d", got, i, debt())
						return
					}
				}
			})
			if t.Failed() {
				t.FailNow()
			}
			gap := st[0].rng.Int64N(1500)
			if round%6 == 5 {
				// a long idle gap between a reservation and its Cancel:
				// every debt drains (MaxDebt is 8 s)
				gap = 9000 + st[0].rng.Int64N(30000)
			}
			clk.Advance(time.Duration(gap) * time.Millisecond)
		}
		total := 0
		for _, s := range st {
			total += s.cancels
		}
		if total < G*rounds/4 {
			t.Fatalf("only %d exact cancels", total)
		}
		a4checkStats(t, "Limiter", l.Stats(), &tally)
	})
}
