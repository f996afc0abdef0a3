package httplimit_test

// Audit 85: requests that can never be admitted (doc.go, "Answers": "A
// request whose cost exceeds the burst can never be admitted: 429
// without Retry-After, and the body says not to retry") for a Tier and a
// Multi, at costs up to math.MaxInt, and exactly-burst admission of
// concurrent requests of one key through a Tier's handler.

import (
	"encoding/json"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

func TestAudit85HTTPNeverHugeCosts(t *testing.T) {
	clk := limittest.NewFakeClock()
	base := limit.MustNew(10, 20, limit.WithClock(clk), limit.WithMaxDebt(400), limit.WithName("base"))
	tier, err := base.Tier("free", 0.5, 3)
	if err != nil {
		t.Fatal(err)
	}
	m, err := limit.NewMulti(limit.MustNew(5, 8, limit.WithName("s"), limit.WithClock(clk)),
		limit.MustNew(0.1, 30, limit.WithName("m"), limit.WithClock(clk)))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		l     httplimit.Limiter
		burst int
		pol   string
		ip    string
	}{{"tier", tier, 3, "free", "192.0.2.77"}, {"base", base, 20, "base", "192.0.2.78"}, {"multi", m, 8, "s", "192.0.2.79"}} {
		for _, cost := range []int{c.burst + 1, 31, 1 << 24, 1<<24 + 1, 1 << 40, math.MaxInt32, math.MaxInt} {
			for _, problem := range []bool{false, true} {
				h := httplimit.Wrap(c.l, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(200) }),
					httplimit.WithCost(func(*http.Request) int { return cost }), httplimit.WithProblemJSON(problem))
				w := audit85httpServe(h, c.ip+":1")
				if w.Code != 429 || w.Header().Get("Retry-After") != "" {
					t.Fatalf("%s cost %d: %d, Retry-After %q; want 429 without it", c.name, cost, w.Code, w.Header().Get("Retry-After"))
				}
				if !problem {
					if !strings.Contains(w.Body.String(), "do not retry") {
						t.Errorf("%s cost %d: body %q does not say not to retry", c.name, cost, w.Body.String())
					}
					continue
				}
				var p httplimit.Problem
				if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || p.RetryAfter != nil || p.Status != 429 ||
					len(p.ViolatedPolicies) != 1 || p.ViolatedPolicies[0] != c.pol || !strings.Contains(p.Detail, "do not retry") {
					t.Errorf("%s cost %d: problem %s (%v)", c.name, cost, w.Body.String(), err)
				}
			}
		}
		// Nothing was debited: a full burst is still admitted.
		h := httplimit.Wrap(c.l, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(200) }),
			httplimit.WithCost(func(*http.Request) int { return c.burst }))
		if w := audit85httpServe(h, c.ip+":1"); w.Code != 200 {
			t.Errorf("%s: a full burst after the Never requests: %d %q", c.name, w.Code, w.Header().Get("RateLimit"))
		}
	}
}

// Tiers of one limiter share each key's debt: concurrent requests of one
// key on a tier's route and the base route, clock frozen, are admitted
// no further than a serial order would: the free tier (0.5/s, burst 3 =
// 60 base tokens of debt at 10/s) alone admits exactly 3; with the base
// route (burst 20) racing it, the final debt never exceeds 60 base
// tokens.
func TestAudit85HTTPTierConcurrent(t *testing.T) {
	for round := range 20 {
		clk := limittest.NewFakeClock()
		base := limit.MustNew(10, 20, limit.WithClock(clk), limit.WithMaxDebt(400), limit.WithName("base"))
		free, err := base.Tier("free", 0.5, 3)
		if err != nil {
			t.Fatal(err)
		}
		var freeOK, baseOK atomic.Int64
		mk := func(l httplimit.Limiter, n *atomic.Int64) http.Handler {
			return httplimit.Wrap(l, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { n.Add(1) }))
		}
		hf, hb := mk(free, &freeOK), mk(base, &baseOK)
		mixed := round%2 == 1
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range 16 {
			h := hf
			if mixed && i%2 == 1 {
				h = hb
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for range 4 {
					audit85httpServe(h, "192.0.2.60:1")
				}
			}()
		}
		close(start)
		wg.Wait()
		f, b := freeOK.Load(), baseOK.Load()
		if !mixed && f != 3 {
			t.Fatalf("round %d: the free tier admitted %d of 64; want exactly 3", round, f)
		}
		// Each free admission is 20 base tokens of debt and needs the
		// debt to stay within 60 after it, each base one within 20: the
		// last admission leaves at most 60.
		if mixed && (f > 3 || b > 20 || f*20+b > 60) {
			t.Fatalf("round %d: free %d and base %d admitted: %d base tokens of debt, past the free tier's 60", round, f, b, f*20+b)
		}
	}
}
