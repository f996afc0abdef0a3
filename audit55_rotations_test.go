package grudge_test

import (
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
	"github.com/lfgrudge/grudge/internal/testhook"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit55FixedRotationsUndercountDuringWriteTo (fixed: promotions are
// no longer held off during WriteTo, which fails instead): a lazy rotator
// (Period 100 ms) whose clock moves 10 periods while a snapshot of it is
// being written: Rotations() says 0. rotator.go: "For a lazy rotator it
// first brings rotation up to date, as any operation does, and counts the
// periods that elapsed".
func TestAudit55FixedRotationsUndercountDuringWriteTo(t *testing.T) {
	clk := grudgetest.NewFakeClock()
	clk.Set(time.UnixMilli(1_700_000_000_000))
	rot, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: grudge.Config{Levels: 2, CellsPerLevel: 64, Hi: 1e9, Clock: clk}, Period: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var during int64
	if _, err := rot.Native().WriteTo(&testhook.Writer{N: 1, Hook: func() {
		clk.Advance(time.Second)
		during = rot.Rotations()
	}}); err != nil && !strings.Contains(err.Error(), "take the snapshot again") {
		t.Fatal(err)
	}
	if during != 10 {
		t.Errorf("Rotations() 10 periods after the start, during a WriteTo: %d, want 10 (rotator.go: it \"brings rotation up to date ... and counts the periods that elapsed\"); after it: %d",
			during, rot.Rotations())
	}
}

// TestAudit55TickerRotateRacingWriteTo: with a FakeTicker, Ticks race
// WriteTo loops (GOMAXPROCS 1..8, -race): each WriteTo returns nil or the
// "rotated during the encode" error, nothing hangs, and Rotations() counts
// every Tick.
func TestAudit55TickerRotateRacingWriteTo(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		tk := grudgetest.NewFakeTicker()
		rot, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: grudge.Config{Levels: 2, CellsPerLevel: 256, Hi: 1e9}, Generations: 3, Ticker: tk})
		if err != nil {
			t.Fatal(err)
		}
		defer rot.Close()
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var mu sync.Mutex
		ok, failed := 0, 0
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					rot.Update([]byte("k"), 1)
					_, err := rot.Native().WriteTo(io.Discard)
					mu.Lock()
					if err == nil {
						ok++
					} else if strings.Contains(err.Error(), "take the snapshot again") {
						failed++
					} else {
						mu.Unlock()
						t.Errorf("WriteTo: %v", err)
						return
					}
					mu.Unlock()
				}
			}()
		}
		var tw sync.WaitGroup
		for range 3 {
			tw.Add(1)
			go func() {
				defer tw.Done()
				for range 50 {
					tk.Tick()
				}
			}()
		}
		tw.Wait()
		close(stop)
		wg.Wait()
		if got := rot.Rotations(); got != 150 {
			t.Fatalf("Rotations() = %d after 150 Ticks", got)
		}
		t.Logf("WriteTo ok %d, rotated %d", ok, failed)
	})
}
