package limit_test

// Audit 4: Multi (NewMulti over windows) racing on shared keys.
//
// The Multi type: "A request is admitted only if every window admits it;
// a denial by any window gives back what the windows before it took (all
// of it, unless a concurrent request touched the same cells ...). How:
// each window in order takes its share as a strict ReserveN does (exact
// under contention); when one denies, the windows already taken are
// refunded (Cancel's rule: exactly where nothing else touched the key's
// cells since, or, on the count-min, only in the same millisecond below
// MaxDebt; otherwise the take stays, on the safe side ...)"; "A
// concurrent reader can therefore observe ... the debit of a request
// that ends up denied: it can only make that reader deny more, never
// admit more". limit/doc.go: "A Multi's windows are Limiters: SetLimit
// on a window works". Multi.Stats: "Admitted and Denied count the
// Multi's own decisions ... which its windows do not count".

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

// TestAudit4MultiRace: a Multi of three windows (10/s burst 5, 2/s burst
// 8, 1/s burst 3) decides AllowN, Allow and DecideKeys (one key for
// every window, or a user key in the first two and a tenant key in the
// third) from racing goroutines, round after round on a clock frozen
// within a round; in some rounds a goroutine also flips the second
// window's burst (SetBurst 8 <-> 4). For every window and key:
//
//   - never over-admitted: its debt before the round plus the costs of
//     the calls the Multi admitted fits the window's most permissive
//     burst (one take per admitted call, each strict);
//   - never under-counted: its debt after the round is at least that
//     (refunds never give back more than the denied call took);
//   - on count-min windows refunds are exact (the same millisecond,
//     below MaxDebt, as every take here is within the burst): the debt
//     after the round is exactly that, whatever raced;
//   - otherwise (Buckets windows, whose refunds fail when the key was
//     written since) at most that plus what the denied calls could have
//     taken;
//   - in a round run by one goroutine, refunds are exact on both engines
//     (nothing else touched the cells).
//
// Decisions are consistent (Allowed iff RetryAfter 0, never Never for n
// within every burst), and the Multi's Stats count its calls exactly
// while its windows count nothing.
func TestAudit4MultiRace(t *testing.T) {
	for _, procs := range []int{1, 2, 8} {
		for _, conf := range []string{"count-min", "mixed"} {
			t.Run(fmt.Sprintf("P%d/%s", procs, conf), func(t *testing.T) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				a4multiRace(t, procs, conf)
			})
		}
	}
}

func a4multiRace(t *testing.T, procs int, conf string) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1 << 33)
	engs := []limit.Engine{limit.CountMin, limit.CountMin, limit.CountMin}
	if conf == "mixed" {
		// a Buckets first window, a count-min second (refunded, not
		// prechecked), a Buckets third (prechecked)
		engs = []limit.Engine{limit.Buckets, limit.CountMin, limit.Buckets}
	}
	specs := []struct {
		lim   limit.Limit
		burst int
	}{{10, 5}, {2, 8}, {1, 3}}
	ws := make([]*limit.Limiter, 3)
	probes := make([]*limit.Tier, 3)
	pols := make([]a4pol, 3)
	for i, s := range specs {
		w, err := limit.New(s.lim, s.burst, append(a4opts(engs[i], uint64(10+i)), limit.WithClock(clk), limit.WithName(fmt.Sprint("w", i)))...)
		if err != nil {
			t.Fatal(err)
		}
		if w.Engine() != engs[i] || !w.Exact() {
			t.Fatalf("window %d: engine %v exact %v", i, w.Engine(), w.Exact())
		}
		ws[i] = w
		probes[i], _ = w.Tier("probe", s.lim, 1)
		pols[i] = a4polOf(s.lim, s.burst)
	}
	m, err := limit.NewMulti(ws...)
	if err != nil {
		t.Fatal(err)
	}
	users := a4keys("u", 3)
	tenants := a4keys("t", 2)
	all := append(append([]string{}, users...), tenants...)
	idx := map[string]int{}
	for i, k := range all {
		idx[k] = i
	}
	// d0[w][k]: window w's debt for key k, ms
	d0 := make([][]int64, 3)
	for w := range d0 {
		d0[w] = make([]int64, len(all))
	}
	rng := rand.New(rand.NewPCG(uint64(procs), 5))
	var tally a4tally
	type call struct {
		keys [3]int
		n    int
		ok   bool
	}
	const per, rounds = 40, 24
	for round := range rounds {
		G := 6
		if round%4 == 3 {
			G = 1
		}
		flip := round%3 == 1 && G > 1
		if err := ws[1].SetBurst(8); err != nil {
			t.Fatal(err)
		}
		now := clk.Now()
		var stop atomic.Bool
		var fl sync.WaitGroup
		if flip {
			fl.Go(func() {
				for i := 0; !stop.Load(); i++ {
					if err := ws[1].SetBurst([]int{8, 4}[i%2]); err != nil {
						t.Error(err)
						return
					}
					runtime.Gosched()
				}
			})
		}
		calls := make([][]call, G)
		seeds := make([]uint64, G)
		for g := range seeds {
			seeds[g] = rng.Uint64()
		}
		a4race(G, func(g int) {
			r := rand.New(rand.NewPCG(seeds[g], 4))
			for i := range per {
				if i%8 == 0 {
					runtime.Gosched()
				}
				u := users[r.IntN(len(users))]
				n := 1 + r.IntN(3)
				c := call{n: n, keys: [3]int{idx[u], idx[u], idx[u]}}
				switch r.IntN(4) {
				case 0:
					c.ok = m.AllowN(now, u, n)
				case 1:
					c.n, c.ok = 1, m.Allow(u)
				case 2:
					d := m.DecideKeys(now, n, u)
					c.ok = d.Allowed
					a4checkMultiDecision(t, d, n)
				default:
					tn := tenants[r.IntN(len(tenants))]
					c.keys[2] = idx[tn]
					d := m.DecideKeys(now, n, u, u, tn)
					c.ok = d.Allowed
					a4checkMultiDecision(t, d, n)
				}
				tally.add(c.ok)
				calls[g] = append(calls[g], c)
			}
		})
		stop.Store(true)
		fl.Wait()
		if t.Failed() {
			t.FailNow()
		}
		adv := rng.Int64N(4000)
		for w := range ws {
			adm := make([]int64, len(all))
			den := make([]int64, len(all))
			for _, cs := range calls {
				for _, c := range cs {
					if c.ok {
						adm[c.keys[w]] += int64(c.n) * pols[w].tok
					} else {
						den[c.keys[w]] += int64(c.n) * pols[w].tok
					}
				}
			}
			for k, key := range all {
				df := a4debt(probes[w], now, key)
				lo := d0[w][k] + adm[k]
				hi := lo
				if engs[w] == limit.Buckets && G > 1 {
					hi += den[k]
				}
				if lo > pols[w].cap {
					t.Fatalf("round %d window %d key %s: over-admitted: debt %d ms + admitted %d ms past its burst of %d ms", round, w, key, d0[w][k], adm[k], pols[w].cap)
				}
				if df < lo || df > hi {
					t.Fatalf("round %d (%d goroutines) window %d (%v) key %s: debt %d ms after the round, want within [%d, %d] (debt %d + admitted %d, denied calls %d ms)", round, G, w, engs[w], key, df, lo, hi, d0[w][k], adm[k], den[k])
				}
				d0[w][k] = max(df-adv, 0)
			}
		}
		clk.Advance(time.Duration(adv) * time.Millisecond)
	}
	a4checkStats(t, "Multi", m.Stats(), &tally)
	for i, w := range ws {
		if st := w.Stats(); st.Admitted+st.Denied != 0 {
			t.Fatalf("window %d counted %d+%d decisions; only the Multi's calls were made", i, st.Admitted, st.Denied)
		}
	}
}

func a4checkMultiDecision(t *testing.T, d limit.Decision, n int) {
	if d.Never || d.Allowed != (d.RetryAfter == 0) || d.RetryAfter < 0 || d.Remaining < 0 {
		t.Errorf("Multi decision for n=%d: %+v", n, d)
	}
	if d.Policy != "w0" && d.Policy != "w1" && d.Policy != "w2" {
		t.Errorf("Multi decision names policy %q", d.Policy)
	}
}

// TestAudit4MultiRejectCostOrder: a per-user window (10/s, burst 2,
// RejectCost 2: a penalty for a user who keeps knocking) checked first,
// and a per-tenant window (100/s, burst 20, RejectCost 1) second, both
// exhausted. Alice's request is denied by her own window, the first in
// order ("NewMulti returns a Multi over the given windows, checked in
// order"; "Each window's RejectCost is charged only by the window that
// denies"), so the penalty is hers: her window owes 2 tokens more and
// the tenant's window, never reached, owes nothing more, so that Bob,
// of the same tenant, is not held back by Alice's knocking. And the
// tenant window's engine must not change any of it: "Both engines give
// the same decisions for a key alone in its cells and every guarantee
// below" (limit/doc.go, "Engines"; the one difference named is what a
// Cancel gives back).
func TestAudit4MultiRejectCostOrder(t *testing.T) {
	type out struct {
		alice, acme float64 // tokens of the two windows after Alice's denial
		bob         limit.Decision
	}
	outs := map[limit.Engine]out{}
	for _, e := range a4engines {
		clk := sketchtest.NewFakeClock()
		clk.Set(1 << 32)
		user := limit.MustNew(10, 2, limit.WithClock(clk), limit.WithRejectCost(2), limit.WithEngine(limit.CountMin), limit.WithSeed(1))
		tenant := limit.MustNew(100, 20, limit.WithClock(clk), limit.WithRejectCost(1), limit.WithEngine(e), limit.WithSeed(2))
		m, err := limit.NewMulti(user, tenant)
		if err != nil {
			t.Fatal(err)
		}
		now := clk.Now()
		if !m.DecideKeys(now, 2, "alice", "acme").Allowed || !tenant.AllowN(now, "acme", 18) {
			t.Fatal("setup denied")
		}
		if d := m.DecideKeys(now, 1, "alice", "acme"); d.Allowed {
			t.Fatalf("%v: admitted past both windows: %+v", e, d)
		}
		o := out{alice: user.TokensAt(now, "alice"), acme: tenant.TokensAt(now, "acme")}
		clk.Advance(10 * time.Millisecond) // the tenant window refills one token
		o.bob = m.DecideKeys(clk.Now(), 1, "bob", "acme")
		outs[e] = o
		if o.alice != -2 || o.acme != 0 {
			t.Errorf("tenant window on %v: after Alice's denial by her own window (the first), her window has %v tokens (want -2: its penalty) and the tenant's %v (want 0: not reached)", e, o.alice, o.acme)
		}
		if !o.bob.Allowed {
			t.Errorf("tenant window on %v: Bob, of the same tenant, denied 10 ms later (the tenant refilled one token): %+v", e, o.bob)
		}
	}
	if a, b := outs[limit.Buckets], outs[limit.CountMin]; a != b {
		t.Errorf("the tenant window's engine changes the outcome: Buckets %+v, CountMin %+v", a, b)
	}
}

// TestAudit4MultiRefundAtMaxDebt: one goroutine, nothing racing. A Multi
// of a slow window (1/s, burst 5, WithMaxDebt(5): MaxDebt may equal the
// burst, "it must be >= burst"), on either engine, and a fast one (10/s,
// burst 1, count-min). The key has 1 token left in the slow window and
// none in the fast one. A request is denied by the fast window (the slow
// one takes its last token, filling it to MaxDebt, then gives it back
// when the fast one denies); the Multi doc: "a denial by any
// window gives back what the windows before it took (all of it, unless a
// concurrent request touched the same cells ...)", and its RetryAfter
// is "the time when every window admits the request, so a retry at
// t+RetryAfter is admitted by all of them (if nothing else happens to
// the keys)". So the slow window keeps its token, and the retry at
// RetryAfter (100 ms, the fast window's) is admitted.
//
// The same with the doc's own recipe for slower policies: a window built
// as New(2, 5) (MaxDebt 10 tokens of 2/s: 5 s) then SetLimit(1) ("A
// Multi's windows are Limiters: SetLimit on a window works"; "limits down
// to New's/k need WithMaxDebt(k x burst)", here k = 2 and the default
// MaxDebt is 2 x burst), whose burst of 5 s is then all of MaxDebt.
func TestAudit4MultiRefundAtMaxDebt(t *testing.T) {
	for _, e := range a4engines {
		for _, how := range []string{"maxdebt", "setlimit"} {
			t.Run(e.String()+"/"+how, func(t *testing.T) {
				clk := sketchtest.NewFakeClock()
				clk.Set(1 << 32)
				var slow *limit.Limiter
				if how == "maxdebt" {
					slow = limit.MustNew(1, 5, append(a4opts(e, 1), limit.WithClock(clk), limit.WithMaxDebt(5))...)
				} else {
					slow = limit.MustNew(2, 5, append(a4opts(e, 1), limit.WithClock(clk))...)
					if err := slow.SetLimit(1); err != nil {
						t.Fatal(err)
					}
				}
				// the count-min: a Buckets window after the first would be read
				// before anything is taken
				fast := limit.MustNew(10, 1, limit.WithClock(clk), limit.WithSeed(2), limit.WithEngine(limit.CountMin))
				m, err := limit.NewMulti(slow, fast)
				if err != nil {
					t.Fatal(err)
				}
				now := clk.Now()
				if !slow.AllowN(now, "k", 4) || !fast.AllowN(now, "k", 1) {
					t.Fatal("setup denied")
				}
				d := m.DecideKeys(now, 1, "k")
				if d.Allowed {
					t.Fatalf("admitted past the fast window: %+v", d)
				}
				if got := slow.TokensAt(now, "k"); got != 1 {
					t.Errorf("the slow window has %v tokens after the denial by the fast one, want 1: its take was not given back", got)
				}
				if d.RetryAfter != 100*time.Millisecond {
					t.Errorf("denial %+v, want RetryAfter 100ms (the fast window's; the slow one has a token)", d)
				}
				clk.Advance(100 * time.Millisecond)
				if d2 := m.DecideKeys(clk.Now(), 1, "k"); !d2.Allowed {
					t.Errorf("the retry 100 ms later, when every window has room as the doc counts it, was denied: %+v", d2)
				}
			})
		}
	}
}
