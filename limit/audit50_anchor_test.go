package limit_test

import (
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit50FixedAllowNAtFractionalAnchor (fixed: core.anchorOf): the Timebase under every
// engine anchors to the clock's Now() at construction; when that has a
// sub-millisecond fraction (a fake clock advanced by 500µs, or the real
// clock almost always), AllowN(clock.Now(), ...) at a smaller fraction is
// decided one millisecond before the clock's reading
// (internal/core/clock.go:236, Sub(anchor) truncated to ms over
// anchorMs, the floor). The debt it adds then drains one extra ms for the
// short forms, which decide at the clock's reading: at 1000/s and burst
// 10, AllowN(now, k, 10) followed by Allow(k) at the same instant admits
// 11 tokens. Promises: limit/doc.go "A request is admitted iff debt + n
// <= burst"; limit.go Allow: "AllowN at the clock's reading with n = 1".
func TestAudit50FixedAllowNAtFractionalAnchor(t *testing.T) {
	for _, eng := range []limit.Engine{limit.CountMin, limit.Buckets} {
		c := sketchtest.NewFakeClock()
		c.Advance(500 * time.Microsecond) // built at 0.5 ms
		l, err := limit.New(1000, 10, limit.WithClock(c), limit.WithEngine(eng), limit.WithSeed(1))
		if err != nil {
			t.Fatal(err)
		}
		c.Advance(2700 * time.Microsecond) // 3.2 ms
		now := c.Now()
		if !l.AllowN(now, "k", 10) {
			t.Fatalf("%v: a full burst was denied", eng)
		}
		extra := 0
		for l.Allow("k") {
			extra++
			if extra > 10 {
				break
			}
		}
		if extra != 0 {
			t.Errorf("engine %v: AllowN(clock.Now()=3.2ms, k, 10) then Allow(k) at the same instant admitted %d more (burst 10, no time passed): want 0 (limit/doc.go: \"admitted iff debt + n <= burst\"; Allow is \"AllowN at the clock's reading\")", eng, extra)
		}
	}
}
