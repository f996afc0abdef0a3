package redis

// Audit 123: DecideContext's int n, converted to float64.

import (
	"context"
	"testing"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit123FixedDecideRoundsNDown (audit 123; fixed at stop 63, the text below says what was wrong): DecideContext passes float64(n)
// to AllowN (decide.go, DecideContext), and above 2^53 that conversion
// rounds to nearest, so a request one token above Burst can become a
// request of exactly Burst. decide.go: "a request above Burst is Never,
// as always"; Limiter.AllowN: "A request above Burst never fits".
// 1e7/s x 2^53 (Burst/Rate 9e8 s, within 9e9; Hi 2^53 within float32):
// DecideContext(2^53 + 1) on a fresh key is expected to be denied,
// Never; observed: Allowed true (float64(2^53+1) is 2^53, which fits an
// empty bucket), and the key's whole Burst is taken. The same at
// 1e10/s x 1e17 with n = 1e17 + 1 (float64: 1e17). Fix: round n up where
// float64 does not hold it (nf := float64(n); if int64(nf) < int64(n)
// (or nf >= 2^63) { nf = math.Nextafter(nf, math.Inf(1)) }) before AllowN
// and toDecision.
func TestAudit123FixedDecideRoundsNDown(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	for _, c := range []struct {
		name string
		lim  Limit
		n    int
	}{
		{"2p53", PerSecond(1e7, 1<<53), 1<<53 + 1},
		{"1e17", PerSecond(1e10, 1e17), 1e17 + 1},
	} {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_700_000_000_000)
		l := e.limiter(t, LimiterConfig{Name: "a123n" + c.name, Limit: c.lim, Clock: clk})
		d, err := l.DecideContext(context.Background(), "k", c.n)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed || !d.Never {
			t.Errorf("%v/s x %v: DecideContext(%d), a request above Burst: %+v; want denied, Never (decide.go: \"a request above Burst is Never, as always\")",
				c.lim.Rate, c.lim.Burst, c.n, d)
		}
	}
}
