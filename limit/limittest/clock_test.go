package limittest_test

import (
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit/limittest"
)

func TestFakeClockTimers(t *testing.T) {
	c := limittest.NewFakeClock()
	c.Set(1000)
	if c.NowMillis() != 1000 || c.Now().UnixMilli() != 1000 {
		t.Fatal("reading")
	}
	a := c.NewTimer(10 * time.Millisecond)
	b := c.NewTimer(1500 * time.Microsecond) // rounds up to 2 ms
	z := c.NewTimer(0)
	select {
	case <-z.C():
	default:
		t.Fatal("a zero timer did not fire at once")
	}
	c.BlockUntilTimers(2)
	c.Advance(time.Millisecond)
	select {
	case <-b.C():
		t.Fatal("fired before its time")
	default:
	}
	c.Advance(time.Millisecond)
	if got := <-b.C(); got.UnixMilli() != 1002 {
		t.Fatalf("fired at %v", got.UnixMilli())
	}
	if b.Stop() || !a.Stop() || a.Stop() || c.Timers() != 0 {
		t.Fatal("Stop")
	}
	c.SetTime(time.UnixMilli(5000))
	select {
	case <-a.C():
		t.Fatal("a stopped timer fired")
	default:
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-c.NewTimer(time.Second).C()
	}()
	c.BlockUntilTimers(1)
	c.Advance(time.Second)
	<-done
}
