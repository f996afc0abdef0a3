package sketch_test

// Audit 134: snapshots taken while writers run and the clock moves, under
// Exponential decay (and None), with every aggregator.
//
// Contract: docs/snapshots.md "Consistency under concurrent updates"
// ("With non-negative deltas, every update completed before WriteTo was
// called is fully included"; a cell written during the encode is "read
// back to T" by the law, "at or above the earlier updates decayed to any
// later instant plus the write"; "A restore on a clock at or after the
// stamp, the usual case, reads it exactly"); the count-min promise that
// an estimate is never below the key's truth. TestSnapshotConcurrent
// (tests/sketch) checks None with Min on a frozen clock.
//
// Each key belongs to one writer, which records the clock before each
// write (at or before its stamp, so the truth computed from it is a lower
// bound). A snapshot restored on a clock set to the instant read after
// the encode ended must read each key at or above the writes completed
// before the encode began, decayed from their recorded times to then.

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

type a134Op struct {
	key int
	d   float64
	at  int64
}

func TestAudit134SnapshotConcurrentMovingClock(t *testing.T) {
	const t0 = int64(1_790_000_000_000)
	const writers, keysPer = 2, 16
	nOps := testsize.Pick(20000, 5000)
	for _, lawName := range []string{"none", "exp"} {
		for _, agg := range []sketch.Aggregator{sketch.Min, sketch.Max, sketch.Mean} {
			t.Run(fmt.Sprint(lawName, "/", agg), func(t *testing.T) {
				var law decay.Decay = decay.None()
				lambda := 0.0
				if lawName == "exp" {
					lambda = 0.5
					law = decay.Exponential(lambda)
				}
				clk := sketchtest.NewFakeClock()
				clk.Set(t0)
				cfg := sketch.Config{Levels: 3, CellsPerLevel: 64, Decay: law, Aggregator: agg, Hi: 1e12, Clock: clk}
				s, err := sketch.New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				ops := make([][]a134Op, writers)
				var done [writers]atomic.Int64
				var stop atomic.Bool
				var wg sync.WaitGroup
				for w := range writers {
					ops[w] = make([]a134Op, nOps)
					wg.Go(func() {
						for i := range nOps {
							if stop.Load() {
								return
							}
							k := w*keysPer + i%keysPer
							d := float64(1 + i%7)
							at := clk.NowMillis()
							ops[w][i] = a134Op{k, d, at}
							s.UpdateString(fmt.Sprint("c", k), d)
							done[w].Store(int64(i + 1))
							if i%64 == 0 {
								runtime.Gosched()
							}
						}
					})
				}
				wg.Go(func() { // the clock moves
					for !stop.Load() {
						clk.Advance(time.Millisecond)
						runtime.Gosched()
					}
				})
				snaps := 0
				for snaps < 12 {
					var before [writers]int64
					for w := range writers {
						before[w] = done[w].Load()
					}
					data, err := s.MarshalBinary()
					if err != nil {
						t.Fatal(err)
					}
					after := clk.NowMillis()
					snaps++
					rc := sketchtest.NewFakeClock()
					rc.Set(after)
					rcfg := cfg
					rcfg.Clock = rc
					r, err := sketch.New(rcfg)
					if err != nil {
						t.Fatal(err)
					}
					if err := r.UnmarshalBinary(data); err != nil {
						t.Fatal(err)
					}
					truth := make([]float64, writers*keysPer)
					for w := range writers {
						for _, op := range ops[w][:before[w]] {
							truth[op.key] += op.d * math.Exp(-lambda*float64(after-op.at)/1000)
						}
					}
					for k, want := range truth {
						if got := r.QueryString(fmt.Sprint("c", k)); got < want*(1-1e-6) {
							stop.Store(true)
							wg.Wait()
							t.Fatalf("snapshot %d: c%d reads %v after the restore, the writes completed before the encode %v", snaps, k, got, want)
						}
					}
					if done[0].Load() == int64(nOps) && done[1].Load() == int64(nOps) {
						break
					}
				}
				stop.Store(true)
				wg.Wait()
			})
		}
	}
}
