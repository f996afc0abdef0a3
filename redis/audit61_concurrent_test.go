package redis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit61ConcurrentCacheWaits: one instance with the deny cache
// (PreCheck on and off), 6 goroutines, 4 keys, limits counting tokens
// (Burst not a float32, huge) and exact units, under several GOMAXPROCS.
// Each round, at one frozen ms: phase 1, every goroutine takes random
// amounts of random keys (admissions and denials race, replies learned
// out of order); phase 2, every goroutine asks for the full Burst of
// every key, which is denied while the key owes anything and admits
// nothing else. Every phase-2 denial's RetryAfter and ResetAfter are
// never early: at T + RetryAfter (and T + ResetAfter) the server's debt
// (a read-only Query) is 0. (Whether a cache denial is a server denial
// is not checked here: racing feeds both add, a wrong local denial the
// docs list as staleness source (3) in "Why the limit stays exact".)
// docs/distributed.md: "with one instance a local denial's waits are the
// server's, with concurrent callers too (... never early)".
func TestAudit61ConcurrentCacheWaits(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	run := 0
	lims := []Limit{PerSecond(0.3, 30000001), PerSecond(1000.0/13, 7), PerSecond(1000*3.14159, 1e6+0.5)}
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		for li, lim := range lims {
			for _, pre := range []bool{false, true} {
				run++
				audit61Concurrent(t, e, fmt.Sprintf("a61cc%d", run), lim, pre, uint64(run*10+li))
			}
		}
	})
}

func audit61Concurrent(t *testing.T, e *env, name string, lim Limit, pre bool, seed uint64) {
	ctx := context.Background()
	r := newAudit61Rig(t, e, name, lim, pre, false)
	l, clk := r.lc, r.clk
	or := newAudit60Oracle(t, e, l)
	keys := []string{"a", "b", "c", "d"}
	rng := rand.New(rand.NewPCG(seed, 1))
	drainMs := lim.Burst / lim.Rate * 1000
	type den struct {
		key         string
		retry, rest time.Duration
	}
	checked := 0
	for round := range 12 {
		T := clk.NowMillis()
		var wg sync.WaitGroup
		for g := range 6 {
			sub := rand.New(rand.NewPCG(seed, uint64(round*100+g)))
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 6 {
					k := keys[sub.IntN(len(keys))]
					n := float64(1 + sub.IntN(int(min(lim.Burst/3, 1e6))))
					if _, err := l.AllowN(ctx, k, n); err != nil {
						t.Error(err)
					}
				}
			}()
		}
		wg.Wait()
		var mu sync.Mutex
		var dens []den
		for range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for _, k := range keys {
					d, err := l.AllowN(ctx, k, lim.Burst)
					if err != nil {
						t.Error(err)
						return
					}
					if !d.Allowed {
						mu.Lock()
						dens = append(dens, den{k, d.RetryAfter, d.ResetAfter})
						mu.Unlock()
					}
				}
			}()
		}
		wg.Wait()
		for _, d := range dens {
			if d.retry <= 0 {
				continue
			}
			checked++
			if q := or.debtAt(t, d.key, T+d.retry.Milliseconds()); q > 0 {
				t.Errorf("%v pre=%v round %d: key %s denied the full Burst at %d with RetryAfter %v; at it the server's debt is %v units (want 0: never early)", lim, pre, round, d.key, T, d.retry, q)
			}
			if q := or.debtAt(t, d.key, T+d.rest.Milliseconds()); q > 0 {
				t.Errorf("%v pre=%v round %d: key %s: ResetAfter %v; at it the server's debt is %v units (want 0)", lim, pre, round, d.key, d.rest, q)
			}
		}
		clk.Advance(time.Duration(rng.Float64()*drainMs/3) * time.Millisecond)
	}
	if checked == 0 {
		t.Logf("%v pre=%v: no denials checked", lim, pre)
	}
	t.Logf("%v pre=%v: %d denials checked, %+v", lim, pre, checked, l.Stats())
}
