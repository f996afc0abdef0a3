package sketchtest_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

var _ sketch.Clock = (*sketchtest.FakeClock)(nil)

func TestFakeClockAdvanceAndSet(t *testing.T) {
	c := sketchtest.NewFakeClock()
	steps := []struct {
		do   func()
		want int64
		what string
	}{
		{func() {}, 0, "new clock"},
		{func() { c.Advance(1500 * time.Millisecond) }, 1500, "Advance(1.5s)"},
		{func() { c.Advance(time.Minute) }, 61_500, "Advance(1m)"},
		{func() { c.Advance(999 * time.Microsecond) }, 61_500, "Advance(999µs): 0.999 ms kept"},
		{func() { c.Advance(1999 * time.Microsecond) }, 61_502, "Advance(1.999ms): 1 ms and the parts' carry"},
		{func() { c.Advance(2 * time.Microsecond) }, 61_503, "Advance(2µs): the parts make 3 ms (0.999 + 1.999 + 0.002)"},
		{func() { c.Advance(-1 * time.Microsecond) }, 61_502, "Advance(-1µs) borrows back across the ms (61502.999)"},
		{func() { c.Advance(-500 * time.Millisecond) }, 61_002, "Advance(-500ms) moves back (61002.999)"},
		{func() { c.Advance(-999 * time.Microsecond) }, 61_002, "Advance(-999µs) (61002.000)"},
		{func() { c.Advance(-2 * time.Millisecond) }, 61_000, "Advance(-2ms)"},
		{func() { c.Set(42) }, 42, "Set(42)"},
		{func() { c.Set(-7) }, -7, "Set(-7)"},
		{func() { c.Advance(7 * time.Millisecond) }, 0, "Advance(7ms)"},
		{func() { c.Set(1 << 50) }, 1 << 50, "Set(2^50)"},
	}
	for _, s := range steps {
		s.do()
		if got := c.NowMillis(); got != s.want {
			t.Fatalf("%s: NowMillis() = %d, want %d", s.what, got, s.want)
		}
	}

	// The fraction: Now carries it, and NowMillis == Now().UnixMilli().
	c.Set(0)
	for range 10 {
		c.Advance(100 * time.Microsecond)
	}
	if got, now := c.NowMillis(), c.Now(); got != 1 || !now.Equal(time.UnixMilli(1)) || now.UnixMilli() != got {
		t.Fatalf("ten Advance(100µs): NowMillis %d, Now %v; want 1 ms, %v", got, now, time.UnixMilli(1))
	}
	c.Advance(250 * time.Microsecond)
	if got, now := c.NowMillis(), c.Now(); got != 1 || !now.Equal(time.UnixMilli(1).Add(250*time.Microsecond)) {
		t.Fatalf("then Advance(250µs): NowMillis %d, Now %v; want 1 ms and 1.25 ms", got, now)
	}
	c.SetTime(time.Unix(5, 400_700)) // 5000 ms and 400.7 µs
	c.Advance(600 * time.Microsecond)
	if got := c.NowMillis(); got != 5001 {
		t.Fatalf("SetTime(5 s + 400.7 µs), Advance(600 µs): NowMillis %d, want 5001", got)
	}
	c.Set(-1)
	c.Advance(-time.Microsecond)
	if got, now := c.NowMillis(), c.Now(); got != -2 || now.UnixMilli() != got {
		t.Fatalf("Set(-1), Advance(-1µs): NowMillis %d (Now %v), want -2", got, now)
	}

	var zero sketchtest.FakeClock
	if got := zero.NowMillis(); got != 0 {
		t.Fatalf("zero FakeClock reads %d, want 0", got)
	}
}

// TestFakeClockConcurrent: readers race with Advance (run under -race);
// every Advance is counted and readers never see time move back.
func TestFakeClockConcurrent(t *testing.T) {
	const (
		writers  = 4
		advances = 2000
	)
	c := sketchtest.NewFakeClock()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for range 4 {
		readers.Go(func() {
			prev := int64(0)
			for {
				select {
				case <-stop:
					return
				default:
				}
				now := c.NowMillis()
				if now < prev {
					t.Errorf("clock moved back under forward-only Advance: %d after %d", now, prev)
					return
				}
				prev = now
			}
		})
	}
	for range writers {
		wg.Go(func() {
			for range advances {
				c.Advance(time.Millisecond)
			}
		})
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	if got := c.NowMillis(); got != writers*advances {
		t.Fatalf("NowMillis() = %d after %d concurrent 1 ms advances", got, writers*advances)
	}

	// Set racing with reads is safe too; the last Set wins.
	var sw sync.WaitGroup
	for i := range 8 {
		sw.Go(func() { c.Set(int64(i)); _ = c.NowMillis() })
	}
	sw.Wait()
	if got := c.NowMillis(); got < 0 || got > 7 {
		t.Fatalf("after concurrent Set(0..7), NowMillis() = %d", got)
	}
}

// A FakeClock only moves when told, so decay can be tested exactly.
func ExampleFakeClock() {
	clk := sketchtest.NewFakeClock()
	fmt.Println(clk.NowMillis())
	clk.Advance(2 * time.Second)
	fmt.Println(clk.NowMillis())
	clk.Advance(-500 * time.Millisecond) // a backwards step; sketches treat it as no time passing
	fmt.Println(clk.NowMillis())
	clk.Set(10_000)
	fmt.Println(clk.NowMillis())
	// Output:
	// 0
	// 2000
	// 1500
	// 10000
}
