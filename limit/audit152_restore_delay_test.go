package limit_test

import (
	"bytes"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// TestAudit152RestoredBucketsDelayAtEnds: a Buckets limiter New(10, 20)
// whose key "k" spent its burst at 0 ms is saved; limiters on fake
// clocks at MinInt64, MinInt64+5, 0 and MaxInt64-5000 restore it (a
// clock behind the snapshot: no drain; one past it: drained), and a
// save/restore chain follows (each restored limiter saved and restored
// again). Reserving 10 more of a fresh key after taking its burst waits
// 1 s (Delay and DelayFrom(Now), from Reserved's ms through msOf and
// Timebase.Time); a second reservation of 10 waits 2 s; 1 s later the
// first's Delay is 0.
func TestAudit152RestoredBucketsDelayAtEnds(t *testing.T) {
	mk := func(at int64) (*limit.Limiter, *limittest.FakeClock) {
		clk := limittest.NewFakeClock()
		clk.Set(at)
		l, err := limit.New(10, 20, limit.WithClock(clk), limit.WithEngine(limit.Buckets), limit.WithSeed(152), limit.WithCapacity(1000, 0.01))
		if err != nil {
			t.Fatal(err)
		}
		return l, clk
	}
	save := func(l *limit.Limiter) []byte {
		var buf bytes.Buffer
		if _, err := l.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	a, _ := mk(0)
	for a.Allow("k") {
	}
	snap := save(a)
	for _, at := range []int64{math.MinInt64, math.MinInt64 + 5, 0, math.MaxInt64 - 5000} {
		for hop := range 2 {
			l, clk := mk(at)
			s := snap
			for range hop + 1 {
				if _, err := l.ReadFrom(bytes.NewReader(s)); err != nil {
					t.Fatalf("at %d: %v", at, err)
				}
				s = save(l)
				l, clk = mk(at)
			}
			if _, err := l.ReadFrom(bytes.NewReader(s)); err != nil {
				t.Fatal(err)
			}
			n := 0
			for n < 100 && l.Allow("fresh") {
				n++
			}
			if n != 20 {
				t.Errorf("restored at %d (hop %d): fresh took %d, want 20", at, hop, n)
			}
			r1 := l.ReserveN(clk.Now(), "fresh", 10)
			r2 := l.ReserveN(clk.Now(), "fresh", 10)
			if !r1.OK() || !r2.OK() {
				t.Fatalf("restored at %d: reservations not OK", at)
			}
			if d, df := r1.Delay(), r1.DelayFrom(l.Now()); d != time.Second || df != time.Second {
				t.Errorf("restored at %d (hop %d): first reservation Delay %v, DelayFrom(Now) %v, want 1s", at, hop, d, df)
			}
			if d := r2.Delay(); d != 2*time.Second {
				t.Errorf("restored at %d (hop %d): second reservation Delay %v, want 2s", at, hop, d)
			}
			clk.Advance(time.Second)
			if d := r1.Delay(); d != 0 {
				t.Errorf("restored at %d (hop %d): 1 s later the first's Delay is %v, want 0", at, hop, d)
			}
			if d := r2.Delay(); d != time.Second {
				t.Errorf("restored at %d (hop %d): 1 s later the second's Delay is %v, want 1s", at, hop, d)
			}
		}
	}
}
