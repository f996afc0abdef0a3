package redis

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit60FixedOverBurstByUlpAdmitted: Decision.RetryAfter (limiter.go):
// "-1 also when n > Burst (it never fits)"; Limit.Burst: "the most debt a
// key may carry". For an exact-units limit (10/s: 100 units a token) with
// Burst 5.14, n = the float64 just above 5.14 is n > Burst, yet n x 100
// rounds to 514 = Burst x 100, so the server admits it from an empty key,
// and on a key with debt denies it with a finite RetryAfter instead of -1.
// The same for 1000/h (3600 units a token) with Burst 5.02 (and 10000
// units with 6.56, ...).
func TestAudit60FixedOverBurstByUlpAdmitted(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	ctx := context.Background()
	for _, c := range []struct {
		name string
		lim  Limit
	}{{"a60ob1", PerSecond(10, 5.14)}, {"a60ob2", PerSecond(1000.0/3600, 5.02)}} {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_000_000)
		l := e.limiter(t, LimiterConfig{Name: c.name, Limit: c.lim, Clock: clk, Timeout: 5 * time.Second})
		n := math.Nextafter(c.lim.Burst, math.Inf(1))
		if !(n > c.lim.Burst) {
			t.Fatal("setup")
		}
		d, err := l.AllowN(ctx, "fresh", n)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed || d.RetryAfter != -1 {
			t.Errorf("%v: AllowN(n = %v > Burst) on an empty key: %+v; want denied with RetryAfter -1 (\"-1 also when n > Burst (it never fits)\")", c.lim, n, d)
		}
		if _, err := l.AllowN(ctx, "owing", 1); err != nil {
			t.Fatal(err)
		}
		d, err = l.AllowN(ctx, "owing", n)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed || d.RetryAfter != -1 {
			t.Errorf("%v: AllowN(n = %v > Burst) on a key owing 1: %+v; want RetryAfter -1 (it never fits)", c.lim, n, d)
		}
	}
}
