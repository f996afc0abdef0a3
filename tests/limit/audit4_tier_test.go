package limit_test

// Audit 4: several Tiers of one Limiter racing on the same keys.
//
// limit/doc.go, "Tiers and changing the limit": "a policy of rate r and
// burst b is a cost of n x R/r per request of n tokens against a burst
// of b x R/r, in tokens of R. So a key's debt is held as time to drain,
// and every policy of the limiter sees the same debt"; "Every tier R/k
// for a whole k is exact on an exact limiter"; "Reservations of any
// policy queue up to the limiter's MaxDebt"; "SetLimit and SetBurst
// replace the Limiter's own policy whole ...; Tiers are not changed by
// them"; the Tier type: "A Tier's decisions count in its limiter's
// Stats, by the same rules".

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit4TiersRaceRounds: four exact tiers (R/4, R/2, R/3 as
// Every(300ms), and 2R) and the Limiter's own policy race DecideN,
// AllowN, Allow, ReserveN, Reserve and Peek on shared keys (one key, then
// six), round after round on a clock frozen within a round and moved
// between rounds, so that keys carry debt of every policy across rounds;
// in every other round a goroutine also flips the Limiter's own policy
// (SetLimit, SetBurst), which must leave the tiers' decisions alone.
// Every round's outcome must be exact (a4checkRound): debts equal to the
// admitted costs, every admission within its own policy's exact bucket
// in some order (reservations within MaxDebt), every Decision its own
// policy's. Stats counts every decision of the tiers and the Limiter.
func TestAudit4TiersRaceRounds(t *testing.T) {
	a4procs(t, func(t *testing.T, procs int, e limit.Engine) {
		for _, nkeys := range []int{1, 6} {
			a4tiersRace(t, procs, e, nkeys)
		}
	})
}

type a4decider interface {
	DecideN(t time.Time, key string, n int) limit.Decision
	PeekN(t time.Time, key string, n int) limit.Decision
	AllowN(t time.Time, key string, n int) bool
}

type a4tier struct {
	d   a4decider
	lim limit.Limit
	b   int
	res func(time.Time, string, int) *limit.Reservation
	one func(string) bool
}

func a4tiersRace(t *testing.T, procs int, e limit.Engine, nkeys int) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1 << 34)
	const maxDebt = 8000 // 80 tokens of 10/s
	l, err := limit.New(10, 20, append(a4opts(e, uint64(7+nkeys)), limit.WithClock(clk), limit.WithMaxDebt(80))...)
	if err != nil {
		t.Fatal(err)
	}
	probe, _ := l.Tier("probe", 10, 1)
	tiers := []a4tier{{d: l, lim: 10, b: 20, res: l.ReserveN, one: l.Allow}}
	for _, c := range []struct {
		lim limit.Limit
		b   int
	}{{2.5, 20}, {5, 7}, {limit.Every(300 * time.Millisecond), 10}, {20, 10}} {
		tr, err := l.Tier(fmt.Sprint(float64(c.lim)), c.lim, c.b)
		if err != nil || !tr.Exact() {
			t.Fatalf("Tier(%v, %d): %v, Exact %v", float64(c.lim), c.b, err, tr != nil && tr.Exact())
		}
		tiers = append(tiers, a4tier{d: tr, lim: c.lim, b: c.b, res: tr.ReserveN, one: tr.Allow})
	}
	keys := a4keys(fmt.Sprintf("tr%d", nkeys), nkeys)
	d0 := make([]int64, nkeys)
	df := make([]int64, nkeys)
	rng := rand.New(rand.NewPCG(uint64(procs), 77))
	var tally a4tally
	const G, per, rounds = 6, 40, 24
	for round := range rounds {
		flip := round%2 == 1
		if err := l.SetBurst(20); err != nil {
			t.Fatal(err)
		}
		if err := l.SetLimit(10); err != nil {
			t.Fatal(err)
		}
		now := clk.Now()
		var stop atomic.Bool
		var fl sync.WaitGroup
		fseed := rng.Uint64()
		if flip {
			fl.Go(func() {
				r := rand.New(rand.NewPCG(fseed, 1))
				for !stop.Load() {
					var err error
					if r.IntN(2) == 0 {
						err = l.SetLimit([]limit.Limit{5, 10, 20}[r.IntN(3)])
					} else {
						err = l.SetBurst([]int{7, 20}[r.IntN(2)])
					}
					if err != nil {
						t.Error(err)
						return
					}
					runtime.Gosched()
				}
			})
		}
		recs := make([][]a4rec, G)
		seeds := make([]uint64, G)
		for g := range seeds {
			seeds[g] = rng.Uint64()
		}
		a4race(G, func(g int) {
			r := rand.New(rand.NewPCG(seeds[g], 3))
			for i := range per {
				if i%8 == 0 {
					runtime.Gosched()
				}
				k := r.IntN(nkeys)
				ti := r.IntN(len(tiers))
				tr := tiers[ti]
				n := 1 + r.IntN(3)
				rec := a4rec{key: k, n: n, pol: a4polOf(tr.lim, tr.b)}
				op := r.IntN(6)
				if ti == 0 && flip {
					op = 0 // the Limiter's policy is only known from a Decision
				}
				switch op {
				case 0, 1:
					rec.kind, rec.d = a4decide, tr.d.DecideN(now, keys[k], n)
					rec.ok = rec.d.Allowed
					if ti == 0 {
						rec.pol = a4polOf(rec.d.Limit, rec.d.Burst)
					}
				case 2:
					rec.kind, rec.ok = a4allow, tr.d.AllowN(now, keys[k], n)
				case 3:
					rec.kind, rec.n, rec.ok = a4allow, 1, tr.one(keys[k])
				case 4:
					rec.kind, rec.ok = a4reserve, tr.res(now, keys[k], n).OK()
				default:
					// Peek decides nothing and counts nothing; its answer
					// is one for a debt of the round.
					p := tr.d.PeekN(now, keys[k], n)
					if p.Limit != tr.lim && ti != 0 || p.Never != (n > p.Burst) {
						t.Errorf("Peek under %v: %+v", float64(tr.lim), p)
					}
					continue
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
		}
		for k, key := range keys {
			df[k] = a4debt(probe, now, key)
		}
		if err := a4checkRound(d0, df, all, maxDebt); err != nil {
			t.Fatalf("GOMAXPROCS %d, %d keys, round %d (flipping %v): %v", procs, nkeys, round, flip, err)
		}
		adv := rng.Int64N(3000)
		clk.Advance(time.Duration(adv) * time.Millisecond)
		for k := range d0 {
			d0[k] = max(df[k]-adv, 0)
		}
	}
	a4checkStats(t, fmt.Sprintf("%d keys", nkeys), l.Stats(), &tally)
}
