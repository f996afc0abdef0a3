package httplimit_test

import (
	"math"
	"net/http"
	"regexp"
	"strconv"
	"testing"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

var a71Int = regexp.MustCompile(`[;=]([a-z]+)=(-?\d+)`)

// Middleware over limiters (and tiers) at extreme accepted rates: New
// accepts them, SetHeaders never panics, and every integer in the fields
// is in [0, 999999999999999] (a Structured Field Integer), w >= 1.
func TestAudit71ExtremeRateHeaders(t *testing.T) {
	for _, r := range []float64{1e-35, 1e-30, 1e-20, 1e-9, math.Pi, 1e9, 1e22, math.MaxFloat64} {
		for _, eng := range []limit.Engine{limit.Auto, limit.CountMin} {
			for _, b := range []int{1, 1000, 1 << 24} {
				clk := sketchtest.NewFakeClock()
				clk.Set(1_000_000)
				l, err := limit.New(limit.Limit(r), b, limit.WithEngine(eng), limit.WithClock(clk))
				if err != nil {
					continue
				}
				var ls []httplimit.Limiter = []httplimit.Limiter{l}
				if tr, err := l.Tier("t", limit.Limit(r/3), 1); err == nil {
					ls = append(ls, tr)
				}
				for _, hl := range ls {
					m, err := httplimit.New(hl)
					if err != nil {
						t.Errorf("httplimit.New over New(%v, %d): %v", r, b, err)
						continue
					}
					for i := 0; i < 3; i++ {
						d := l.DecideN(l.Now(), "k", b)
						h := http.Header{}
						func() {
							defer func() {
								if x := recover(); x != nil {
									t.Errorf("SetHeaders for New(%v, %d) panicked: %v", r, b, x)
								}
							}()
							m.SetHeaders(h, d)
						}()
						for _, f := range []string{"RateLimit-Policy", "RateLimit", "Retry-After"} {
							v := h.Get(f)
							if f == "Retry-After" && v != "" {
								v = ";x=" + v
							}
							for _, mm := range a71Int.FindAllStringSubmatch(";"+v, -1) {
								n, err := strconv.ParseInt(mm[2], 10, 64)
								if err != nil || n < 0 || n > 999999999999999 {
									t.Errorf("New(%v, %d): %s: %s=%s outside a Structured Field Integer's range", r, b, f, mm[1], mm[2])
								}
								if mm[1] == "w" && n < 1 {
									t.Errorf("New(%v, %d): w=%d, want >= 1", r, b, n)
								}
							}
						}
					}
				}
			}
		}
	}
}
