package bucket_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/anishathalye/porcupine"

	"github.com/lfgrudge/grudge/internal/bucket"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a5Record is record with time jumps drawn from jumps (ms) between
// phases, and noise goroutines that write other keys of the same lines
// during each phase (Update of 1 token, at the phase's time), so that the
// key's lines are moved by writers that are not in the history.
func a5Record(clk *sketchtest.FakeClock, e *bucket.Engine, noise []string, jumps []int64, phases, clients, opsPer int, seed uint64, gen func(r *rand.Rand) linIn, apply func(linIn) linOut) []porcupine.Operation {
	return recordPhases(clk, phases, clients, opsPer, seed, gen, apply,
		func(r *rand.Rand) int64 { return jumps[r.IntN(len(jumps))] },
		func(wg *sync.WaitGroup, start <-chan struct{}) {
			for n := range 2 {
				wg.Go(func() {
					<-start
					now := e.Timebase().Now()
					for i := range opsPer {
						e.UpdateAt(now, noise[(n+i)%len(noise)], 1)
					}
				})
			}
		})
}

// TestAudit5MoveLinearizableSharedLines: TestLinearizableSingleKey's
// check (operations of one key from 8 goroutines, time frozen in a
// phase: linearizable against the exact token bucket, exactModel) with
// the key in a 2-line engine beside 6 other keys alone (distinct
// fingerprints), written by 2 goroutines outside the history during
// every phase, and time jumps between phases of 0 ms to an hour:
// Linear(1000, 30) counts 2,047 ticks a ms, a span of 61,410 ticks and
// a slack of 4,125 ticks (2 ms), so every jump of 3 ms or more is a long
// move of the key's lines, made by any of the 10 goroutines. The key's
// operations are TryUpdate, Update and Query: every answer must be that
// of some linearization (no phantom debt, no load lost while the lines
// move, no denial with room). (TryUpdate failed this about once in 8
// runs under -race while a move of the other line to the same time
// counted as a conflict: TestAudit5MoveExactAdmissionsAfterIdle.)
func TestAudit5MoveLinearizableSharedLines(t *testing.T) {
	jumps := []int64{0, 1, 2, 3, 5, 12, 31, 40, 1000, 3_600_000}
	a5Procs(t, func(t *testing.T) {
		for rep := range reps(8, 2) {
			clk := sketchtest.NewFakeClock()
			clk.Set(1_000_000)
			e := newTest(t, 2, bucket.Linear(1000, 30), clk)
			ks := a5Keys(e, 7, fmt.Sprintf("lin5-%d", rep), map[uint16]bool{})
			gen := func(r *rand.Rand) linIn {
				switch r.IntN(3) {
				case 0:
					return linIn{kind: linAdd, n: int64(r.IntN(2))}
				case 1:
					return linIn{kind: linTry, n: int64(r.IntN(4)), limit: int64(10 + r.IntN(15))}
				}
				return linIn{kind: linQuery}
			}
			check(t, exactModel, a5Record(clk, e, ks[1:], jumps, 12, 8, 12, uint64(100+rep), gen, applyOn(e, ks[:1])))
		}
	})
}
