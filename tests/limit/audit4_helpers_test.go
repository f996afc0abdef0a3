package limit_test

// Audit 4: shared helpers of the audit4_*_test.go files (policies and
// reservations of package limit under concurrency, on both engines).
//
// Every oracle here is in time form, in whole milliseconds: a key's debt
// is the time it takes to drain (limit/doc.go, "Tiers and changing the
// limit": "a key's debt is held as time to drain, and every policy of
// the limiter sees the same debt"); a request of n tokens under a policy
// of rate r costs n x 1000/r ms against a cap of burst x 1000/r ms, and
// a reservation is OK while the debt stays within MaxDebt / New's limit.
// All the policies used are exact (Exact / Tier.Exact report true, which
// the tests check), so every cost is a whole number of ms.

import (
	"fmt"
	"runtime"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
)

// a4engines are the two engines every audit 4 test runs on.
var a4engines = []limit.Engine{limit.Buckets, limit.CountMin}

// a4procs runs f for GOMAXPROCS 1, 2 and 8 and each engine, as subtests.
func a4procs(t *testing.T, f func(t *testing.T, procs int, e limit.Engine)) {
	for _, procs := range []int{1, 2, 8} {
		for _, e := range a4engines {
			t.Run(fmt.Sprintf("P%d/%v", procs, e), func(t *testing.T) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				f(t, procs, e)
			})
		}
	}
}

// a4opts returns the options selecting engine e with seed seed; the
// count-min gets a rotation Period of ten years, so that no rotation
// (and no amnesty, limit/doc.go "Rotation and amnesty") happens during a
// test: the exact bucket does not model it.
func a4opts(e limit.Engine, seed uint64) []limit.Option {
	o := []limit.Option{limit.WithEngine(e), limit.WithSeed(seed)}
	if e == limit.CountMin {
		o = append(o, limit.WithPeriod(10*365*24*time.Hour))
	}
	return o
}

// a4race runs f(g) on g goroutines released together, and waits.
func a4race(g int, f func(g int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range g {
		wg.Go(func() {
			<-start
			f(i)
		})
	}
	close(start)
	wg.Wait()
}

// a4pol is a policy in time form: a token's cost and the burst's, in ms.
type a4pol struct{ tok, cap int64 }

func a4polOf(lim limit.Limit, burst int) a4pol {
	tok := int64(1000 / float64(lim))
	return a4pol{tok: tok, cap: int64(burst) * tok}
}

// a4ms is d in whole ms.
func a4ms(d time.Duration) int64 { return int64(d / time.Millisecond) }

// a4kind is what a recorded call was.
type a4kind uint8

const (
	a4decide  a4kind = iota // DecideN: the Decision is recorded
	a4allow                 // AllowN, Allow: only the answer
	a4reserve               // ReserveN: OK
)

// a4rec is one decision made during a frozen round.
type a4rec struct {
	key  int
	kind a4kind
	n    int
	ok   bool
	pol  a4pol // the policy it was decided under (the most permissive possible one when not known)
	d    limit.Decision
}

// a4checkRound checks the calls recs made on keys during one round at a
// frozen time, every key alone in its cells and decided strictly, with
// no Cancel: d0[k] is key k's debt (ms) before the round, df[k] after,
// maxDebt the most a reservation may take a key to (ms).
//
//   - df[k] is exactly d0[k] plus the costs of the key's admissions
//     (strict mode: "exact under contention"; the clock does not move, so
//     nothing drains);
//   - some order of the admissions admits each within its own policy's
//     bucket (reservations within MaxDebt): no key is admitted beyond
//     its exact buckets;
//   - every recorded Decision is that of its own policy (Limit, Burst)
//     for a debt between d0 and df: Never iff n > burst, Remaining and
//     ResetAfter from the same debt, RetryAfter exact for it.
func a4checkRound(d0, df []int64, recs []a4rec, maxDebt int64) error {
	type job struct{ cost, thr int64 }
	jobs := make([][]job, len(d0))
	sum := make([]int64, len(d0))
	for _, r := range recs {
		c := int64(r.n) * r.pol.tok
		if r.kind == a4decide {
			if err := a4checkDecision(r, d0[r.key], df[r.key]); err != nil {
				return err
			}
		}
		if !r.ok {
			continue
		}
		thr := r.pol.cap - c
		if r.kind == a4reserve {
			thr = maxDebt - c
		}
		sum[r.key] += c
		jobs[r.key] = append(jobs[r.key], job{c, thr})
	}
	for k := range d0 {
		if df[k] != d0[k]+sum[k] {
			return fmt.Errorf("key %d: debt %d ms after the round, want exactly %d + %d ms of admitted costs", k, df[k], d0[k], sum[k])
		}
		// Each admission must end within its cap (debt before + cost <=
		// cap): deadlines on completion times, so admitting in order of
		// increasing cap (earliest deadline first) is feasible iff any
		// order is (Jackson's rule).
		js := jobs[k]
		sort.Slice(js, func(i, j int) bool { return js[i].thr+js[i].cost < js[j].thr+js[j].cost })
		pre := d0[k]
		for _, j := range js {
			if pre > j.thr {
				return fmt.Errorf("key %d: no order admits all %d admissions from a debt of %d ms (a debt of %d ms before one of cost %d ms, threshold %d ms)", k, len(js), d0[k], pre, j.cost, j.thr)
			}
			pre += j.cost
		}
	}
	return nil
}

// a4checkDecision checks a recorded Decision against its own policy for
// a debt read between lo and hi ms.
func a4checkDecision(r a4rec, lo, hi int64) error {
	d := r.d
	p := a4polOf(d.Limit, d.Burst)
	if p != r.pol {
		return fmt.Errorf("decision recorded under %+v reports Limit %v Burst %d", r.pol, float64(d.Limit), d.Burst)
	}
	c := int64(r.n) * p.tok
	bad := func(why string) error {
		return fmt.Errorf("key %d n %d under %v/s burst %d (debt in [%d, %d] ms): %s: %+v", r.key, r.n, float64(d.Limit), d.Burst, lo, hi, why, d)
	}
	if d.Never != (r.n > d.Burst) {
		return bad("Never is not n > Burst")
	}
	if d.Allowed != r.ok {
		return bad("Allowed differs from the answer recorded")
	}
	debt := a4ms(d.ResetAfter) // the debt the decision read (after its own debit when admitted)
	if d.ResetAfter%time.Millisecond != 0 || d.NextAfter%time.Millisecond != 0 {
		return bad("durations not whole ms")
	}
	switch {
	case d.Never:
		if d.Allowed || d.RetryAfter != limit.InfDuration {
			return bad("Never admitted or RetryAfter not InfDuration")
		}
		if debt < lo || debt > hi {
			return bad("ResetAfter outside the key's debts")
		}
	case d.Allowed:
		if d.RetryAfter != 0 {
			return bad("admitted with a RetryAfter")
		}
		if debt < lo+c || debt > hi {
			return bad("ResetAfter is not a debt after this admission")
		}
	default:
		if debt < lo || debt > hi || debt+c <= p.cap {
			return bad("denied on a debt that fits")
		}
		if a4ms(d.RetryAfter) != debt+c-p.cap || d.RetryAfter%time.Millisecond != 0 {
			return bad(fmt.Sprintf("RetryAfter is not the policy's for the debt read (want %d ms)", debt+c-p.cap))
		}
	}
	rem := max((p.cap-debt)/p.tok, 0)
	if int64(d.Remaining) != rem {
		return bad(fmt.Sprintf("Remaining is not the policy's for the debt read (want %d)", rem))
	}
	var next int64
	if debt > 0 {
		next = max(debt+(rem+1)*p.tok-p.cap, 0)
	}
	if a4ms(d.NextAfter) != next {
		return bad(fmt.Sprintf("NextAfter is not the policy's for the debt read (want %d ms)", next))
	}
	return nil
}

// a4debt returns key's debt in ms, read through probe, a tier of burst 1
// (a request of 2 is Never: it reads, debits nothing, and its
// ResetAfter is the debt's time to drain, whatever the limiter's current
// policy). PeekN writes nothing anyway.
func a4debt(probe *limit.Tier, t time.Time, key string) int64 {
	return a4ms(probe.PeekN(t, key, 2).ResetAfter)
}

// a4tally counts decisions per goroutine, for Stats.
type a4tally struct {
	mu       sync.Mutex
	adm, den uint64
}

func (c *a4tally) add(ok bool) {
	c.mu.Lock()
	if ok {
		c.adm++
	} else {
		c.den++
	}
	c.mu.Unlock()
}

// a4checkStats compares st with the tally.
func a4checkStats(t *testing.T, what string, st limit.Stats, c *a4tally) {
	t.Helper()
	if st.Admitted != c.adm || st.Denied != c.den {
		t.Fatalf("%s: Stats Admitted %d Denied %d, the calls returned %d admitted and %d denied", what, st.Admitted, st.Denied, c.adm, c.den)
	}
}

// a4keys returns n keys prefix-i.
func a4keys(prefix string, n int) []string {
	k := make([]string, n)
	for i := range k {
		k[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return k
}
