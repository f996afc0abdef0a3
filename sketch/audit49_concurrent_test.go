package sketch_test

import (
	"bytes"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit49ConcurrentWriteToBetweenStartAndEnd: WriteTo and Merge run
// while writers update and the clock moves (1 ms steps, so records
// written during the encode have negative ages). docs/snapshots.md,
// "Consistency under concurrent updates": every update completed before
// WriteTo was called is fully included, and each cell lies between its
// value at the start and at the end of the encode. Under the None law
// with non-negative deltas: for every key, (count completed before
// WriteTo) <= restored estimate <= original estimate read after WriteTo
// returned. Merges of a replica holding "z" = 1 run meanwhile, so z is
// checked the same way (merges completed before WriteTo). GOMAXPROCS 1,
// 2, 4, 8; run under -race.
func TestAudit49ConcurrentWriteToBetweenStartAndEnd(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		const writers, keysPer = 4, 4
		clk := sketchtest.NewFakeClock()
		clk.Set(3_000_000)
		cfg := sketch.Config{Levels: 4, CellsPerLevel: 4096, Decay: decay.None(), Hi: 1e9, Seed: 4, Clock: clk}
		s := mustNewSketch(t, cfg)
		rep := mustNewSketch(t, cfg)
		rep.UpdateString("z", 1)
		var counts [writers * keysPer]atomic.Int64
		var merges atomic.Int64
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					k := w*keysPer + i%keysPer
					s.UpdateString(fmt.Sprintf("c%d", k), 1)
					counts[k].Add(1)
				}
			}()
		}
		wg.Add(2)
		go func() { // the clock
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				clk.Advance(1e6) // 1 ms
			}
		}()
		go func() { // merges
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := s.Merge(rep); err != nil {
					t.Error(err)
					return
				}
				merges.Add(1)
			}
		}()
		rounds := 12
		if testing.Short() {
			rounds = 4
		}
		for round := range rounds {
			var pre [writers * keysPer]int64
			for k := range pre {
				pre[k] = counts[k].Load()
			}
			preZ := merges.Load()
			var buf bytes.Buffer
			if _, err := s.WriteTo(&buf); err != nil {
				t.Fatal(err)
			}
			var post [writers*keysPer + 1]float64
			for k := range writers * keysPer {
				post[k] = s.QueryString(fmt.Sprintf("c%d", k))
			}
			post[writers*keysPer] = s.QueryString("z")
			rc := sketchtest.NewFakeClock()
			rc.Set(clk.NowMillis())
			rcfg := cfg
			rcfg.Clock = rc
			r := mustNewSketch(t, rcfg)
			if err := r.UnmarshalBinary(buf.Bytes()); err != nil {
				t.Fatal(err)
			}
			for k := range writers * keysPer {
				got := r.QueryString(fmt.Sprintf("c%d", k))
				if got < float64(pre[k]) || got > post[k] {
					t.Errorf("round %d key c%d: restored %v, want within [%d completed before WriteTo, %v read after it]", round, k, got, pre[k], post[k])
				}
			}
			if z := r.QueryString("z"); z < float64(preZ) || z > post[writers*keysPer] {
				t.Errorf("round %d: restored z %v, want within [%d merges before WriteTo, %v after]", round, z, preZ, post[writers*keysPer])
			}
		}
		close(stop)
		wg.Wait()
	})
}
