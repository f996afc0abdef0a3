package redis

// Audit 96: Decision's field promises on random requests (Decision:
// "Remaining is Burst minus the key's debt after the decision (the tokens
// a request could take right now), >= 0"; "RetryAfter is -1 when the
// request was allowed"; when denied "the exact wait ... after which the
// same request fits"; "ResetAfter is the time until the key's debt drains
// to 0"), for the server, the deny cache (PreCheck) and the LocalFallback
// with the server killed, at exact limits and limits counting tokens
// (fractional Bursts, Bursts a float32 does not hold). And Sketch(): "a
// score s is s x Burst / Hi tokens".

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

func TestAudit96RedisDecisionInvariants(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	ctx := context.Background()
	lims := []Limit{PerSecond(10, 5), PerSecond(3, 7), PerSecond(7.0/3, 5.14), PerSecond(1000.0/13, 7.7),
		PerSecond(math.Pi, 9.3), PerSecond(0.3, 3e7+1), PerSecond(10, 100.0/3)}
	type rig struct {
		l    *Limiter
		clk  *sketchtest.FakeClock
		lim  Limit
		mode string
	}
	var rigs []rig
	for i, lim := range lims {
		for _, mode := range []string{"server", "cache", "fallback"} {
			clk := sketchtest.NewFakeClock()
			clk.Set(1_700_000_000_000)
			cfg := LimiterConfig{Name: fmt.Sprintf("a96inv%d%s", i, mode), Limit: lim, Clock: clk, Timeout: time.Second, CellsPerLevel: 1000}
			switch mode {
			case "cache":
				cfg.DenyCacheCells, cfg.PreCheck = 512, true
			case "fallback":
				cfg.Policy, cfg.Instances = LocalFallback, 3
			}
			rigs = append(rigs, rig{e.limiter(t, cfg), clk, lim, mode})
		}
	}
	run := func(r rig, seed uint64, burst float64, down bool) {
		rng := rand.New(rand.NewPCG(seed, 96))
		full := min(1000*burst/r.lim.Rate, 1e9)
		denials := 0
		for s := range 200 {
			r.clk.Advance(time.Duration(rng.Float64()*rng.Float64()*full/4) * time.Millisecond)
			n := min(burst*rng.Float64()*1.1, burst)
			if rng.IntN(2) == 0 {
				n = min(math.Floor(n)+1, math.Floor(burst))
			}
			where := fmt.Sprintf("%s %+v down=%v step %d n=%v", r.mode, r.lim, down, s, n)
			d, err := r.l.AllowN(ctx, "k", n)
			if (err != nil) != down {
				t.Fatalf("%s: %v", where, err)
			}
			if d.Remaining < 0 || d.Remaining > d.Limit.Burst {
				t.Fatalf("%s: %+v: Remaining outside [0, Burst]", where, d)
			}
			if d.Allowed {
				if d.RetryAfter != -1 {
					t.Fatalf("%s: %+v: allowed with RetryAfter %v", where, d, d.RetryAfter)
				}
				continue
			}
			denials++
			// Denied: the room left is less than n, and the wait for n
			// is positive and no longer than the wait for the whole debt.
			if d.Remaining >= n || d.RetryAfter <= 0 || d.RetryAfter > d.ResetAfter {
				t.Fatalf("%s: %+v: a denial with Remaining >= n, or RetryAfter not in (0, ResetAfter]", where, d)
			}
			if !down {
				q, err := r.l.Sketch().Query(ctx, "k")
				if err != nil {
					t.Fatal(err)
				}
				tokens := q * r.lim.Burst / r.l.Sketch().Config().Hi
				if r.mode == "server" && math.Abs(r.lim.Burst-tokens-d.Remaining) > r.lim.Burst*1e-12 {
					t.Fatalf("%s: %+v: Sketch().Query %v units = %v tokens; Remaining says %v owed", where, d, q, tokens, r.lim.Burst-d.Remaining)
				}
			}
		}
		if denials == 0 {
			t.Fatalf("%s %+v down=%v: setup: no denial", r.mode, r.lim, down)
		}
	}
	for i, r := range rigs {
		run(r, uint64(i), r.lim.Burst, false)
	}
	e.srv.kill()
	for i, r := range rigs {
		if r.mode == "fallback" {
			run(r, uint64(100+i), divDown(r.lim.Burst, 3), true) // the fallback's Burst, rounded down (audit 149)
		}
	}
}
