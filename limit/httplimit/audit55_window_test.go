package httplimit_test

import (
	"math"
	"net/http"
	"testing"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
)

// a55Ulp is the spacing of float64 at x (> 0).
func a55Ulp(x float64) float64 { return math.Nextafter(x, math.Inf(1)) - x }

// TestAudit55FixedWindowSnapsBeyondFourUlps (fixed: the snap is 4 ulps of the whole number, math.Nextafter): fields.go windowSeconds
// says "A quotient within 4 ulps of a whole number is that number", and
// doc.go says w is "ceil(burst/rate) for other limiters" (a limiter that
// registers no refill). The snap is coded as |w - r| <= 2^-50 x r, which
// is 4 ulps only at a power of two and up to 8 ulps just below the next
// one: a quotient 5..7 ulps above a whole number n (n = 2^k - 1) is
// snapped DOWN to n, and w is one second below ceil(burst/rate). The
// search below finds such (rate, burst) pairs (the float64 quotient
// burst/rate, computed as windowSeconds does, more than 4 ulps above n)
// and checks the announced w.
func TestAudit55FixedWindowSnapsBeyondFourUlps(t *testing.T) {
	found, bad := 0, 0
	var first string
	for k := 20; k <= 44 && found < 40; k++ {
		n := math.Ldexp(1, k) - 1
		for _, burst := range []int{999_983, 1_000_003, 7_777_777, 99_999_989, 123_456_791} {
			for ul := 5.0; ul <= 7; ul++ {
				rate := float64(burst) / (n + ul*a55Ulp(n))
				q := float64(burst) / rate
				if q-n <= 4*a55Ulp(n) || q-n > 8*a55Ulp(n) {
					continue
				}
				found++
				pol := limit.Policy{Name: "g", Limit: limit.Limit(rate), Burst: burst}
				m, err := httplimit.New(audit52Limiter{pols: []limit.Policy{pol}})
				if err != nil {
					t.Fatal(err)
				}
				h := http.Header{}
				m.SetHeaders(h, limit.Decision{Allowed: true, Limit: pol.Limit, Burst: burst, Policy: "g", Remaining: burst})
				got, want := audit52W(t, h.Get("RateLimit-Policy")), audit52CeilQuo(burst, rate)
				if got < want {
					bad++
					if first == "" {
						first = h.Get("RateLimit-Policy")
						t.Logf("rate %v burst %d: quotient %.17g = n + %.1f ulps; w=%d, ceil(burst/rate)=%d", rate, burst, q, (q-n)/a55Ulp(n), got, want)
					}
				}
			}
		}
	}
	if found == 0 {
		t.Skip("no quotient 5..8 ulps above 2^k - 1 found")
	}
	if bad > 0 {
		t.Errorf("%d of %d policies whose quotient burst/rate is 5..8 ulps (more than the documented 4) above a whole number announce w below ceil(burst/rate) "+
			"(first: %s; fields.go: \"A quotient within 4 ulps of a whole number is that number\"; doc.go: \"ceil(burst/rate) for other limiters\")", bad, found, first)
	}
}
