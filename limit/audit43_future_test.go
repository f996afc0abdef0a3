package limit_test

import (
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// limit/doc.go, "Keys and time": "a t after the clock's reading counts as
// that reading (a future t must not drain every other key early)".
func TestAudit43FutureTCountsAsClock(t *testing.T) {
	for _, e := range []limit.Engine{limit.Buckets, limit.CountMin} {
		c := limittest.NewFakeClock()
		c.Set(1_000_000)
		l := limit.MustNew(10, 20, limit.WithClock(c), limit.WithEngine(e))
		now := c.Now()
		if !l.AllowN(now, "k", 20) {
			t.Fatalf("%v: burst denied", e)
		}
		future := now.Add(10 * time.Second)
		if l.AllowN(future, "k", 1) {
			t.Errorf("%v: AllowN at a t 10 s after the clock admitted a key at full debt; doc: a future t counts as the clock's reading", e)
		}
		if d := l.DecideN(future, "k", 1); d.Allowed {
			t.Errorf("%v: DecideN future admitted", e)
		}
		if r := l.ReserveN(future, "k", 1); r.OK() && r.DelayFrom(now) < 100*time.Millisecond {
			t.Errorf("%v: ReserveN future acts after %v", e, r.DelayFrom(now))
		}
		if l.AllowN(future, "other", 20) && l.AllowN(now, "other", 1) {
			t.Errorf("%v: a future-t burst drained before now", e)
		}
	}
}
