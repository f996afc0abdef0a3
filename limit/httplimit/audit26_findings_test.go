package httplimit_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// Finding: the package doc promises the fields "as Structured Fields
// (RFC 9651)", whose Integers have at most 15 digits (windowSeconds and
// ceilSeconds clamp w and t to 999,999,999,999,999 for that reason), and
// New refuses only a negative burst. But q (the burst) and r (Remaining)
// are written with strconv.Itoa unclamped: a Limiter whose burst is
// above 10^15 - 1 gets a RateLimit-Policy and a RateLimit field that no
// RFC 9651 parser accepts (the whole field is then ignored). The Redis
// module's Limiter reaches it: its Policies report floor(Limit.Burst)
// up to 2^53, and its config accepts any Burst with Burst/Rate <= 9e9 s
// (Burst 1e16 at Rate 1e7/s).
//
// Fixed when New refuses such a burst (a ConfigError), or when q and r
// are clamped to the largest sf-integer.
func TestAudit26FixedHugeBurstNotAnSFInteger(t *testing.T) {
	for _, burst := range []int{1 << 53, 1_000_000_000_000_000} {
		pol := limit.Policy{Name: "global", Limit: 1e7, Burst: burst}
		m, err := httplimit.New(audit14Limiter{[]limit.Policy{pol}})
		if err != nil {
			if !errors.Is(err, sketch.ErrInvalidConfig) {
				t.Fatalf("burst %d: New refused with %v; want a ConfigError", burst, err)
			}
			continue
		}
		h := http.Header{}
		m.SetHeaders(h, limit.Decision{Allowed: true, Limit: pol.Limit, Burst: burst, Remaining: burst - 1, Policy: "global", NextAfter: time.Millisecond})
		for _, f := range []string{"RateLimit-Policy", "RateLimit"} {
			if _, _, ok := audit26Item(h.Get(f)); !ok {
				t.Errorf("burst %d: %s: %s is not a valid Structured Field (an Integer has at most 15 digits)", burst, f, h.Get(f))
			}
		}
	}
}

// Finding: RateLimit-Policy's w is documented as "the time to refill it
// from empty" (package doc; docs/migrating.md: "the announced quota is
// the enforced one"), but it is ceil(burst/Limit) of the nominal Limit
// that Policies reports. A limiter whose rate is not held exactly
// (limit's doc, "Exactness": the rate "rounded down by at most 2^-8 of
// itself", and beyond MaxDebt 65535 adds that round up) refills more
// slowly than that: a key emptied by a full burst is not full again
// after w seconds, and a client pacing itself at q per w is denied.
// Every(999ms) x 10000 announces w=9990 and refills in 10000 s;
// Every(1min) x 4096 announces w=245760 and refills in 245891.072 s.
//
// Fixed when w is at least the enforced bucket's refill time (for
// example, w from the limiter's effective rate, which limit.Policy
// could carry, or rounded up by the documented bound when the limiter
// is not Exact).
func TestAudit26FixedWindowShorterThanRefill(t *testing.T) {
	for _, c := range []struct {
		every time.Duration
		burst int
	}{{999 * time.Millisecond, 10000}, {time.Minute, 4096}, {3 * time.Second, 100000}} {
		clk := sketchtest.NewFakeClock()
		l := limit.MustNew(limit.Every(c.every), c.burst, limit.WithClock(clk), limit.WithName("p"))
		var last limit.Decision
		h := httplimit.Wrap(l, ok, httplimit.WithCost(func(*http.Request) int { return c.burst }),
			httplimit.WithHook(func(_ *http.Request, _ string, d limit.Decision) { last = d }))
		w := get(h, "192.0.2.1:1")
		_, p, okp := audit26Item(w.Header().Get("RateLimit-Policy"))
		if w.Code != 200 || !okp {
			t.Fatalf("every %v burst %d: %d %q", c.every, c.burst, w.Code, w.Header().Get("RateLimit-Policy"))
		}
		clk.Advance(time.Duration(p["w"]) * time.Second)
		if w2 := get(h, "192.0.2.1:1"); w2.Code != 200 {
			t.Errorf("every %v burst %d (Exact %v): RateLimit-Policy %q, yet a full burst %d s after emptying the bucket is %d (RetryAfter %v; the bucket refills in %v)",
				c.every, c.burst, l.Exact(), w.Header().Get("RateLimit-Policy"), p["w"], w2.Code, last.RetryAfter, time.Duration(p["w"])*time.Second+last.RetryAfter)
		}
	}
}
