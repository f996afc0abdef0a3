package limit_test

// Audit 7: Reservation.Cancel and the durations read around it, on both
// engines, with fake clocks.
//
// limit/doc.go, Reservation.Cancel: "Cancel gives the reservation back,
// all or nothing per cell: a cell of the key that no other request has
// written since the reservation gets its previous value back (the key
// reads as if the reservation had never been taken, the part drained
// since included), and with the count-min so does one written since
// only within the same millisecond, below MaxDebt; any other cell keeps
// the debit, on the safe side (a key is never given back more than its
// own reservation, nor anything of another key's ...). The Buckets
// engine's cell is the key's entry: it is given back exactly when
// nothing has written it since ..., and otherwise keeps the debit,
// within the same millisecond too ... Only the first call does
// anything." Reservation: "Cancel is idempotent." OK: "A Reservation
// that is not OK has Delay InfDuration and Cancel does nothing."
//
// Every limiter here is 10/s (a token is 100 ms), exact on both engines,
// with one key (or a handful) in a default-sized engine: a key alone in
// its cells, so every reading is the exact bucket's (doc.go,
// "Exactness").

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

func a7each(t *testing.T, f func(t *testing.T, e limit.Engine)) {
	for _, e := range []limit.Engine{limit.Buckets, limit.CountMin} {
		t.Run(e.String(), func(t *testing.T) { f(t, e) })
	}
}

// a7new builds a 10/s limiter of the given burst and MaxDebt on engine
// e, with a fake clock at a fixed instant.
func a7new(t *testing.T, e limit.Engine, burst, maxDebt int) (*limit.Limiter, *sketchtest.FakeClock) {
	t.Helper()
	clk := sketchtest.NewFakeClock()
	clk.Set(1 << 36)
	o := []limit.Option{limit.WithEngine(e), limit.WithSeed(7), limit.WithClock(clk), limit.WithMaxDebt(float64(maxDebt))}
	if e == limit.CountMin {
		o = append(o, limit.WithPeriod(10*365*24*time.Hour))
	}
	l, err := limit.New(10, burst, o...)
	if err != nil {
		t.Fatal(err)
	}
	if !l.Exact() || l.Engine() != e {
		t.Fatalf("limiter not exact on %v", e)
	}
	return l, clk
}

// a7debt reads key's debt in ms at the clock's reading without writing:
// PeekN for the whole burst is admitted iff the debt is 0, and otherwise
// its RetryAfter is the time for the debt to drain to 0.
func a7debt(t *testing.T, l *limit.Limiter, key string) time.Duration {
	t.Helper()
	d := l.PeekN(l.Now(), key, l.Burst())
	if d.Allowed {
		return 0
	}
	if d.Never || d.RetryAfter%time.Millisecond != 0 {
		t.Fatalf("bad peek %+v", d)
	}
	return d.RetryAfter
}

const a7tok = 100 * time.Millisecond

// TestAudit7CancelLaterWrite: a Cancel after another request of the same
// key wrote its cell in a later millisecond keeps the debit (either
// engine); one after a write in the same millisecond gives it back on
// the count-min and keeps it on Buckets. x/time/rate would give back
// the tokens no later reservation used; the doc says it does not.
func TestAudit7CancelLaterWrite(t *testing.T) {
	a7each(t, func(t *testing.T, e limit.Engine) {
		for _, sameMs := range []bool{false, true} {
			l, clk := a7new(t, e, 20, 400)
			k := "later"
			r := l.ReserveN(l.Now(), k, 5) // debt 500 ms
			if !r.OK() || r.Delay() != 0 {
				t.Fatalf("reserve: ok %v delay %v", r.OK(), r.Delay())
			}
			if !sameMs {
				clk.Advance(10 * time.Millisecond)
			}
			if !l.AllowN(l.Now(), k, 2) { // debt 690 or 700 ms
				t.Fatal("allow denied")
			}
			before := a7debt(t, l, k)
			r.Cancel()
			after := a7debt(t, l, k)
			want := before
			if sameMs && e == limit.CountMin {
				want = 2 * a7tok // as if only the AllowN had happened
			}
			if after != want {
				t.Errorf("sameMs=%v: debt %v before Cancel, %v after; want %v", sameMs, before, after, want)
			}
			// And RetryAfter of a full-burst request says exactly when it is admitted.
			d := l.DecideN(l.Now(), k, 20)
			if d.Allowed || d.RetryAfter != after {
				t.Fatalf("decide %+v, debt %v", d, after)
			}
			clk.Advance(d.RetryAfter - time.Millisecond)
			if l.AllowN(l.Now(), k, 20) {
				t.Errorf("admitted 1 ms before RetryAfter")
			}
			clk.Advance(time.Millisecond)
			if !l.AllowN(l.Now(), k, 20) {
				t.Errorf("denied at RetryAfter")
			}
		}
	})
}

// TestAudit7CancelEdges: Cancel twice, Cancel of a refused reservation
// (n > burst, beyond MaxDebt), Cancel after the reservation's time (and
// its whole debt) has passed, Cancel with the clock set back before the
// reservation, and Cancel of a reservation at a stale t.
func TestAudit7CancelEdges(t *testing.T) {
	a7each(t, func(t *testing.T, e limit.Engine) {
		t.Run("twice", func(t *testing.T) {
			l, clk := a7new(t, e, 10, 40)
			a := l.ReserveN(l.Now(), "k", 4)
			b := l.ReserveN(l.Now(), "k", 3) // debt 700
			clk.Advance(50 * time.Millisecond)
			b.Cancel() // no write since b: back to a's 400, drained 50
			if got := a7debt(t, l, "k"); got != 350*time.Millisecond {
				t.Fatalf("after first Cancel: debt %v, want 350ms", got)
			}
			b.Cancel()
			b.Cancel()
			if got := a7debt(t, l, "k"); got != 350*time.Millisecond {
				t.Errorf("a second Cancel changed the debt to %v", got)
			}
			a.Cancel() // no write since a but b's (which was undone)
			got := a7debt(t, l, "k")
			if got != 0 && got != 350*time.Millisecond {
				t.Errorf("Cancel of a: debt %v, want 0 or 350ms", got)
			}
			a.Cancel()
			if got2 := a7debt(t, l, "k"); got2 != got {
				t.Errorf("second Cancel of a: %v -> %v", got, got2)
			}
		})
		t.Run("refused", func(t *testing.T) {
			l, _ := a7new(t, e, 10, 40)
			if !l.AllowN(l.Now(), "k", 5) {
				t.Fatal("denied")
			}
			for _, n := range []int{11, 36} { // above burst; beyond MaxDebt (5+36 > 40)
				r := l.ReserveN(l.Now(), "k", n)
				if r.OK() || r.Delay() != limit.InfDuration || r.DelayFrom(l.Now()) != limit.InfDuration {
					t.Fatalf("n=%d: ok %v delay %v", n, r.OK(), r.Delay())
				}
				r.Cancel()
				if got := a7debt(t, l, "k"); got != 5*a7tok {
					t.Errorf("n=%d: Cancel of a refused reservation: debt %v, want 500ms", n, got)
				}
			}
			var z limit.Reservation
			if z.OK() || z.Delay() != limit.InfDuration {
				t.Errorf("zero Reservation: ok %v delay %v", z.OK(), z.Delay())
			}
			z.Cancel()
		})
		t.Run("afterTime", func(t *testing.T) {
			l, clk := a7new(t, e, 10, 40)
			a := l.ReserveN(l.Now(), "k", 10)
			b := l.ReserveN(l.Now(), "k", 5) // debt 1500, acts at +500
			if b.Delay() != 500*time.Millisecond {
				t.Fatalf("delay %v", b.Delay())
			}
			clk.Advance(700 * time.Millisecond)
			if b.Delay() != 0 {
				t.Fatalf("delay after its time: %v", b.Delay())
			}
			b.Cancel() // as if never taken: 1000 - 700 = 300
			if got := a7debt(t, l, "k"); got != 300*time.Millisecond {
				t.Errorf("Cancel after its time: debt %v, want 300ms", got)
			}
			clk.Advance(2 * time.Second) // everything drained
			a.Cancel()
			if got := a7debt(t, l, "k"); got != 0 {
				t.Errorf("Cancel after full drain: debt %v, want 0", got)
			}
			if d := l.DecideN(l.Now(), "k", 10); !d.Allowed || d.Remaining != 0 {
				t.Errorf("full burst after drained cancel: %+v", d)
			}
		})
		t.Run("clockBack", func(t *testing.T) {
			l, clk := a7new(t, e, 10, 40)
			t0 := clk.NowMillis()
			if !l.AllowN(l.Now(), "k", 2) {
				t.Fatal("denied")
			}
			if q := l.ReserveN(l.Now(), "k", 8); !q.OK() || q.Delay() != 0 { // debt 1000
				t.Fatalf("ok %v delay %v", q.OK(), q.Delay())
			}
			r := l.ReserveN(l.Now(), "k", 4) // debt 1400, delay 400
			if !r.OK() || r.Delay() != 400*time.Millisecond {
				t.Fatalf("ok %v delay %v", r.OK(), r.Delay())
			}
			clk.Set(t0 - 300) // before the reservation
			if d := r.Delay(); d < 400*time.Millisecond {
				t.Errorf("Delay read before the reservation's time: %v, want >= 400ms", d)
			}
			r.Cancel()
			clk.Set(t0)
			if got := a7debt(t, l, "k"); got != 10*a7tok {
				t.Errorf("Cancel with the clock set back: debt %v at the reservation's time, want 1s", got)
			}
		})
		t.Run("staleT", func(t *testing.T) {
			l, clk := a7new(t, e, 10, 40)
			if !l.AllowN(l.Now(), "k", 10) {
				t.Fatal("denied")
			}
			stale := clk.Now().Add(-time.Second)
			r := l.ReserveN(stale, "k", 3) // decided at the used time: debt 1300
			if !r.OK() {
				t.Fatal("refused")
			}
			if d := r.DelayFrom(clk.Now()); d != 300*time.Millisecond {
				t.Errorf("stale reservation: DelayFrom(now) %v, want 300ms", d)
			}
			if d := r.DelayFrom(stale); d < 1300*time.Millisecond {
				t.Errorf("stale reservation: DelayFrom(stale) %v, want >= 1300ms (never early)", d)
			}
			r.Cancel()
			if got := a7debt(t, l, "k"); got != 10*a7tok {
				t.Errorf("Cancel of a stale reservation: debt %v, want 1s", got)
			}
		})
	})
}

// a7reserveRace has G goroutines reserve per tokens one at a time on key
// at the frozen instant now; it returns each goroutine's reservations.
func a7reserveRace(t *testing.T, l *limit.Limiter, now time.Time, key string, G, per int) [][]*limit.Reservation {
	res := make([][]*limit.Reservation, G)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := range G {
		wg.Go(func() {
			<-start
			for range per {
				r := l.ReserveN(now, key, 1)
				if !r.OK() {
					t.Errorf("refused below MaxDebt")
					return
				}
				res[g] = append(res[g], r)
				runtime.Gosched()
			}
		})
	}
	close(start)
	wg.Wait()
	return res
}

// TestAudit7ReserveDelaysRacing: goroutines reserve one token each on one
// key at one frozen millisecond. ReserveN "always decides with TryUpdate
// (strict)", so the takes are linearizable (the final debt is exactly
// their sum), and each Delay is derived from the debt its own take left
// (ReserveN's doc): sorted, the delays are exactly a serial order's (0
// for the first burst, then one token, 100 ms, more each). (The audit
// found delays late in every run, up to 63 of 160, when the delay was
// read from a Query after the take; x/time/rate's are exact, and so are
// ours now.)
func TestAudit7ReserveDelaysRacing(t *testing.T) {
	for _, procs := range []int{2, 8} {
		t.Run(fmt.Sprint("P", procs), func(t *testing.T) {
			a7each(t, func(t *testing.T, e limit.Engine) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				const G, per, burst = 8, 20, 10
				l, clk := a7new(t, e, burst, 400)
				now := clk.Now()
				res := a7reserveRace(t, l, now, "lin", G, per)
				if got := a7debt(t, l, "lin"); got != G*per*a7tok {
					t.Fatalf("debt %v, want %v", got, G*per*a7tok)
				}
				var ds []time.Duration
				for _, rs := range res {
					for _, r := range rs {
						ds = append(ds, r.DelayFrom(now))
					}
				}
				sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
				for i, d := range ds {
					want := time.Duration(max(0, i+1-burst)) * a7tok
					if d < want {
						t.Fatalf("delay #%d = %v, earlier than %v: EARLY (delays %v)", i, d, want, ds)
					}
					if d != want {
						t.Fatalf("delay #%d = %v, want %v: late (delays %v)", i, d, want, ds)
					}
				}
			})
		})
	}
}

// TestAudit7CancelRaceAllow: reservations taken at one frozen ms far past
// the burst are cancelled by their reservers a millisecond later, racing
// AllowN of the same key. A Cancel gives back its reservation or nothing,
// so the debt read after is never below what was admitted and kept (the
// AllowNs), and never above everything taken.
func TestAudit7CancelRaceAllow(t *testing.T) {
	for _, procs := range []int{2, 8} {
		t.Run(fmt.Sprint("P", procs), func(t *testing.T) {
			a7each(t, func(t *testing.T, e limit.Engine) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				const G, per, burst = 8, 20, 10
				l, clk := a7new(t, e, burst, 400)
				k := "cra"
				res := a7reserveRace(t, l, clk.Now(), k, G, per)
				clk.Advance(time.Millisecond)
				var mu sync.Mutex
				allowed := 0
				var wg sync.WaitGroup
				start := make(chan struct{})
				for g := range G {
					wg.Go(func() {
						<-start
						rng := rand.New(rand.NewPCG(uint64(g), 3))
						for _, r := range res[g] {
							r.Cancel()
							if rng.IntN(3) == 0 && l.AllowN(l.Now(), k, 1) {
								mu.Lock()
								allowed++
								mu.Unlock()
							}
						}
					})
				}
				close(start)
				wg.Wait()
				got := a7debt(t, l, k)
				lo := time.Duration(allowed) * a7tok
				hi := time.Duration(G*per+allowed)*a7tok - time.Millisecond
				if got < lo || got > hi {
					t.Errorf("after racing cancels: debt %v, want in [%v, %v] (%d allowed)", got, lo, hi, allowed)
				}
				if allowed > burst {
					t.Errorf("%d AllowN admitted at one ms with a burst of %d", allowed, burst)
				}
				// RetryAfter read now predicts the next admission exactly.
				d := l.DecideN(l.Now(), k, 1)
				if !d.Allowed {
					clk.Advance(d.RetryAfter - time.Millisecond)
					if l.AllowN(l.Now(), k, 1) {
						t.Errorf("admitted 1 ms before RetryAfter %v", d.RetryAfter)
					}
					clk.Advance(time.Millisecond)
					if !l.AllowN(l.Now(), k, 1) {
						t.Errorf("denied at RetryAfter %v", d.RetryAfter)
					}
				}
			})
		})
	}
}

// TestAudit7CancelSharedCell: on a count-min of one level of a handful of
// cells, keys share cells. Goroutines race reservations, AllowNs and
// Cancels (some of one reservation by two goroutines) of several keys at
// one frozen ms, below MaxDebt. Every key's read debt must stay at least
// its own kept debt (doc.go, "Error side": "A key's read debt is at least
// its own debt on either engine"; Cancel: "a key is never given back
// more than its own reservation, nor anything of another key's"); and
// with every Cancel in the same ms below MaxDebt, the count-min gives
// each back exactly, so a key's debt is at most the sum of all keys'
// kept debts (what its cells can hold).
func TestAudit7CancelSharedCell(t *testing.T) {
	for _, procs := range []int{2, 8} {
		t.Run(fmt.Sprint("P", procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			clk := sketchtest.NewFakeClock()
			clk.Set(1 << 36)
			l, err := limit.New(10, 10, limit.WithSize(1, 1), limit.WithSeed(3), limit.WithClock(clk),
				limit.WithMaxDebt(4000), limit.WithPeriod(10*365*24*time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			const nkeys, G, per = 6, 8, 40
			keys := make([]string, nkeys)
			for i := range keys {
				keys[i] = fmt.Sprint("sh", i)
			}
			now := clk.Now()
			var mu sync.Mutex
			var kept [nkeys]int64 // tokens
			type rk struct {
				r *limit.Reservation
				k int
				n int64
			}
			var pool []rk
			done := map[*limit.Reservation]bool{}
			var wg sync.WaitGroup
			start := make(chan struct{})
			for g := range G {
				wg.Go(func() {
					<-start
					rng := rand.New(rand.NewPCG(uint64(g), uint64(procs)))
					for range per {
						runtime.Gosched()
						k := rng.IntN(nkeys)
						n := 1 + rng.IntN(3)
						switch rng.IntN(3) {
						case 0:
							r := l.ReserveN(now, keys[k], n)
							if !r.OK() {
								t.Errorf("refused far below MaxDebt")
								return
							}
							mu.Lock()
							kept[k] += int64(n)
							pool = append(pool, rk{r, k, int64(n)})
							mu.Unlock()
						case 1:
							if l.AllowN(now, keys[k], n) {
								mu.Lock()
								kept[k] += int64(n)
								mu.Unlock()
							}
						case 2:
							mu.Lock()
							if len(pool) == 0 {
								mu.Unlock()
								continue
							}
							i := rng.IntN(len(pool))
							x := pool[i]
							if rng.IntN(2) == 0 {
								pool = append(pool[:i], pool[i+1:]...)
							}
							first := !done[x.r]
							done[x.r] = true
							if first {
								kept[x.k] -= x.n
							}
							mu.Unlock()
							x.r.Cancel()
						}
					}
				})
			}
			close(start)
			wg.Wait()
			var total int64
			for _, v := range kept {
				total += v
			}
			for i, k := range keys {
				got := a7debt(t, l, k)
				if testing.Verbose() {
					t.Logf("key %d debt %v own %v total %v", i, got, time.Duration(kept[i])*a7tok, time.Duration(total)*a7tok)
				}
				if own := time.Duration(kept[i]) * a7tok; got < own {
					t.Errorf("key %d: debt %v below its own kept %v", i, got, own)
				}
				if all := time.Duration(total) * a7tok; got > all {
					t.Errorf("key %d: debt %v above all keys' kept %v", i, got, all)
				}
			}
		})
	}
}
