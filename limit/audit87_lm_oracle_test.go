package limit_test

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// audit87LmBucket is the exact rational token bucket of one window (in
// its tokens, at millisecond resolution): the oracle.
type audit87LmBucket struct {
	rate        *big.Rat // tokens per ms
	burst       int
	maxDebt, rc *big.Rat
	debt        *big.Rat
	last        int64
	inf         bool
	name        string
	limit       limit.Limit
}

func (b *audit87LmBucket) at(ms int64) {
	if b.inf {
		return
	}
	drop := new(big.Rat).Mul(b.rate, new(big.Rat).SetInt64(ms-b.last))
	b.debt.Sub(b.debt, drop)
	if b.debt.Sign() < 0 {
		b.debt.SetInt64(0)
	}
	b.last = ms
}

func (b *audit87LmBucket) fits(n int) bool {
	if b.inf {
		return true
	}
	x := new(big.Rat).Add(b.debt, big.NewRat(int64(n), 1))
	return n <= b.burst && x.Cmp(big.NewRat(int64(b.burst), 1)) <= 0
}

// msUntil returns the least whole ms x with debt - rate x + n <= burst
// (0 if it fits now).
func (b *audit87LmBucket) msUntil(target *big.Rat) int64 {
	over := new(big.Rat).Sub(b.debt, target)
	if over.Sign() <= 0 {
		return 0
	}
	q := new(big.Rat).Quo(over, b.rate)
	x := new(big.Int).Quo(q.Num(), q.Denom())
	if !q.IsInt() {
		x.Add(x, big.NewInt(1))
	}
	return x.Int64()
}

func (b *audit87LmBucket) remaining() int {
	r := new(big.Rat).Sub(big.NewRat(int64(b.burst), 1), b.debt)
	if r.Sign() <= 0 {
		return 0
	}
	return int(new(big.Int).Quo(r.Num(), r.Denom()).Int64())
}

// TestAudit87LmMultiOracleMixedKinds: random sequences of Multi
// decisions (one key, or per-window keys) over two to four windows of
// every kind (Buckets and count-min, refundable, with MaxDebt = burst, a
// conservative count-min, and Inf), with RejectCost on some, at a fake
// clock moving by random steps (to exactly a RetryAfter, and 1 ms before
// it, often), against an exact rational token bucket per window.
// Serially every decision is the oracle's: admitted iff every window
// fits n; a denial charges the RejectCost of the first window in order
// that does not fit (Multi's doc: "the first window in order that denies
// on that read is the one that denies, and charges its RejectCost"), and
// no other window's debt moves (whatever the take order: a first
// window of the kind that takes last denies after the others took and
// gave back); RetryAfter the least ms after which every window fits, or
// Never (InfDuration) when n exceeds a burst; Remaining the least;
// ResetAfter the latest; NextAfter that of the window(s) holding the
// least; Limit, Burst and Policy the window's that sets Remaining
// (admitted) or RetryAfter (denied), the first in order on a tie.
func TestAudit87LmMultiOracleMixedKinds(t *testing.T) {
	rates := []limit.Limit{1, 2, 4, 5, 10, 20, 0.5, 0.25}
	kinds := []string{"B", "C", "Bmd", "Cmd", "Ccu", "Inf"}
	var seqs, admitted, denied, never, firstKeeps int
	defer func() {
		t.Logf("%d sequences: %d admitted, %d denied (%d Never, %d by an unrefundable first window)", seqs, admitted, denied, never, firstKeeps)
	}()
	for seq := range 60 {
		rng := rand.New(rand.NewPCG(87, uint64(seq)))
		fc := sketchtest.NewFakeClock()
		fc.Set(1 << 30)
		nw := 2 + rng.IntN(3)
		var ws []*limit.Limiter
		var os []*audit87LmBucket
		var firstKind string
		desc := ""
		for i := 0; len(ws) < nw; i++ {
			kind := kinds[rng.IntN(len(kinds))]
			rate := rates[rng.IntN(len(rates))]
			burst := 1 + rng.IntN(6)
			rc := 0.0
			if rng.IntN(3) == 0 {
				rc = float64(1 + rng.IntN(2))
			}
			name := fmt.Sprint("w", len(ws))
			opts := []limit.Option{limit.WithSeed(uint64(i + 1)), limit.WithClock(fc), limit.WithName(name), limit.WithRejectCost(rc)}
			md := max(2*float64(burst), float64(burst)+rc)
			switch kind {
			case "B":
				opts = append(opts, limit.WithEngine(limit.Buckets), limit.WithCapacity(64, 0.01))
			case "C":
				opts = append(opts, limit.WithEngine(limit.CountMin), limit.WithSize(4, 1024))
			case "Bmd", "Cmd":
				md = float64(burst)
				if rc > md {
					rc = md
					opts = append(opts, limit.WithRejectCost(rc))
				}
				opts = append(opts, limit.WithMaxDebt(md))
				if kind == "Bmd" {
					opts = append(opts, limit.WithEngine(limit.Buckets), limit.WithCapacity(64, 0.01))
				} else {
					opts = append(opts, limit.WithEngine(limit.CountMin), limit.WithSize(4, 1024))
				}
			case "Ccu":
				opts = append(opts, limit.WithEngine(limit.CountMin), limit.WithSize(4, 1024), limit.WithConservativeUpdate(true))
			case "Inf":
				rate = limit.Inf
			}
			w, err := limit.New(rate, burst, opts...)
			if err != nil || !w.Exact() {
				continue // a Buckets engine that cannot hold the rate exactly, or an inexact count-min
			}
			if len(ws) == 0 {
				firstKind = kind
			}
			ws = append(ws, w)
			o := &audit87LmBucket{burst: burst, debt: new(big.Rat), last: fc.NowMillis(), inf: kind == "Inf", name: name, limit: rate}
			if !o.inf {
				o.rate = new(big.Rat).Quo(new(big.Rat).SetFloat64(float64(rate)), big.NewRat(1000, 1))
				o.maxDebt = new(big.Rat).SetFloat64(md)
				o.rc = new(big.Rat).SetFloat64(rc)
			}
			os = append(os, o)
			desc += fmt.Sprintf("%s:%s(%v,%d,rc%v) ", name, kind, rate, burst, rc)
		}
		allInf, minBurst := true, 7
		for _, o := range os {
			allInf = allInf && o.inf
			if !o.inf {
				minBurst = min(minBurst, o.burst)
			}
		}
		if allInf {
			continue
		}
		m, err := limit.NewMulti(ws...)
		if err != nil {
			t.Fatal(err)
		}
		seqs++
		perKey := rng.IntN(2) == 0
		keyOf := func(i int) string {
			if perKey {
				return fmt.Sprint("k", i)
			}
			return "k"
		}
		keys := []string{"k"}
		if perKey {
			keys = nil
			for i := range ws {
				keys = append(keys, keyOf(i))
			}
		}
		var lastRetry time.Duration
		for step := range 80 {
			switch r := rng.IntN(6); {
			case r == 0 && lastRetry > 0 && lastRetry < limit.InfDuration:
				fc.Advance(lastRetry)
			case r == 1 && lastRetry > time.Millisecond && lastRetry < limit.InfDuration:
				fc.Advance(lastRetry - time.Millisecond)
			case r == 2:
				// no time
			default:
				fc.Advance(time.Duration(rng.IntN(1500)) * time.Millisecond)
			}
			now := fc.Now()
			ms := fc.NowMillis()
			n := 1 + rng.IntN(minBurst)
			switch rng.IntN(12) {
			case 0:
				n = 7 // above every burst
			case 1, 2:
				n = 1 + rng.IntN(4)
			}
			for _, o := range os {
				o.at(ms)
			}
			denier := -1
			for i, o := range os {
				if !o.fits(n) {
					denier = i
					break
				}
			}
			d := m.DecideKeys(now, n, keys...)
			ctx := fmt.Sprintf("seq %d step %d [%s] perKey=%v n=%d", seq, step, desc, perKey, n)
			if d.Allowed != (denier < 0) {
				t.Fatalf("%s: Allowed %v; oracle denier %d (debts %v)", ctx, d.Allowed, denier, audit87LmDebts(os))
			}
			switch {
			case denier < 0:
				admitted++
			case d.Never:
				denied++
				never++
			default:
				denied++
				if denier == 0 && (firstKind == "Bmd" || firstKind == "Cmd" || firstKind == "Ccu") {
					firstKeeps++
				}
			}
			if denier < 0 {
				for _, o := range os {
					if !o.inf {
						o.debt.Add(o.debt, big.NewRat(int64(n), 1))
					}
				}
			} else if o := os[denier]; o.rc.Sign() > 0 {
				o.debt.Add(o.debt, o.rc)
				if o.debt.Cmp(o.maxDebt) > 0 {
					o.debt.Set(o.maxDebt)
				}
			}
			// The oracle's Decision.
			want := limit.Decision{Allowed: denier < 0, Remaining: 1 << 62}
			setter := -1
			var reset time.Duration
			var next []time.Duration
			for i, o := range os {
				if o.inf {
					continue
				}
				rem := o.remaining()
				var na time.Duration
				if o.debt.Sign() > 0 {
					target := new(big.Rat).SetInt64(int64(o.burst - rem - 1))
					na = time.Duration(o.msUntil(target)) * time.Millisecond
				}
				reset = max(reset, time.Duration(o.msUntil(new(big.Rat)))*time.Millisecond)
				switch {
				case rem < want.Remaining:
					want.Remaining, next = rem, []time.Duration{na}
				case rem == want.Remaining:
					next = append(next, na)
				}
				if denier < 0 {
					if setter < 0 || rem < os[setter].remaining() {
						setter = i
					}
					continue
				}
				var ra time.Duration
				switch {
				case n > o.burst:
					ra = limit.InfDuration
				case !o.fits(n):
					ra = time.Duration(o.msUntil(big.NewRat(int64(o.burst-n), 1))) * time.Millisecond
				}
				if want.Never {
					continue
				}
				if ra == limit.InfDuration {
					want.Never, want.RetryAfter, setter = true, ra, i
					continue
				}
				if ra > want.RetryAfter {
					want.RetryAfter, setter = ra, i
				}
			}
			want.ResetAfter = reset
			want.NextAfter = next[0]
			for _, x := range next {
				if x == 0 {
					want.NextAfter = 0
					break
				}
				want.NextAfter = max(want.NextAfter, x)
			}
			want.Policy, want.Burst, want.Limit = os[setter].name, os[setter].burst, os[setter].limit
			if d != want {
				t.Fatalf("%s:\n got %+v\nwant %+v\n(debts after %v)", ctx, d, want, audit87LmDebts(os))
			}
			lastRetry = d.RetryAfter
			// Every window reads the oracle's debt.
			for i, w := range ws {
				if os[i].inf {
					continue
				}
				got := float64(os[i].burst) - w.TokensAt(now, keyOf(i))
				if want, _ := os[i].debt.Float64(); math.Abs(got-want) > 1e-9 {
					t.Fatalf("%s: window %d reads debt %v; oracle %v", ctx, i, got, want)
				}
			}
		}
	}
}

func audit87LmDebts(os []*audit87LmBucket) []string {
	var s []string
	for _, o := range os {
		if o.inf {
			s = append(s, "inf")
			continue
		}
		s = append(s, o.debt.FloatString(4))
	}
	return s
}
