package rotator

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit62ConcurrentEncodeMovingClock: a rotator (3 generations,
// Period 1 h, Exponential(0.7)) holds 40 keys updated before WriteTo;
// during the encode 3 goroutines update other keys and the same ones and
// one moves the fake clock forward in steps of up to 40 ms (at most 2 s
// in all: no deadline). Each snapshot taken (a refused one matches
// sketch.ErrTakeAgain and is taken again) is restored on clocks 1 h
// behind, at, and 1 min ahead of its instant: through both promotions
// to the initial generations every pre-snapshot key reads at least its
// exact decayed sum (docs/snapshots.md: "every update completed before
// WriteTo was called is fully included"). Under -race, GOMAXPROCS 1 to 8.
func TestAudit62ConcurrentEncodeMovingClock(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		for round := 0; round < 3; round++ {
			c := sketchtest.NewFakeClock()
			c.Set(a62T0)
			cfg := a62Cfg(c)
			cfg.Period = time.Hour
			cfg.Sketch.CellsPerLevel = 1 << 14
			r, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			type up struct {
				at int64
				v  float64
			}
			pre := map[string][]up{}
			for i := 0; i < 200; i++ {
				c.Set(a62T0 + int64(i)*5)
				k := fmt.Sprintf("p%d", i%40)
				r.UpdateString(k, float64(1+i%7))
				pre[k] = append(pre[k], up{a62T0 + int64(i)*5, float64(1 + i%7)})
			}
			S := c.NowMillis()
			var stop atomic.Bool
			var wg sync.WaitGroup
			for g := 0; g < 3; g++ {
				wg.Add(1)
				go func(g int) {
					defer wg.Done()
					for i := 0; !stop.Load(); i++ {
						if i%2 == 0 {
							r.UpdateString(fmt.Sprintf("p%d", (i+g)%40), 1)
						} else {
							r.UpdateString(fmt.Sprintf("x%d-%d", g, i%100), 2)
						}
					}
				}(g)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; !stop.Load() && c.NowMillis() < S+2000; i++ {
					c.Set(c.NowMillis() + int64(i%41))
					time.Sleep(50 * time.Microsecond)
				}
			}()
			var buf bytes.Buffer
			for try := 0; ; try++ {
				buf.Reset()
				_, err = r.WriteTo(&buf)
				if err == nil {
					break
				}
				if !errors.Is(err, sketch.ErrTakeAgain) || try > 5 {
					t.Fatalf("WriteTo: %v", err)
				}
			}
			stop.Store(true)
			wg.Wait()
			inst := int64(binaryInstant(buf.Bytes()))
			for _, off := range []int64{-3_600_000, 0, 60_000} {
				c2 := sketchtest.NewFakeClock()
				c2.Set(inst + off)
				m2cfg := cfg
				m2cfg.Sketch.Clock = c2
				m, err := New(m2cfg)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := m.ReadFrom(bytes.NewReader(buf.Bytes())); err != nil {
					t.Fatalf("ReadFrom: %v", err)
				}
				shift := min(off, 0)
				for _, dt := range []int64{0, 1_000, 3_600_000 - (inst - a62T0) + 1, 7_200_000 - (inst - a62T0) + 1} {
					tau := inst + max(off, 0) + dt
					c2.Set(tau)
					for k, ups := range pre {
						truth := 0.0
						for _, u := range ups {
							truth += u.v * math.Exp(-a62Lambda*float64(tau-(u.at+shift))/1000)
						}
						if got := m.QueryString(k); got < truth*(1-1e-6) {
							t.Errorf("round %d restore off %d, %d ms on: Query(%s) = %v, below the exact %v of the updates before WriteTo", round, off, dt, k, got, truth)
						}
					}
				}
			}
		}
	})
}

// binaryInstant reads a rotator snapshot's instant (bytes 40..47).
func binaryInstant(b []byte) uint64 {
	var x uint64
	for i := 7; i >= 0; i-- {
		x = x<<8 | uint64(b[40+i])
	}
	return x
}
