package limit_test

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a58Hook passes writes through and runs hook before the n-th one.
type a58Hook struct {
	w     io.Writer
	n, at int
	hook  func()
}

func (h *a58Hook) Write(p []byte) (int, error) {
	h.at++
	if h.at == h.n {
		h.hook()
	}
	return h.w.Write(p)
}

// TestAudit58FixedLimiterRestoreBehindClockDrainsEncode: a CountMin
// limiter (1000/s, burst 1000, Period 2 s) exhausts key k at +1990 ms and
// is saved at +1990 by an encode during which the clock moves 20 ms
// before the second generation is encoded (nothing else happens: the
// snapshot is taken). Restored on a clock behind the snapshot's (a
// skewed host), it reads the snapshot's debt until its restored
// deadline; from the promotion 10 ms later the second generation is the
// primary, and it holds the debt 20 ms (20 tokens) more drained than the
// first: 11 ms after the restore k has 31 tokens where the never-stopped
// limiter, 11 ms after the snapshot, has 11. docs/readings.md ("Surviving
// a restart"): "an abuser throttled before a deploy is still throttled
// after it, drained by the downtime and never more" (the downtime is 0
// here: "none if the restoring clock's time is earlier").
func TestAudit58FixedLimiterRestoreBehindClockDrainsEncode(t *testing.T) {
	const t0 = 1_700_000_000_000
	mk := func(c *sketchtest.FakeClock) *limit.Limiter {
		l, err := limit.New(1000, 1000, limit.WithEngine(limit.CountMin), limit.WithSize(4, 1<<16), limit.WithPeriod(2*time.Second), limit.WithClock(c))
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	c := sketchtest.NewFakeClock()
	c.Set(t0)
	l := mk(c)
	c.Set(t0 + 1990)
	if !l.AllowN(c.Now(), "k", 1000) {
		t.Fatal("setup: the first 1000 were denied")
	}
	var buf bytes.Buffer
	if _, err := l.WriteTo(&a58Hook{w: &buf, n: 4, hook: func() { c.Set(t0 + 2010) }}); err != nil {
		t.Fatalf("WriteTo: %v", err)
	}
	// the never-stopped twin, saved by an instant encode
	tc := sketchtest.NewFakeClock()
	tc.Set(t0)
	twin := mk(tc)
	tc.Set(t0 + 1990)
	twin.AllowN(tc.Now(), "k", 1000)
	tc.Set(t0 + 1990 + 11)
	live := twin.Tokens("k")
	c2 := sketchtest.NewFakeClock()
	r0 := int64(t0 + 1990 - 60_000)
	c2.Set(r0)
	m := mk(c2)
	if _, err := m.ReadFrom(&buf); err != nil {
		t.Fatalf("ReadFrom: %v", err)
	}
	c2.Set(r0 + 11)
	got := m.Tokens("k")
	if got > live+1 {
		t.Errorf("restored on a clock 1 min behind the snapshot, 11 ms after the restore (past its promotion): Tokens(k) = %v, "+
			"a never-stopped twin 11 ms after the snapshot %v: drained by the encode's 20 ms on top of the downtime (0). "+
			"readings.md: \"drained by the downtime and never more\"", got, live)
	}
}

// TestAudit58LimiterRestoreBehindClockInstantEncode: the control of the
// finding above: the same limiter saved by an encode during which the
// clock does not move, restored on a clock 1 min behind, reads the
// never-stopped twin's tokens before and after its promotion.
func TestAudit58LimiterRestoreBehindClockInstantEncode(t *testing.T) {
	const t0 = 1_700_000_000_000
	mk := func(c *sketchtest.FakeClock) *limit.Limiter {
		l, err := limit.New(1000, 1000, limit.WithEngine(limit.CountMin), limit.WithSize(4, 1<<16), limit.WithPeriod(2*time.Second), limit.WithClock(c))
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	c := sketchtest.NewFakeClock()
	c.Set(t0)
	l := mk(c)
	c.Set(t0 + 1990)
	l.AllowN(c.Now(), "k", 1000)
	var buf bytes.Buffer
	if _, err := l.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	c2 := sketchtest.NewFakeClock()
	r0 := int64(t0 + 1990 - 60_000)
	c2.Set(r0)
	m := mk(c2)
	if _, err := m.ReadFrom(&buf); err != nil {
		t.Fatal(err)
	}
	for _, d := range []int64{5, 9, 11, 50, 500} {
		c.Set(t0 + 1990 + d)
		c2.Set(r0 + d)
		if got, want := m.Tokens("k"), l.Tokens("k"); got > want+1e-9 {
			t.Errorf("%d ms after a restore on a clock behind: Tokens %v, the never-stopped limiter %v", d, got, want)
		}
	}
}
