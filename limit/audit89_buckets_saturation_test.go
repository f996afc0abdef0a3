package limit_test

import (
	"bytes"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// a89bkNew builds limit.New(rate, burst) on the Buckets engine with a fake
// clock and seed 1.
func a89bkNew(t *testing.T, rate limit.Limit, burst int, opts ...limit.Option) (*limit.Limiter, *limittest.FakeClock) {
	t.Helper()
	clk := limittest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	l, err := limit.New(rate, burst, append([]limit.Option{limit.WithClock(clk), limit.WithSeed(1)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	if l.Engine() != limit.Buckets {
		t.Fatalf("New(%v, %d) runs on %v; want Buckets", rate, burst, l.Engine())
	}
	return l, clk
}

// a89bkFlood asks keys keys of family tag for the whole burst at the
// clock's reading.
func a89bkFlood(l *limit.Limiter, tag string, keys int) {
	now := l.Now()
	for i := range keys {
		l.AllowN(now, fmt.Sprintf("%s-%d", tag, i), l.Burst())
	}
}

// a89bkDenied returns the share of probes fresh keys of family tag denied
// one token now (Peek: nothing written).
func a89bkDenied(l *limit.Limiter, tag string, probes int) float64 {
	d := 0
	for i := range probes {
		if !l.Peek(fmt.Sprintf("%s-%d", tag, i)).Allowed {
			d++
		}
	}
	return float64(d) / float64(probes)
}

// TestAudit89BucketsFixedSaturationBlindAfterUptime: a Buckets limiter
// flooded past its capacity after some hours of uptime denies nearly
// every fresh key and reads Stats().Saturation near 0: the engine's floor
// histogram keeps 32-bit epochs of about 2 x MaxDebt/256 each and
// compares them as int32, so from 2^31 epochs after New (9.4 h at
// limit.New(1e6, 1000), a byte-rate limit; 2.1 years at New(10, 20)) a
// floor landing in a bucket not written for 2^31 epochs is taken for an
// expired one and not counted. The same flood at New's time reads full.
//
// Promise: limit/stats.go, Stats.Saturation: "the estimated probability
// that a fresh key (one the limiter has never seen) asking for one token
// now is denied: the limiter's rate of innocent denials for one-token
// requests, the number to alert on"; docs/capacity.md: the reading is
// "within 2% relative on every row where the measurement has 1,000
// denials or more".
func TestAudit89BucketsFixedSaturationBlindAfterUptime(t *testing.T) {
	for _, uptime := range []time.Duration{0, 10 * time.Hour} {
		l, clk := a89bkNew(t, 1e6, 1000, limit.WithCapacity(100, 0.01))
		clk.Advance(uptime)
		a89bkFlood(l, "heavy", 5000)
		meas := a89bkDenied(l, "fresh", 4000)
		sat := l.Stats().Saturation
		if meas < 0.9 {
			t.Fatalf("uptime %v: flood of 50x capacity denies %.4f of fresh keys; want >= 0.9", uptime, meas)
		}
		if sat < 0.8*meas {
			t.Errorf("uptime %v: %.2f%% of fresh keys denied, Stats().Saturation %.4f%%; want within 20%%", uptime, 100*meas, 100*sat)
		}
	}
}

// TestAudit89BucketsFixedSaturationPhantomAfterWrap: the same 32-bit
// epochs repeat after 2^32 of them, and a reader's threshold then counts
// the floors of a flood long drained: 18.7 h after a flood at
// limit.New(1e6, 1000) (4.26 years at New(10, 20)), a limiter that
// denies no fresh key reads Saturation 1 (for about 2 x MaxDebt's drain).
// Same promise as above.
func TestAudit89BucketsFixedSaturationPhantomAfterWrap(t *testing.T) {
	for _, c := range []struct {
		rate  limit.Limit
		burst int
		wrap  int64 // ms: floor(2^32 x width / ticks a ms), from internal/bucket's audit89 test
	}{
		{1e6, 1000, 67_377_299},
		{10, 20, 134_289_310_788},
	} {
		l, clk := a89bkNew(t, c.rate, c.burst, limit.WithCapacity(1, 0.5))
		a89bkFlood(l, "heavy", 200)
		if s, m := l.Stats().Saturation, a89bkDenied(l, "fresh", 500); s < 0.99 || m < 0.99 {
			t.Fatalf("New(%v, %d): after the flood: Saturation %v, denied %v; want both about 1", c.rate, c.burst, s, m)
		}
		clk.Advance(time.Duration(c.wrap/2) * time.Millisecond)
		if s := l.Stats().Saturation; s > 0.01 {
			t.Fatalf("New(%v, %d): half-way: Saturation %v; want 0", c.rate, c.burst, s)
		}
		clk.Advance(time.Duration(c.wrap-c.wrap/2) * time.Millisecond)
		m := a89bkDenied(l, "fresh2", 500)
		if s := l.Stats().Saturation; s > 0.01 || m > 0 {
			t.Errorf("New(%v, %d): %d ms after the flood: Saturation %v, fresh keys denied %v; want both 0 (every debt drained long ago)", c.rate, c.burst, c.wrap, s, m)
		}
	}
}

// TestAudit89BucketsSaturationSurvivesRestore: a Buckets limiter flooded
// past its capacity, saved and restored into a fresh limiter of the same
// configuration (limit/doc.go, "Saving and restoring": "the restored
// limiter decides as the never-stopped one would at the same wall
// time"), denies the same fresh keys and reads the same Saturation (its
// floor histogram is rebuilt from the restored floors), and both read 0
// once every debt has drained.
func TestAudit89BucketsSaturationSurvivesRestore(t *testing.T) {
	l, clk := a89bkNew(t, 10, 20, limit.WithCapacity(100, 0.01))
	a89bkFlood(l, "heavy", 150)
	var buf bytes.Buffer
	if _, err := l.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	r, err := limit.New(10, 20, limit.WithClock(clk), limit.WithSeed(99), limit.WithCapacity(100, 0.01))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadFrom(&buf); err != nil {
		t.Fatal(err)
	}
	for _, step := range []time.Duration{0, 50 * time.Millisecond, 60 * time.Millisecond, 4 * time.Second} {
		clk.Advance(step)
		sl, sr := l.Stats().Saturation, r.Stats().Saturation
		ml, mr := a89bkDenied(l, "fresh", 3000), a89bkDenied(r, "fresh", 3000)
		if ml != mr {
			t.Errorf("+%v: fresh keys denied %v by the original, %v by the restored limiter", step, ml, mr)
		}
		if math.Abs(sl-sr) > 0.02 || math.Abs(sr-mr) > 0.2*mr+0.01 {
			t.Errorf("+%v: Saturation original %v, restored %v; fresh keys denied %v", step, sl, sr, mr)
		}
	}
	if s := r.Stats().Saturation; s > 0.01 {
		t.Errorf("every debt drained: restored Saturation %v; want 0", s)
	}
}
