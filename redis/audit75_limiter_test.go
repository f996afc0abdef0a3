package redis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit75LimiterExactAcrossRebase: a Limiter (1 token/ms, burst 500,
// exact units), its generation rebased every 200 ms (lowered threshold),
// fake clock, integer requests: every decision equals the sequential
// token-bucket oracle's, and a denial's RetryAfter is never early and
// within the rebase slack of the exact wait; on both clients.
func TestAudit75LimiterExactAcrossRebase(t *testing.T) {
	forEachClient(t, func(t *testing.T, e *env) {
		clk := sketchtest.NewFakeClock()
		c := int64(1_700_000_000_000)
		clk.Set(c)
		const rebaseAt = 200
		l := e.limiter(t, LimiterConfig{Name: "a75l", Limit: PerSecond(1000, 500), Clock: clk, Levels: 2, CellsPerLevel: 256})
		l.Sketch().setRebaseAt(rebaseAt)
		ctx := context.Background()
		r := rand.New(rand.NewPCG(75, 1))
		debt, last := map[string]float64{}, map[string]int64{}
		keys := []string{"a", "b"}
		denied := 0
		for step := 0; step < 400; step++ {
			c += int64(r.IntN(60))
			clk.Set(c)
			k := keys[r.IntN(2)]
			n := float64(1 + r.IntN(250))
			d0 := max(0, debt[k]-float64(c-last[k]))
			d, err := l.AllowN(ctx, k, n)
			if err != nil {
				t.Fatal(err)
			}
			want := d0+n <= 500
			if d.Allowed != want {
				t.Fatalf("step %d at +%d: AllowN(%s, %v) allowed %v; the exact bucket (debt %v, burst 500): %v", step, c-1_700_000_000_000, k, n, d.Allowed, d0, want)
			}
			debt[k], last[k] = d0, c
			if want {
				debt[k] += n
				continue
			}
			denied++
			exact := time.Duration(d0+n-500) * time.Millisecond
			if d.RetryAfter < exact || d.RetryAfter > exact+rebaseLateAt(exact, rebaseAt)+time.Millisecond {
				t.Fatalf("step %d: RetryAfter %v; exact %v (slack %v)", step, d.RetryAfter, exact, rebaseLateAt(exact, rebaseAt))
			}
		}
		if denied < 20 || denied > 380 {
			t.Fatalf("setup: %d of 400 denied", denied)
		}
	})
}

// TestAudit75FailedCallAfterDueRebase: a rotating sketch (G 2) whose
// strings (1.1 MB each) were made under proto-max-bulk-len 2mb, with a
// rebase due on both generations, then the limit lowered to 1mb: every
// write fails (the rebase's whole-body SETRANGE comes first) and leaves
// both strings byte-for-byte unchanged; the estimates are the truth
// (never below), and once the limit is raised again the writes are exact.
func TestAudit75FailedCallAfterDueRebase(t *testing.T) {
	for _, lib := range []string{"rueidis", "go-redis"} {
		t.Run(lib, func(t *testing.T) {
			e := newEnv(t, lib, "standalone", "--proto-max-bulk-len", "2mb")
			addr := e.srv.addr()
			clk := sketchtest.NewFakeClock()
			t0 := int64(1_700_000_000_000)
			clk.Set(t0)
			s := e.sketch(t, Config{Name: "a75f", Levels: 2, CellsPerLevel: 70000, Decay: decay.Linear(1000),
				Lo: 0, Hi: 1 << 20, Aggregator: sketch.Min, Period: time.Second, Generations: 2, Clock: clk})
			s.setRebaseAt(500)
			ctx := context.Background()
			keys := []string{"k0", "k1", "k2", "k3", "k4", "k5"}
			for _, k := range keys {
				if err := s.Update(ctx, k, 1000); err != nil {
					t.Fatal(err)
				}
			}
			clk.Set(t0 + 600)
			snap := func() string {
				out := ""
				for i := 0; i < 2; i++ {
					r, err := rawDo(addr, "GETRANGE", fmt.Sprintf("{a75f}:g:%d", i), "0", "-1")
					if err != nil {
						t.Fatal(err)
					}
					out += fmt.Sprint(r)
				}
				return out
			}
			before := snap()
			if _, err := rawDo(addr, "CONFIG", "SET", "proto-max-bulk-len", "1mb"); err != nil {
				t.Fatal(err)
			}
			for _, k := range keys {
				if err := s.Update(ctx, k, 7); err == nil {
					t.Fatalf("Update(%s) succeeded under 1mb with a rebase due", k)
				}
				if ok, err := s.TryUpdate(ctx, k, 7, 1e6); err == nil {
					t.Fatalf("TryUpdate(%s) = %v succeeded under 1mb with a rebase due", k, ok)
				}
				if after := snap(); after != before {
					t.Fatalf("a failed write of %s changed the strings", k)
				}
				if q, err := s.Query(ctx, k); err != nil || q != 400 {
					t.Fatalf("Query(%s) = %v, %v; want 400 (1000 - 600 ms)", k, q, err)
				}
			}
			if _, err := rawDo(addr, "CONFIG", "SET", "proto-max-bulk-len", "2mb"); err != nil {
				t.Fatal(err)
			}
			for _, k := range keys {
				if q, err := s.UpdateAndQuery(ctx, k, 7); err != nil || q != 407 {
					t.Fatalf("UpdateAndQuery(%s, 7) = %v, %v; want 407", k, q, err)
				}
			}
			clk.Set(t0 + 1100) // the next generation: gen 0 of the ring is reset
			for _, k := range keys {
				if q, err := s.Query(ctx, k); err != nil || q != 0 {
					// The oldest live generation (made at t0 and rebased)
					// answers: 407 - 500 -> 0.
					t.Fatalf("Query(%s) at +1100 = %v, %v; want 0", k, q, err)
				}
			}
		})
	}
}
