package limit_test

// Audit 3, capacity: the Buckets engine under concurrent callers, through
// package limit (limit/doc.go: strict mode is "exact under contention";
// optimistic "over-admits by at most the number of racers"; "a
// collision can only deny a key early, never admit it past its own
// limit"; "a key shares its debt only with a key of the same
// fingerprint in one of its lines").

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
)

// a3capRace runs g goroutines calling f(gor, i) for i < tries, released
// together, and waits for them.
func a3capRace(g, tries int, f func(gor, i int)) {
	start := make(chan struct{})
	var wg sync.WaitGroup
	for gi := range g {
		wg.Go(func() {
			<-start
			for i := range tries {
				f(gi, i)
			}
		})
	}
	close(start)
	wg.Wait()
}

// a3capTwins finds, with the public API only, pairs (a, b) of keys that
// share a fingerprint and a line in the 2-line Buckets engine of conf c
// and seed seed: b is denied one token right after a alone took its
// whole burst in a fresh limiter (no eviction: only a's debt is in it).
// It scans candidates against 20 anchors at once, then confirms each
// pair alone.
func a3capTwins(t *testing.T, c a3capConf, seed uint64, want int) [][2]string {
	t.Helper()
	l, clk := a3capNew(t, c, seed, limit.WithCapacity(1, 0.5))
	now := clk.Now()
	anchors := a3capKeys("anchor", 20)
	for _, a := range anchors {
		if !l.AllowN(now, a, c.burst) {
			t.Fatalf("anchor %s denied in an almost empty engine", a)
		}
	}
	var pairs [][2]string
	for i := 0; i < 400_000 && len(pairs) < want; i++ {
		b := fmt.Sprint("cand-", i)
		if l.PeekN(now, b, 1).Allowed {
			continue
		}
		for _, a := range anchors {
			l2, clk2 := a3capNew(t, c, seed, limit.WithCapacity(1, 0.5))
			l2.AllowN(clk2.Now(), a, c.burst)
			if !l2.PeekN(clk2.Now(), b, 1).Allowed {
				pairs = append(pairs, [2]string{a, b})
				break
			}
		}
	}
	if len(pairs) < want {
		t.Fatalf("found %d fingerprint twins, want %d", len(pairs), want)
	}
	return pairs
}

// TestAudit3CapTwinsShareOnlyOneSided: for fingerprint twins found
// through the public API, sequential use on a frozen then moving clock:
// each twin is admitted at most its own bucket (exact oracle), the
// sharing only denies early; b, denied while a is at full debt, is
// admitted its whole burst again once a's debt has drained (the sharing
// lasts only "for as long as both are live").
func TestAudit3CapTwinsShareOnlyOneSided(t *testing.T) {
	c := a3capConfs[0] // 10/s, burst 20
	pairs := a3capTwins(t, c, 5, 4)
	tok, burstMs := c.tokenMs, c.burstMs()
	for _, p := range pairs {
		l, clk := a3capNew(t, c, 5, limit.WithCapacity(1, 0.5))
		var oa, ob a3capOracle
		rng := rand.New(rand.NewPCG(9, 9))
		admitted := [2]int{}
		for step := range 400 {
			if step%10 == 0 {
				clk.Advance(time.Duration(rng.IntN(400)) * time.Millisecond)
			}
			now := clk.NowMillis()
			who := rng.IntN(2)
			o := []*a3capOracle{&oa, &ob}[who]
			n := 1 + rng.IntN(3)
			if l.AllowN(clk.Now(), p[who], n) {
				if o.debt(now)+int64(n)*tok > burstMs {
					t.Fatalf("twins %v: step %d: %s admitted %d over its exact bucket (debt %d ms)", p, step, p[who], n, o.debt(now))
				}
				o.add(now, int64(n)*tok, 2*burstMs)
				admitted[who] += n
			}
		}
		// b's sharing ends when a's debt drains: after MaxDebt's drain
		// both read empty, and each gets its whole burst again.
		clk.Advance(time.Duration(2*burstMs) * time.Millisecond)
		if !l.AllowN(clk.Now(), p[0], c.burst) {
			t.Fatalf("twins %v: a denied its burst after every debt drained", p)
		}
		clk.Advance(time.Duration(2*burstMs) * time.Millisecond)
		if !l.AllowN(clk.Now(), p[1], c.burst) {
			t.Fatalf("twins %v: b denied its burst after every debt drained", p)
		}
		t.Logf("twins %v: admitted %v tokens", p, admitted)
	}
}

// TestAudit3CapRaceOneKeyExact: G goroutines racing one key (alone in its
// engine) with a frozen clock admit exactly what the exact bucket has
// room for, round after round with time moving between rounds: AllowN,
// DecideN and Allow up to the burst, ReserveN up to MaxDebt (ReserveN is
// always strict). GOMAXPROCS 1, 2 and 8.
func TestAudit3CapRaceOneKeyExact(t *testing.T) {
	for _, procs := range []int{1, 2, 8} {
		for _, c := range []a3capConf{a3capConfs[0], a3capConfs[1], a3capConfs[3]} {
			t.Run(fmt.Sprintf("P%d/%s", procs, c.name), func(t *testing.T) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				l, clk := a3capNew(t, c, 3, limit.WithCapacity(1000, 0.01))
				const g = 8
				tries := 2*c.burst/g + 2
				key := "the-key"
				var o a3capOracle
				rng := rand.New(rand.NewPCG(uint64(procs), 1))
				for round := range 24 {
					now, tm := clk.NowMillis(), clk.Now()
					debt := o.debt(now)
					reserve := round%4 == 3
					var got atomic.Int64
					a3capRace(g, tries, func(gi, i int) {
						var ok bool
						switch {
						case reserve:
							ok = l.ReserveN(tm, key, 1).OK()
						case (gi+i)%3 == 0:
							ok = l.AllowN(tm, key, 1)
						case (gi+i)%3 == 1:
							ok = l.DecideN(tm, key, 1).Allowed
						default:
							ok = l.Allow(key) // the clock's reading: tm
						}
						if ok {
							got.Add(1)
						}
					})
					capMs := c.burstMs()
					if reserve {
						capMs = c.maxDebtMs()
					}
					want := max(0, (capMs-debt)/c.tokenMs)
					if g*tries < int(want) {
						t.Fatalf("too few tries")
					}
					if got.Load() != want {
						t.Fatalf("round %d (reserve %v): %d goroutines admitted %d, the exact bucket (debt %d ms) has room for exactly %d", round, reserve, g, got.Load(), debt, want)
					}
					o.add(now, got.Load()*c.tokenMs, c.maxDebtMs())
					clk.Advance(time.Duration(rng.Int64N(c.burstMs())) * time.Millisecond)
				}
			})
		}
	}
}

// TestAudit3CapRaceOptimisticBound: WithStrict(false) "can over-admit by
// the number of callers racing on one key": G goroutines racing one key
// with a frozen clock admit at least the room and at most room + G.
func TestAudit3CapRaceOptimisticBound(t *testing.T) {
	for _, procs := range []int{1, 2, 8} {
		t.Run(fmt.Sprint("P", procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			c := a3capConfs[3] // every 7 ms, burst 100
			l, clk := a3capNew(t, c, 3, limit.WithStrict(false), limit.WithCapacity(1000, 0.01))
			const g = 8
			for round := range 10 {
				key := fmt.Sprint("k", round)
				tm := clk.Now()
				var got atomic.Int64
				a3capRace(g, 2*c.burst/g+2, func(_, _ int) {
					if l.AllowN(tm, key, 1) {
						got.Add(1)
					}
				})
				if n := got.Load(); n < int64(c.burst) || n > int64(c.burst+g) {
					t.Fatalf("round %d: optimistic admitted %d of burst %d with %d racers: outside [burst, burst+racers]", round, n, c.burst, g)
				}
			}
		})
	}
}

// TestAudit3CapRaceSharedLines: 8 goroutines race AllowN and ReserveN on
// 40 keys plus fingerprint twins in a 2-line engine (28 slots: every key
// shares its lines, and the keys outnumber the slots, so the races meet
// evictions; each round focuses on 6 of the keys and two twin pairs, so
// that buckets fill), round after round, with time moving between rounds
// and, in every other round, during it (a ninth goroutine advances the
// fake clock 1 ms at a time while the others decide, each at the clock's
// reading).
// For every key and round, with d its exact debt at the round's start (a
// lower bound after a moving round) and e the ms the round lasted: the
// tokens AllowN admitted are at most burst - d + e, and those AllowN and
// ReserveN admitted together at most MaxDebt - d + e (every admission
// fits the exact bucket at its serialization point, which lies within
// the round). GOMAXPROCS 1, 2 and 8.
func TestAudit3CapRaceSharedLines(t *testing.T) {
	c := a3capConfs[0] // 10/s, burst 20
	twins := a3capTwins(t, c, 5, 4)
	keys := a3capKeys("shared", 40)
	for _, p := range twins {
		keys = append(keys, p[0], p[1])
	}
	for _, procs := range []int{1, 2, 8} {
		t.Run(fmt.Sprint("P", procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			l, clk := a3capNew(t, c, 5, limit.WithCapacity(1, 0.5))
			oracle := make([]a3capOracle, len(keys))
			allow := make([]atomic.Int64, len(keys))
			res := make([]atomic.Int64, len(keys))
			rng := rand.New(rand.NewPCG(uint64(procs), 2))
			const g, tries = 8, 24
			total, full := 0, 0 // full: key-rounds whose AllowN filled the burst exactly
			for round := range 80 {
				moving := round%2 == 1
				start := clk.NowMillis()
				for i := range keys {
					allow[i].Store(0)
					res[i].Store(0)
				}
				seeds := make([]uint64, g)
				for i := range seeds {
					seeds[i] = rng.Uint64()
				}
				// The round's focus: 10 keys (two twin pairs among them),
				// so that the racers fill their buckets.
				focus := rng.Perm(len(keys) - 2*len(twins))[:6]
				tw := rng.Perm(len(twins))[:2]
				for _, p := range tw {
					focus = append(focus, len(keys)-2*len(twins)+2*p, len(keys)-2*len(twins)+2*p+1)
				}
				a3capRace(g+1, tries, func(gi, i int) {
					if gi == g { // the clock's goroutine
						if moving {
							clk.Advance(time.Millisecond)
							runtime.Gosched()
						}
						return
					}
					r := rand.New(rand.NewPCG(seeds[gi], uint64(i)))
					k := focus[r.IntN(len(focus))]
					n := 1 + r.IntN(3)
					if r.IntN(8) == 0 {
						if l.ReserveN(clk.Now(), keys[k], n).OK() {
							res[k].Add(int64(n))
						}
						return
					}
					if l.AllowN(clk.Now(), keys[k], n) {
						allow[k].Add(int64(n))
					}
				})
				end := clk.NowMillis()
				e := end - start
				for i, k := range keys {
					d := oracle[i].debt(start)
					a, r := allow[i].Load()*c.tokenMs, res[i].Load()*c.tokenMs
					if a > 0 && d+a > c.burstMs()+e {
						t.Fatalf("round %d (%d ms) key %s: AllowN admitted %d ms of tokens on a debt of %d ms: past burst %d ms", round, e, k, a, d, c.burstMs())
					}
					if a+r > 0 && d+a+r > c.maxDebtMs()+e {
						t.Fatalf("round %d (%d ms) key %s: admitted %d + reserved %d ms on a debt of %d ms: past MaxDebt %d ms", round, e, k, a, r, d, c.maxDebtMs())
					}
					// The debt at the round's end is at least this (drained
					// at most e ms): a lower bound for the next round.
					oracle[i].zero = end + max(0, d+a+r-e)
					total += int(a + r)
					if d+a == c.burstMs() {
						full++
					}
				}
				switch x := rng.IntN(10); {
				case x < 4:
				case x < 9:
					clk.Advance(time.Duration(rng.Int64N(c.burstMs())) * time.Millisecond)
				default:
					clk.Advance(time.Duration(65_536+rng.Int64N(3)-1) * time.Millisecond)
				}
			}
			t.Logf("%d ms of tokens admitted; %d key-rounds filled the burst exactly", total, full)
			if total == 0 || full == 0 {
				t.Fatal("no power: no key filled its burst")
			}
		})
	}
}
