package limit_test

// Audit 4: SetLimit and SetBurst racing decisions on shared keys.
//
// limit/doc.go, "Tiers and changing the limit": "SetLimit and SetBurst
// replace the Limiter's own policy whole (one pointer: a decision racing
// them uses the old policy or the new one, never a mix) ... A key in
// debt keeps its debt as time: after SetLimit it still drains what it
// owes in the same time (ResetAfter), and pays the new cost for new
// requests against the burst in the new tokens". WithStrict: strict mode
// "decides with the sketch's TryUpdate, exact under contention";
// ReserveN "always decides with TryUpdate (strict), so queued
// reservations never exceed MaxDebt".

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit4SetLimitRaceShared: goroutines race on shared keys (one key,
// then eight) while another flips the Limiter's policy, round after
// round on a clock frozen within a round and moved between rounds, so
// that keys carry debt (as time) across rounds and across changes.
//
// In a "full" round the flipper changes both the limit (5, 10, 20/s)
// and the burst (7, 20), and the racers use DecideN, whose Decision
// names the policy it was decided under; in a "burst" round only the
// burst changes (the cost of a token is known), and the racers also use
// AllowN, Allow and ReserveN, whose answer does not say which burst it
// met: they are checked against the most permissive burst, 20.
// a4checkRound then requires the exact outcome: each key's debt after
// the round is its debt before plus the admitted costs, some order
// admits every admission within its own policy's exact bucket, and
// every Decision is its own policy's for a debt the key had during the
// round. Stats counts every decision.
func TestAudit4SetLimitRaceShared(t *testing.T) {
	a4procs(t, func(t *testing.T, procs int, e limit.Engine) {
		for _, nkeys := range []int{1, 8} {
			a4setLimitRace(t, procs, e, nkeys)
		}
	})
}

func a4setLimitRace(t *testing.T, procs int, e limit.Engine, nkeys int) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1 << 35)
	// R = 10/s: 100 ms a token; MaxDebt 80 tokens = 8000 ms, which holds
	// 5/s with burst 20 (8000 ms).
	const maxDebt = 8000
	l, err := limit.New(10, 20, append(a4opts(e, uint64(nkeys)), limit.WithClock(clk), limit.WithMaxDebt(80))...)
	if err != nil {
		t.Fatal(err)
	}
	probe, err := l.Tier("probe", 10, 1)
	if err != nil {
		t.Fatal(err)
	}
	limits := []limit.Limit{5, 10, 20}
	bursts := []int{7, 20}
	for _, lim := range limits {
		if err := l.SetLimit(lim); err != nil || !l.Exact() {
			t.Fatalf("SetLimit(%v): %v, Exact %v", float64(lim), err, l.Exact())
		}
	}
	keys := a4keys(fmt.Sprintf("sl%d", nkeys), nkeys)
	d0 := make([]int64, nkeys)
	df := make([]int64, nkeys)
	rng := rand.New(rand.NewPCG(uint64(procs), uint64(nkeys)))
	var tally a4tally
	seen := map[a4pol]bool{}
	const G, per, rounds = 6, 40, 24
	for round := range rounds {
		full := round%2 == 0
		if !full {
			// A burst round: the limit stays 10/s (a token is 100 ms).
			if err := l.SetBurst(7); err != nil {
				t.Fatal(err)
			}
			if err := l.SetLimit(10); err != nil {
				t.Fatal(err)
			}
		}
		now := clk.Now()
		for k, key := range keys {
			if got := a4debt(probe, now, key); got != d0[k] {
				t.Fatalf("round %d key %d: debt %d ms before the round, want %d (kept as time across SetLimit)", round, k, got, d0[k])
			}
		}
		var stop atomic.Bool
		var flips atomic.Int64
		var fl sync.WaitGroup
		fseed := rng.Uint64()
		fl.Go(func() {
			r := rand.New(rand.NewPCG(fseed, 1))
			for !stop.Load() {
				var err error
				if full && r.IntN(2) == 0 {
					err = l.SetLimit(limits[r.IntN(len(limits))])
				} else {
					err = l.SetBurst(bursts[r.IntN(len(bursts))])
				}
				if err != nil {
					t.Error(err)
					return
				}
				flips.Add(1)
				runtime.Gosched()
			}
		})
		recs := make([][]a4rec, G)
		seeds := make([]uint64, G)
		for g := range seeds {
			seeds[g] = rng.Uint64()
		}
		a4race(G, func(g int) {
			r := rand.New(rand.NewPCG(seeds[g], 2))
			for i := range per {
				if i%8 == 0 {
					runtime.Gosched() // let the flipper in at GOMAXPROCS 1
				}
				k := r.IntN(nkeys)
				n := 1 + r.IntN(3)
				rec := a4rec{key: k, n: n, kind: a4decide}
				op := 0
				if !full {
					op = r.IntN(5)
				}
				switch op {
				case 0, 1:
					rec.d = l.DecideN(now, keys[k], n)
					rec.ok = rec.d.Allowed
					rec.pol = a4polOf(rec.d.Limit, rec.d.Burst)
				case 2:
					rec.kind, rec.ok = a4allow, l.AllowN(now, keys[k], n)
					rec.pol = a4polOf(10, 20) // the most permissive burst
				case 3:
					rec.kind, rec.n, rec.ok = a4allow, 1, l.Allow(keys[k])
					rec.pol = a4polOf(10, 20)
				default:
					rec.kind, rec.ok = a4reserve, l.ReserveN(now, keys[k], n).OK()
					rec.pol = a4polOf(10, 20)
				}
				tally.add(rec.ok)
				recs[g] = append(recs[g], rec)
			}
		})
		stop.Store(true)
		fl.Wait()
		var all []a4rec
		for _, r := range recs {
			all = append(all, r...)
			for _, x := range r {
				if x.kind == a4decide {
					seen[x.pol] = true
				}
			}
		}
		for k, key := range keys {
			df[k] = a4debt(probe, now, key)
		}
		if err := a4checkRound(d0, df, all, maxDebt); err != nil {
			t.Fatalf("GOMAXPROCS %d, %d keys, round %d (%s, %d policy changes): %v", procs, nkeys, round, map[bool]string{true: "full", false: "burst"}[full], flips.Load(), err)
		}
		adv := rng.Int64N(3000)
		clk.Advance(time.Duration(adv) * time.Millisecond)
		for k := range d0 {
			d0[k] = max(df[k]-adv, 0)
		}
	}
	a4checkStats(t, fmt.Sprintf("%d keys", nkeys), l.Stats(), &tally)
	if len(seen) < 4 {
		t.Fatalf("decisions met only the policies %v: the race was not exercised", seen)
	}
}

// TestAudit4SetLimitDebtAsTime: a key owes debt under New's policy and
// under a Tier, then SetLimit and SetBurst change the Limiter's policy
// while goroutines keep deciding other keys: on every policy the key's
// debt reads the same time to drain (ResetAfter, and TokensAt in the
// policy's tokens: burst - debt/token), a request's RetryAfter is that
// time minus the room in the new burst, and the first admission after it
// comes exactly at RetryAfter (1 ms earlier denied), under the new cost.
func TestAudit4SetLimitDebtAsTime(t *testing.T) {
	a4procs(t, func(t *testing.T, procs int, e limit.Engine) {
		clk := sketchtest.NewFakeClock()
		clk.Set(1 << 36)
		l, err := limit.New(10, 20, append(a4opts(e, 3), limit.WithClock(clk), limit.WithMaxDebt(80))...)
		if err != nil {
			t.Fatal(err)
		}
		probe, _ := l.Tier("probe", 10, 1)
		tier, _ := l.Tier("slow", 2.5, 8) // 400 ms a token, 3200 ms burst
		var stop atomic.Bool
		var bg sync.WaitGroup
		for g := range 3 {
			bg.Go(func() {
				for i := 0; !stop.Load(); i++ {
					l.DecideN(l.Now(), fmt.Sprintf("bg%d-%d", g, i%5), 1)
					if i%4 == 0 {
						runtime.Gosched()
					}
				}
			})
		}
		defer func() { stop.Store(true); bg.Wait() }()
		// Debt: 12 of New's tokens (1200 ms) + 3 of the tier's (1200 ms).
		if !l.AllowN(clk.Now(), "k", 12) || !tier.AllowN(clk.Now(), "k", 3) {
			t.Fatal("setup denied")
		}
		debt := int64(2400)
		at := clk.NowMillis()
		steps := []struct {
			lim   limit.Limit
			burst int
		}{{20, 20}, {5, 20}, {5, 7}, {20, 3}, {10, 40}, {40, 40}}
		for i, s := range steps {
			if err := l.SetBurst(1); err != nil {
				t.Fatal(err)
			}
			if err := l.SetLimit(s.lim); err != nil {
				t.Fatal(err)
			}
			if err := l.SetBurst(s.burst); err != nil {
				t.Fatal(err)
			}
			p := a4polOf(s.lim, s.burst)
			cur := max(debt-(clk.NowMillis()-at), 0)
			if got := a4debt(probe, clk.Now(), "k"); got != cur {
				t.Fatalf("step %d: debt %d ms after SetLimit(%v)/SetBurst(%d), want %d (kept as time)", i, got, float64(s.lim), s.burst, cur)
			}
			if got, want := l.Tokens("k"), float64(p.cap-cur)/float64(p.tok); math.Abs(got-want) > 1e-9 {
				t.Fatalf("step %d: Tokens %v, want %v (burst - debt in the new tokens)", i, got, want)
			}
			d := l.PeekN(clk.Now(), "k", 2)
			c := 2 * p.tok
			if cur+c <= p.cap {
				if !d.Allowed {
					t.Fatalf("step %d: denied with room: %+v", i, d)
				}
			} else {
				if d.Allowed || a4ms(d.RetryAfter) != cur+c-p.cap {
					t.Fatalf("step %d: %+v, want RetryAfter %d ms", i, d, cur+c-p.cap)
				}
				clk.Advance(d.RetryAfter - time.Millisecond)
				if l.AllowN(clk.Now(), "k", 2) {
					t.Fatalf("step %d: admitted 1 ms before RetryAfter", i)
				}
				clk.Advance(time.Millisecond)
			}
			if !l.AllowN(clk.Now(), "k", 2) {
				t.Fatalf("step %d: denied at RetryAfter", i)
			}
			debt = max(debt-(clk.NowMillis()-at), 0) + c
			at = clk.NowMillis()
			// the tier sees the same time, in its tokens
			if got, want := tier.Tokens("k"), float64(3200-debt)/400; math.Abs(got-want) > 1e-9 {
				t.Fatalf("step %d: the tier's Tokens %v, want %v", i, got, want)
			}
		}
	})
}
