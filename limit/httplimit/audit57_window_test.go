package httplimit_test

import (
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// RateLimit-Policy's q is the burst and w "the time to refill it from
// empty as the limiter holds it": after draining a key's whole burst at
// once, the decision's ResetAfter (the time until the bucket is full
// again) rounded up to whole seconds is w (at least 1), on both engines,
// for random rates, exact (Every of whole milliseconds) or not.
func TestAudit57PolicyWindowMatchesRefill(t *testing.T) {
	rng := rand.New(rand.NewPCG(57, 3))
	ran := map[limit.Engine]int{}
	for trial := range 400 {
		var rate limit.Limit
		switch rng.IntN(3) {
		case 0:
			rate = limit.Every(time.Duration(1+rng.IntN(5000)) * time.Millisecond)
		case 1:
			rate = limit.Limit(0.01 + rng.Float64()*50)
		default:
			rate = limit.Limit(1 + rng.IntN(100))
		}
		burst := 1 + rng.IntN(200)
		engine := []limit.Engine{limit.Buckets, limit.CountMin}[rng.IntN(2)]
		clk := sketchtest.NewFakeClock()
		clk.Set(1_000_000)
		l, err := limit.New(rate, burst, limit.WithClock(clk), limit.WithEngine(engine), limit.WithName("p"))
		if err != nil {
			continue // out of an engine's range
		}
		ran[engine]++
		m, err := httplimit.New(l)
		if err != nil {
			t.Fatal(err)
		}
		w := a57Get(m.Handler(ok), "192.0.2.1:1")
		pol := w.Header().Get("RateLimit-Policy")
		i := strings.Index(pol, ";w=")
		ann, err := strconv.ParseInt(pol[i+3:], 10, 64)
		if err != nil || !strings.HasPrefix(pol, `"p";q=`+strconv.Itoa(burst)+";") {
			t.Fatalf("trial %d: RateLimit-Policy %q", trial, pol)
		}
		d := l.DecideN(clk.Now(), "drain", burst)
		if !d.Allowed {
			t.Fatalf("trial %d: draining a fresh key denied: %+v", trial, d)
		}
		want := max(int64(math.Ceil(d.ResetAfter.Seconds())), 1)
		if ann != want {
			t.Errorf("trial %d: rate %v (%v), burst %d, %v: w=%d, the refill from empty is %v (ceil %d)", trial, float64(rate), time.Duration(float64(time.Second)/float64(rate)), burst, engine, ann, d.ResetAfter, want)
		}
	}
	if ran[limit.Buckets] < 20 || ran[limit.CountMin] < 50 {
		t.Fatalf("engines run: %v", ran)
	}
}
