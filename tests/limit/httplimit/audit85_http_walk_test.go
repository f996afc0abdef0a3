package httplimit_test

// Audit 85: retry walks through the handler on a fake clock for the
// limiters audit 81's walks left out: Tiers of one limiter sharing each
// key's debt (exact and inexact tier rates, both engines), and a Multi
// whose RateLimit t and X-RateLimit-Reset are checked (audit 81 checked
// them on a single limiter only). For every answer: Retry-After is
// RetryAfter rounded up (at least 1), a retry exactly then is admitted
// and, for a RetryAfter of whole seconds, one 1 ms before is not; t
// seconds after an answer of r the policy it names has more than r; Reset
// seconds after, every policy is full (doc.go, "Answers").

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// audit85httpParams reads r and t of the RateLimit item naming name.
func audit85httpParams(field, name string) (r, tt int64, ok bool) {
	for _, item := range strings.Split(field, ", ") {
		parts := strings.Split(item, ";")
		if parts[0] != strconv.Quote(name) {
			continue
		}
		r = -1
		for _, p := range parts[1:] {
			k, v, _ := strings.Cut(p, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "r":
				r = n
			case "t":
				tt = n
			}
		}
		return r, tt, true
	}
	return 0, 0, false
}

type audit85httpKind struct {
	name   string
	routes []httplimit.Limiter
	// peek returns Remaining of policy name for key now (a one-token
	// peek, so +1 when it fits), and whether it is full.
	peek func(now time.Time, name string) (rem int, full bool)
	all  []string // every policy name
}

func audit85httpKinds(t *testing.T, clk *limittest.FakeClock) []audit85httpKind {
	t.Helper()
	const key = "192.0.2.9/32"
	var kinds []audit85httpKind
	for _, eng := range []limit.Engine{limit.Buckets, limit.CountMin} {
		l, err := limit.New(10, 20, limit.WithClock(clk), limit.WithEngine(eng), limit.WithMaxDebt(200), limit.WithName("base"))
		if err != nil {
			t.Fatal(err)
		}
		free, err := l.Tier("free", 0.7, 3)
		if err != nil {
			t.Fatal(err)
		}
		mid, err := l.Tier("mid", limit.Every(1300*time.Millisecond), 5)
		if err != nil {
			t.Fatal(err)
		}
		one, err := l.Tier("one", 1, 2)
		if err != nil {
			t.Fatal(err)
		}
		byName := map[string]interface {
			PeekN(time.Time, string, int) limit.Decision
			Burst() int
		}{"base": l, "free": free, "mid": mid, "one": one}
		kinds = append(kinds, audit85httpKind{
			name:   "tiers/" + eng.String(),
			routes: []httplimit.Limiter{free, mid, l, one},
			all:    []string{"base", "free", "mid", "one"},
			peek: func(now time.Time, name string) (int, bool) {
				p := byName[name]
				d := p.PeekN(now, key, 1)
				if !d.Allowed {
					return 0, false
				}
				return d.Remaining + 1, d.Remaining+1 == p.Burst()
			},
		})
	}
	a := limit.MustNew(limit.Every(333*time.Millisecond), 4, limit.WithName("a"), limit.WithClock(clk))
	b := limit.MustNew(2.5, 7, limit.WithName("b"), limit.WithClock(clk))
	c := limit.MustNew(limit.Every(2300*time.Millisecond), 9, limit.WithName("c"), limit.WithClock(clk), limit.WithEngine(limit.CountMin))
	e := limit.MustNew(1, 3, limit.WithName("e"), limit.WithClock(clk))
	m, err := limit.NewMulti(a, b, c, e)
	if err != nil {
		t.Fatal(err)
	}
	ws := map[string]*limit.Limiter{"a": a, "b": b, "c": c, "e": e}
	kinds = append(kinds, audit85httpKind{
		name:   "multi",
		routes: []httplimit.Limiter{m},
		all:    []string{"a", "b", "c", "e"},
		peek: func(now time.Time, name string) (int, bool) {
			d := ws[name].PeekN(now, key, 1)
			if !d.Allowed {
				return 0, false
			}
			return d.Remaining + 1, d.Remaining+1 == ws[name].Burst()
		},
	})
	return kinds
}

func TestAudit85HTTPRetryWalkTiersMulti(t *testing.T) {
	clk := limittest.NewFakeClock()
	clk.Set(1_700_000_000_123)
	for _, k := range audit85httpKinds(t, clk) {
		var cost int
		var last limit.Decision
		var hs []http.Handler
		for _, l := range k.routes {
			hs = append(hs, httplimit.Wrap(l, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(200) }),
				httplimit.WithLegacyHeaders(true),
				httplimit.WithCost(func(*http.Request) int { return cost }),
				httplimit.WithHook(func(_ *http.Request, _ string, d limit.Decision) { last = d })))
		}
		totalExact := 0
		for _, seed := range []uint64{88172645463325252, 7, 1 << 40, 0xdeadbeef, 12345678901} {
			x := seed
			next := func(n uint64) uint64 { x ^= x << 13; x ^= x >> 7; x ^= x << 17; return x % n }
			denials, exact := 0, 0
			for i := range 300 {
				cost = 1 + int(next(3))
				h := hs[next(uint64(len(hs)))]
				if next(2) == 0 {
					clk.Advance(time.Duration(next(1200)) * time.Millisecond)
				} else {
					clk.Advance(time.Duration(next(3)) * time.Second)
				}
				w := audit85httpServe(h, "192.0.2.9:1")
				d := last
				// Fields from the Decision.
				if w.Code == 429 && !d.Never {
					ra, err := strconv.ParseInt(w.Header().Get("Retry-After"), 10, 64)
					want := max(int64((d.RetryAfter+time.Second-1)/time.Second), 1)
					if err != nil || ra != want {
						t.Fatalf("%s step %d: Retry-After %q for RetryAfter %v; want %d", k.name, i, w.Header().Get("Retry-After"), d.RetryAfter, want)
					}
				}
				r, tt, ok := audit85httpParams(w.Header().Get("RateLimit"), d.Policy)
				if !ok {
					t.Fatalf("%s step %d: RateLimit %q lacks %q", k.name, i, w.Header().Get("RateLimit"), d.Policy)
				}
				reset, _ := strconv.ParseInt(w.Header().Get("X-RateLimit-Reset"), 10, 64)
				switch {
				case w.Code == 429 && !d.Never:
					denials++
					ra, _ := strconv.ParseInt(w.Header().Get("Retry-After"), 10, 64)
					if tt > ra {
						t.Fatalf("%s step %d: t %d after Retry-After %d", k.name, i, tt, ra)
					}
					if d.RetryAfter%time.Second == 0 {
						exact++
						clk.Advance(time.Duration(ra)*time.Second - time.Millisecond)
						if w := audit85httpServe(h, "192.0.2.9:1"); w.Code != 429 {
							t.Fatalf("%s step %d: cost %d admitted 1 ms before a whole-second Retry-After %d (%v)", k.name, i, cost, ra, d.RetryAfter)
						}
						clk.Advance(time.Millisecond)
					} else {
						clk.Advance(time.Duration(ra) * time.Second)
					}
					if w := audit85httpServe(h, "192.0.2.9:1"); w.Code != 200 {
						t.Fatalf("%s step %d: cost %d denied at Retry-After %d s (RetryAfter %v): %d %q", k.name, i, cost, ra, d.RetryAfter, w.Code, w.Header().Get("RateLimit"))
					}
				case next(4) == 0 && tt > 0:
					clk.Advance(time.Duration(tt) * time.Second)
					if rem, _ := k.peek(clk.Now(), d.Policy); int64(rem) <= r {
						t.Fatalf("%s step %d: %q (code %d, %+v), %d s later %q has %d; want more than r=%d", k.name, i, w.Header().Get("RateLimit"), w.Code, d, tt, d.Policy, rem, r)
					}
					if reset > tt {
						clk.Advance(time.Duration(reset-tt) * time.Second)
					}
					if reset >= tt {
						for _, n := range k.all {
							if _, full := k.peek(clk.Now(), n); !full {
								t.Fatalf("%s step %d: X-RateLimit-Reset %d, then %q is not full", k.name, i, reset, n)
							}
						}
					}
				}
			}
			if denials < 20 {
				t.Errorf("%s: %d denials: the walk is too tame", k.name, denials)
			}
			totalExact += exact
		}
		if totalExact == 0 {
			t.Errorf("%s: no denial of whole seconds", k.name)
		}
		t.Logf("%s: %d denials of whole seconds", k.name, totalExact)
	}
}
