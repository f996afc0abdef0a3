package limit_test

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
)

// a89bkEvent is one check of the quiescent phase: at ms, key's PeekN(n)
// must say allow, or its Tokens must compare to a bound.
type a89bkEvent struct {
	ms    int64
	key   int
	kind  int // 0: PeekN(n) denied; 1: PeekN(n) admitted; 2: Tokens < burst; 3: Tokens == burst; 4: floor(Tokens) == rem; 5: floor(Tokens) > rem
	n     int
	rem   int
	cause string
}

// TestAudit89BucketsFloorsDecisionsMeanWhatTheySay: a small Buckets
// limiter (WithCapacity(100, 0.01): 9 lines, 126 slots) driven far past
// its capacity by 400 keys on a moving fake clock, every key's own exact
// rational bucket (a66Oracle) fed with the limiter's admissions:
//
//   - no admission is one the key's exact bucket denies (limit/doc.go,
//     "Error side": "a collision can only deny a key early, never admit it
//     past its own limit"; internal/bucket/doc.go: "a key at its limit is
//     never admitted early", whatever evictions and floors);
//   - then, writes stopped, each key's Decision (read by PeekN, which
//     writes nothing) is checked against the limiter's own later readings
//     as the clock moves on: a denial's RetryAfter ("a retry at
//     t+RetryAfter is admitted and one 1 ms earlier is not"), ResetAfter
//     ("the time until the key's debt ... drains to zero") and NextAfter
//     ("the time until Remaining grows by one"), for held, evicted and
//     fresh keys, whose debts are read from entries and eviction floors;
//   - and every reading is at least the key's exact debt (TokensAt at
//     most the oracle's tokens).
func TestAudit89BucketsFloorsDecisionsMeanWhatTheySay(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		l, clk := a89bkNew(t, 10, 20, limit.WithCapacity(100, 0.01), limit.WithSeed(seed))
		pol := a66Pol{10, 1, 20}
		const keys = 400
		key := func(i int) string { return fmt.Sprintf("k%d-%d", seed, i) }
		orc := make([]*a66Oracle, keys+40) // the last 40 are never written
		start := clk.NowMillis()
		for i := range orc {
			orc[i] = &a66Oracle{d: new(big.Rat), at: start, max: big.NewRat(4000, 1)}
		}
		rng := rand.New(rand.NewPCG(seed, 89))
		admitted, denied, floored := 0, 0, 0
		for range 6000 {
			clk.Advance(time.Duration(rng.IntN(4)) * time.Millisecond)
			ms := clk.NowMillis()
			i, n := rng.IntN(keys), 1+rng.IntN(20)
			o := orc[i]
			o.advance(ms)
			d := l.DecideN(clk.Now(), key(i), n)
			if !d.Allowed {
				continue
			}
			admitted++
			if want := o.decide(pol, n, 0, true); !want.Allowed {
				t.Fatalf("seed %d: key %d admitted %d tokens at ms %d; its exact bucket (debt %s ms) denies", seed, i, n, ms-start, o.d.FloatString(3))
			}
		}
		// Quiescent phase: decisions read now, checked as time moves on.
		now := clk.NowMillis()
		var ev []a89bkEvent
		for i := range orc {
			orc[i].advance(now)
			n := 1 + rng.IntN(20)
			d := l.PeekN(clk.Now(), key(i), n)
			tok := l.TokensAt(clk.Now(), key(i))
			if exact, _ := new(big.Rat).Sub(big.NewRat(20, 1), new(big.Rat).Quo(orc[i].d, big.NewRat(100, 1))).Float64(); tok > exact+1e-9 {
				t.Fatalf("seed %d: key %d reads %v tokens; its exact bucket has %v", seed, i, tok, exact)
			}
			if rem := int(math.Floor(tok)); !d.Allowed && d.Remaining != max(rem, 0) {
				t.Fatalf("seed %d: key %d: Remaining %d with %v tokens", seed, i, d.Remaining, tok)
			}
			ms := func(x time.Duration) int64 { return now + x.Milliseconds() }
			if !d.Allowed {
				denied++
				if orc[i].d.Sign() == 0 {
					floored++ // the key owes nothing: its debt is a floor's (or a twin's)
				}
				ev = append(ev, a89bkEvent{ms(d.RetryAfter) - 1, i, 0, n, 0, "RetryAfter-1ms"}, a89bkEvent{ms(d.RetryAfter), i, 1, n, 0, "RetryAfter"})
				if d.NextAfter > 0 {
					ev = append(ev, a89bkEvent{ms(d.NextAfter) - 1, i, 4, 0, d.Remaining, "NextAfter-1ms"}, a89bkEvent{ms(d.NextAfter), i, 5, 0, d.Remaining, "NextAfter"})
				}
				if d.ResetAfter > 0 {
					ev = append(ev, a89bkEvent{ms(d.ResetAfter) - 1, i, 2, 0, 0, "ResetAfter-1ms"}, a89bkEvent{ms(d.ResetAfter), i, 3, 0, 0, "ResetAfter"})
				}
			}
		}
		if denied < 50 || floored < 5 {
			t.Fatalf("seed %d: %d keys denied at the quiescent point, %d of them owing nothing; want >= 50 and >= 5 (floors)", seed, denied, floored)
		}
		sort.SliceStable(ev, func(a, b int) bool { return ev[a].ms < ev[b].ms })
		for _, e := range ev {
			if e.ms > clk.NowMillis() {
				clk.Set(e.ms)
			}
			at := clk.Now()
			switch e.kind {
			case 0, 1:
				if got := l.PeekN(at, key(e.key), e.n).Allowed; got != (e.kind == 1) {
					t.Errorf("seed %d: key %d PeekN(%d) at %s (+%d ms): allowed %v", seed, e.key, e.n, e.cause, e.ms-now, got)
				}
			default:
				tok := l.TokensAt(at, key(e.key))
				var bad bool
				switch e.kind {
				case 2:
					bad = tok >= 20
				case 3:
					bad = tok != 20
				case 4:
					bad = int(math.Floor(tok)) > e.rem
				case 5:
					bad = int(math.Floor(tok)) <= e.rem
				}
				if bad {
					t.Errorf("seed %d: key %d at %s (+%d ms): %v tokens (Remaining was %d)", seed, e.key, e.cause, e.ms-now, tok, e.rem)
				}
			}
		}
		t.Logf("seed %d: %d admissions, %d keys denied at the quiescent point (%d owing nothing), %d checks", seed, admitted, denied, floored, len(ev))
	}
}
