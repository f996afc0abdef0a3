package limit_test

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit66MultiOracleSetLimit: a Multi of three exact windows (10/s
// Buckets with RejectCost, 0.3/s, 1/3/s on the count-min) against three
// rational buckets, with SetLimit and SetBurst on a window mid-sequence
// ("A Multi's windows are Limiters: SetLimit on a window works", doc.go)
// and n above some bursts. Multi.DecideKeys: admitted iff every window
// admits; "Remaining is the least"; "RetryAfter (on a denial) the time
// when every window admits the request"; "Never if n exceeds any
// window's burst"; the first window in order that denies is the one that
// denies and charges its RejectCost; a denial takes nothing elsewhere.
func TestAudit66MultiOracleSetLimit(t *testing.T) {
	type win struct {
		pol  a66Pol
		max  float64
		rc   int64
		opts []limit.Option
		alts []a66Pol
	}
	wins := []win{
		{a66Pol{10, 1, 5}, 20, 1, []limit.Option{limit.WithEngine(limit.Buckets)}, []a66Pol{{5, 1, 5}, {10, 1, 10}, {20, 1, 3}}},
		{a66Pol{3, 10, 6}, 12, 0, nil, []a66Pol{{3, 20, 6}, {3, 10, 3}, {3, 5, 12}}},
		{a66Pol{1, 3, 3}, 30, 0, []limit.Option{limit.WithEngine(limit.CountMin), limit.WithSize(2, 64)}, []a66Pol{{1, 6, 3}, {1, 3, 9}, {2, 3, 5}}},
	}
	checked := 0
	for seed := uint64(0); seed < 10; seed++ {
		rng := rand.New(rand.NewPCG(seed, 6))
		clk := sketchtest.NewFakeClock()
		now := int64(2_000_000)
		clk.Set(now)
		var ls []*limit.Limiter
		var os []*a66Oracle
		var pols []a66Pol
		for i, w := range wins {
			opts := append([]limit.Option{limit.WithClock(clk), limit.WithSeed(seed), limit.WithMaxDebt(w.max), limit.WithName(fmt.Sprintf("w%d", i))}, w.opts...)
			if w.rc > 0 {
				opts = append(opts, limit.WithRejectCost(float64(w.rc)))
			}
			l, err := limit.New(w.pol.limit(), w.pol.b, opts...)
			if err != nil {
				t.Fatal(err)
			}
			ls = append(ls, l)
			os = append(os, &a66Oracle{d: new(big.Rat), at: now, max: new(big.Rat).Mul(w.pol.cost(), new(big.Rat).SetFloat64(w.max))})
			pols = append(pols, w.pol)
		}
		m, err := limit.NewMulti(ls...)
		if err != nil {
			t.Fatal(err)
		}
		for step := 0; step < 300; step++ {
			if rng.IntN(3) > 0 {
				now += int64(rng.IntN(4000))
			}
			clk.Set(now)
			for _, o := range os {
				o.advance(now)
			}
			if rng.IntN(12) == 0 {
				i := rng.IntN(len(wins))
				alt := wins[i].alts[rng.IntN(len(wins[i].alts))]
				if rng.IntN(2) == 0 {
					if err := ls[i].SetLimit(alt.limit()); err == nil {
						pols[i].num, pols[i].den = alt.num, alt.den
					}
				} else if err := ls[i].SetBurst(alt.b); err == nil {
					pols[i].b = alt.b
				}
				exact := true
				for _, l := range ls {
					exact = exact && l.Exact()
				}
				if !exact {
					break
				}
				continue
			}
			n := 1 + rng.IntN(4)
			if rng.IntN(8) == 0 {
				n = 5 + rng.IntN(8)
			}
			got := m.DecideKeys(ls[0].Now(), n, "k")
			// oracle
			deny := -1
			never := false
			for i, o := range os {
				p := pols[i]
				nc := new(big.Rat).Mul(p.cost(), big.NewRat(int64(n), 1))
				if n > p.b {
					never = true
				}
				if deny < 0 && (n > p.b || new(big.Rat).Add(o.d, nc).Cmp(p.burstMs()) > 0) {
					deny = i
				}
			}
			var want limit.Decision
			want.Allowed = deny < 0
			want.Never = never
			if deny >= 0 {
				os[deny].decide(pols[deny], n, wins[deny].rc, true) // charges RejectCost only
			} else {
				for i, o := range os {
					o.decide(pols[i], n, 0, true)
				}
			}
			want.Remaining = 1 << 62
			for i, o := range os {
				var d limit.Decision
				pols[i].fill(o.d, &d)
				want.Remaining = min(want.Remaining, d.Remaining)
				if deny >= 0 && !never {
					p := pols[i]
					nc := new(big.Rat).Mul(p.cost(), big.NewRat(int64(n), 1))
					x := new(big.Rat).Add(o.d, nc)
					x.Sub(x, p.burstMs())
					if x.Sign() > 0 {
						want.RetryAfter = max(want.RetryAfter, a66ms(max(a66Ceil(x), 1)))
					}
				}
			}
			if never {
				want.RetryAfter = limit.InfDuration
			}
			checked++
			if got.Allowed != want.Allowed || got.Never != want.Never || got.Remaining != want.Remaining || got.RetryAfter != want.RetryAfter {
				t.Fatalf("seed %d step %d at %d n=%d pols %v: got %+v\nwant Allowed %v Never %v Remaining %d RetryAfter %v",
					seed, step, now, n, pols, got, want.Allowed, want.Never, want.Remaining, want.RetryAfter)
			}
			// every window's own debt matches its oracle
			for i, o := range os {
				tk := ls[i].TokensAt(ls[i].Now(), "k")
				wt, _ := new(big.Rat).Sub(big.NewRat(int64(pols[i].b), 1), new(big.Rat).Quo(o.d, pols[i].cost())).Float64()
				if d := tk - wt; d > 1e-9 || d < -1e-9 {
					t.Fatalf("seed %d step %d: window %d tokens %v, want %v", seed, step, i, tk, wt)
				}
			}
		}
	}
	if checked < 1000 {
		t.Fatalf("only %d checks", checked)
	}
	_ = time.Millisecond
}
