package grudge_test

// Audit 142: the root façade inside a testing/synctest bubble. The
// default clock (the runtime's nanotime) does not see the bubble's fake
// time; a Config.Clock reading time.Now follows it exactly. A lazy
// Rotator starts nothing; a ticker-driven one starts one goroutine,
// which Close ends inside the bubble (synctest.Test panics on a
// goroutine left blocked at its end).

import (
	"testing"
	"testing/synctest"
	"time"

	grudge "github.com/lfgrudge/grudge"
)

type a142Now struct{}

func (a142Now) Now() time.Time { return time.Now() }

type a142Ticker struct{ t *time.Ticker }

func (k a142Ticker) C() <-chan time.Time { return k.t.C }
func (k a142Ticker) Stop()               { k.t.Stop() }

// TestAudit142RootDefaultClockIgnoresFakeTime: a lazy Rotator and an
// exponentially decaying Sketch on the default clock neither rotate nor
// decay across a fake hour in a bubble.
func TestAudit142RootDefaultClockIgnoresFakeTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rot, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: grudge.Config{CellsPerLevel: 1024, Hi: 1e9}, Period: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		sk, err := grudge.New(grudge.Config{CellsPerLevel: 1024, Decay: grudge.Exponential(1), Hi: 1e9})
		if err != nil {
			t.Fatal(err)
		}
		sk.Update([]byte("k"), 100)
		rot.Update([]byte("k"), 1)
		time.Sleep(time.Hour)
		if n := rot.Rotations(); n != 0 {
			t.Fatalf("the default-clock rotator rotated %d times over a fake hour", n)
		}
		// Below 1 only after 4.6 real seconds (a stall), not 105 ms.
		if q := sk.Query([]byte("k")); q < 1 {
			t.Fatalf("the default-clock sketch decayed to %v over a fake hour", q)
		}
	})
}

// TestAudit142RootTimeNowClockExactInBubble: with Config.Clock reading
// time.Now, a lazy Rotator rotates once per fake Period (3 over 3.5 s,
// Period 1 s) and forgets a key N periods after its write; a Sketch
// decays as exp(-lambda t).
func TestAudit142RootTimeNowClockExactInBubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := grudge.Config{CellsPerLevel: 1024, Hi: 1e9, Clock: a142Now{}}
		rot, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: cfg, Period: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		rot.Update([]byte("k"), 1)
		time.Sleep(3500 * time.Millisecond)
		if n := rot.Rotations(); n != 3 {
			t.Fatalf("rotations after a fake 3.5 s of Period 1 s: %d, want 3", n)
		}
		if q := rot.Query([]byte("k")); q != 0 {
			t.Fatalf("the key outlived N x Period: %v", q)
		}
		cfg.Decay = grudge.Exponential(1)
		sk, err := grudge.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		sk.Update([]byte("k"), 100)
		time.Sleep(time.Second)
		if q := sk.Query([]byte("k")); q < 36.78 || q > 36.80 {
			t.Fatalf("after a fake second of Exponential(1): %v, want 36.79", q)
		}
	})
}

// TestAudit142RootTickerRotatorClosesInBubble: a ticker-driven Rotator
// on a time.Ticker made in the bubble rotates once per fake tick and
// Close ends its goroutine there: the bubble ends without a panic.
func TestAudit142RootTickerRotatorClosesInBubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rot, err := grudge.NewRotator(grudge.RotatorConfig{
			Sketch: grudge.Config{CellsPerLevel: 1024, Hi: 1e9, Clock: a142Now{}},
			Ticker: a142Ticker{time.NewTicker(time.Second)},
		})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(5500 * time.Millisecond)
		synctest.Wait()
		if n := rot.Rotations(); n != 5 {
			t.Fatalf("rotations after 5 fake ticks: %d", n)
		}
		rot.Close()
		time.Sleep(3 * time.Second)
		if n := rot.Rotations(); n != 5 {
			t.Fatalf("rotated after Close: %d", n)
		}
	})
}
