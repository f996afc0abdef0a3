package limittest_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// TestTimeClockReadsPackageTime: TimeClock's reading is time.Now's Unix
// millisecond, Now that millisecond's start, and its timers fire and stop
// as time's do.
func TestTimeClockReadsPackageTime(t *testing.T) {
	var c limittest.TimeClock
	before := time.Now().UnixMilli()
	ms, now := c.NowMillis(), c.Now()
	after := time.Now().UnixMilli()
	if ms < before || ms > after || now.UnixMilli() < before || now.UnixMilli() > after || now.Nanosecond()%int(time.Millisecond) != 0 {
		t.Fatalf("NowMillis %d, Now %v; want within [%d, %d], whole ms", ms, now, before, after)
	}
	tm := c.NewTimer(time.Millisecond)
	<-tm.C()
	if tm.Stop() {
		t.Error("Stop after the timer fired reported true")
	}
	if tm := c.NewTimer(time.Hour); !tm.Stop() {
		t.Error("Stop of a pending timer reported false")
	}
}

// TestTimeClockInSynctestBubble: in a testing/synctest bubble a limiter
// on TimeClock drains and waits on the bubble's fake time, as
// x/time/rate does there: 10/s, burst 2, the third Wait takes 100 ms of
// fake time, and a fake sleep of 200 ms refills the burst.
func TestTimeClockInSynctestBubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, err := limit.New(10, 2, limit.WithClock(limittest.TimeClock{}))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		for i := range 3 {
			if err := l.Wait(context.Background(), "k"); err != nil {
				t.Fatalf("Wait %d: %v", i, err)
			}
		}
		if d := time.Since(start); d != 100*time.Millisecond {
			t.Errorf("three Waits at 10/s, burst 2 took %v of fake time; want 100ms", d)
		}
		time.Sleep(200 * time.Millisecond)
		got := 0
		for range 3 {
			if l.Allow("k") {
				got++
			}
		}
		if got != 2 {
			t.Errorf("after 200 ms of fake time %d of 3 Allows were admitted; want the burst, 2", got)
		}
	})
}
