package httplimit_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit52MultiFieldPromisesNamedWindow: behind a Multi, every answer's
// RateLimit field (admissions, denials and Never decisions alike) names a
// window whose own state keeps what it says (doc.go: "r is that least
// (at most the named window's own) and t ... never a promise earlier than
// the named window keeps"): r is at most the named window's own whole
// tokens, and when t is sent and r equals them, the named window has a
// token more within t seconds. Retry-After, when sent, is never before
// the Decision's RetryAfter, and a retry at the Retry-After second is
// admitted when nothing else happens. Three exact windows on Buckets and
// on the count-min, random costs 1..13 (above one or two bursts: Never),
// random steps. (A Never decision naming a full window with t sent is
// TestAudit52FixedMultiNeverFullWindowGetsT; it is counted here, not
// failed.)
func TestAudit52MultiFieldPromisesNamedWindow(t *testing.T) {
	for _, eng := range []limit.Engine{limit.Buckets, limit.CountMin} {
		t.Run(fmt.Sprint(eng), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(52, uint64(eng)))
			clk := sketchtest.NewFakeClock()
			type win struct {
				name  string
				rate  limit.Limit
				burst int
			}
			wins := []win{{"a", 5, 8}, {"b", 1, 5}, {"c", limit.Every(2 * time.Second), 12}}
			var ls []*limit.Limiter
			byName := map[string]*limit.Limiter{}
			for _, w := range wins {
				l := limit.MustNew(w.rate, w.burst, limit.WithName(w.name), limit.WithClock(clk), limit.WithEngine(eng), limit.WithSeed(52))
				ls = append(ls, l)
				byName[w.name] = l
			}
			multi, err := limit.NewMulti(ls...)
			if err != nil {
				t.Fatal(err)
			}
			var cost int
			var last limit.Decision
			m, err := httplimit.New(multi, httplimit.WithCost(func(*http.Request) int { return cost }),
				httplimit.WithHook(func(_ *http.Request, _ string, d limit.Decision) { last = d }))
			if err != nil {
				t.Fatal(err)
			}
			h := m.Handler(ok)
			const remote = "192.0.2.52:1"
			const key = "192.0.2.52/32"
			counts := map[string]int{}
			for step := range 3000 {
				clk.Advance(time.Duration(rng.IntN(3000)) * time.Millisecond)
				cost = 1 + rng.IntN(4)
				if rng.IntN(6) == 0 {
					cost = 1 + rng.IntN(13)
				}
				w := get(h, remote)
				name, p, okf := audit26Item(w.Header().Get("RateLimit"))
				if !okf {
					t.Fatalf("step %d: RateLimit %q", step, w.Header().Get("RateLimit"))
				}
				l := byName[name]
				if l == nil {
					t.Fatalf("step %d: RateLimit names %q", step, name)
				}
				tok := l.Tokens(key)
				own := int64(math.Max(math.Floor(tok+1e-9), 0))
				r := p["r"]
				switch {
				case w.Code == 200:
					counts["admitted"]++
				case last.Never:
					counts["never"]++
				default:
					counts["denied"]++
				}
				if r > own {
					t.Fatalf("step %d cost %d (%d): RateLimit %s: r=%d above the named window's own %d (tokens %.4f); decision %+v",
						step, cost, w.Code, w.Header().Get("RateLimit"), r, own, tok, last)
				}
				if tt, has := p["t"]; has && r == own {
					burst := int64(l.Burst())
					if own >= burst && last.Never {
						// TestAudit52FindingMultiNeverFullWindowGetsT.
						counts["never-full-with-t"]++
						continue
					}
					need := (float64(own+1) - tok) / float64(l.Limit()) // seconds to the next whole token
					if own >= burst || need > float64(tt)+0.002 {
						t.Fatalf("step %d cost %d (%d): RateLimit %s: the named window holds %.4f tokens (burst %d); its next token is %.3f s away, later than t=%d; decision %+v",
							step, cost, w.Code, w.Header().Get("RateLimit"), tok, burst, need, tt, last)
					}
				}
				if ra := w.Header().Get("Retry-After"); ra != "" {
					var s int64
					fmt.Sscan(ra, &s)
					if time.Duration(s)*time.Second < last.RetryAfter || last.Never {
						t.Fatalf("step %d: Retry-After %s for %+v", step, ra, last)
					}
					if rng.IntN(3) == 0 {
						clk.Advance(time.Duration(s) * time.Second)
						if w2 := get(h, remote); w2.Code != 200 {
							t.Fatalf("step %d: retry of cost %d after Retry-After %s: %d (%+v)", step, cost, ra, w2.Code, last)
						}
					}
				} else if w.Code == 429 && !last.Never {
					t.Fatalf("step %d: retryable 429 without Retry-After: %+v", step, last)
				}
			}
			t.Logf("%v", counts)
			if counts["never"] == 0 || counts["denied"] == 0 || counts["admitted"] == 0 {
				t.Fatalf("walk too narrow: %v", counts)
			}
		})
	}
}

// Finding: a Multi's Never decision can name a full window (the first
// whose burst the cost exceeds) while its NextAfter is another window's,
// so the RateLimit field promises that window more quota in t seconds
// though it is full and can never grow:
//
//	windows a (5/s, burst 8), b (1/s, burst 5); the key has spent 3 of a;
//	a request of 6: b can never admit it (6 > 5), a holds 5 of 8.
//	Decision {Never, Policy b, Burst 5, Remaining 5, NextAfter 200ms}
//	RateLimit: "b";r=5;t=1
//
// Promises: httplimit doc.go, Answers: "t, the seconds until more quota
// is available, its NextAfter (the next whole token) rounded up, left out
// when the bucket is full"; limit/decision.go, Decision.NextAfter: "0
// when the bucket is full (Remaining == Burst)" (here Remaining == Burst
// == 5 and NextAfter is 200 ms). multi.go's tie rule in combine (the
// later NextAfter of the windows holding the least Remaining) takes a's
// NextAfter while the Decision names b; SetHeaders' Multi adjustment
// (t = RetryAfter) is skipped for Never decisions.
//
// Expected: no t (b is full) and NextAfter 0, or a Decision naming a
// window whose own next token is at t. (Fixed: combine gives NextAfter 0
// when a window holding the least Remaining is full.)
func TestAudit52FixedMultiNeverFullWindowGetsT(t *testing.T) {
	for _, eng := range []limit.Engine{limit.Buckets, limit.CountMin} {
		clk := sketchtest.NewFakeClock()
		a := limit.MustNew(5, 8, limit.WithName("a"), limit.WithClock(clk), limit.WithEngine(eng))
		b := limit.MustNew(1, 5, limit.WithName("b"), limit.WithClock(clk), limit.WithEngine(eng))
		multi, err := limit.NewMulti(a, b)
		if err != nil {
			t.Fatal(err)
		}
		var last limit.Decision
		m, err := httplimit.New(multi, httplimit.WithCost(func(*http.Request) int { return 6 }),
			httplimit.WithHook(func(_ *http.Request, _ string, d limit.Decision) { last = d }))
		if err != nil {
			t.Fatal(err)
		}
		const key = "192.0.2.52/32"
		if !a.AllowN(a.Now(), key, 3) {
			t.Fatal("a did not admit 3")
		}
		w := get(m.Handler(ok), "192.0.2.52:1")
		rl := w.Header().Get("RateLimit")
		name, p, okf := audit26Item(rl)
		if w.Code != 429 || !last.Never || !okf || name != "b" {
			t.Fatalf("%v: %d %q %+v", eng, w.Code, rl, last)
		}
		if _, has := p["t"]; has || last.NextAfter != 0 {
			t.Errorf("%v: RateLimit %s for a Never decision naming b, which is full (b holds %.3f tokens of burst %d: no more quota can become available); Decision %+v has Remaining == Burst and NextAfter %v (limit: \"0 when the bucket is full (Remaining == Burst)\"; httplimit: t \"left out when the bucket is full\")",
				eng, rl, b.Tokens(key), b.Burst(), last, last.NextAfter)
		}
	}
}
