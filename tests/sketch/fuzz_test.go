package sketch_test

import (
	"fmt"
	"testing"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// FuzzDifferential decodes the fuzz input into an operation sequence and
// applies it to the lock-free sketch and the reference (L=3, M=16, Linear
// decay, one FakeClock that only moves forward), checking properties (a)
// and (b) of differential_test.go after every operation.
//
// Layout: byte 0 picks the aggregator (mod 3) and the decay rate
// (1 + byte0>>2 per second); then 4 bytes per operation:
//
//	kind%6  key%6  a  b
//	0 Update(key, a/4)            (b&1: string twin)
//	1 Query(key)                  (b&1: string twin)
//	2 UpdateAndQuery(key, a/4)    (b&1: string twin)
//	3 TryUpdate(key, a/4, limit)  limit = reference estimate + a/4 + int8(b)/8
//	4 QueryDetailed(key)
//	5 Advance(a<<8 | b ms)        up to 65.5 s
func FuzzDifferential(f *testing.F) {
	f.Add([]byte{0})
	f.Add([]byte{4, 0, 0, 40, 0, 5, 0, 3, 232, 1, 0, 0, 0})
	f.Add([]byte{1,
		0, 1, 255, 0, 0, 2, 255, 1, 3, 1, 4, 0, 5, 0, 0, 99, 1, 1, 0, 0, 3, 2, 8, 0,
		2, 1, 3, 1, 5, 0, 1, 0, 4, 1, 0, 0, 4, 2, 0, 0})
	f.Add([]byte{255,
		3, 0, 4, 0, 3, 0, 4, 0, 3, 0, 4, 0, 3, 0, 4, 248, 5, 0, 0, 25, 3, 0, 4, 1,
		3, 3, 100, 7, 0, 4, 17, 0, 2, 5, 9, 1, 5, 1, 2, 0, 1, 3, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		clock := sketchtest.NewFakeClock()
		cfg := sketch.Config{
			Levels:        3,
			CellsPerLevel: 16,
			Hi:            1e9,
			Decay:         decay.Linear(1 + float64(data[0]>>2)),
			Aggregator:    allAggregators[int(data[0])%len(allAggregators)],
			Clock:         clock,
		}
		keys := make([][]byte, 6)
		for i := range keys {
			keys[i] = fmt.Appendf(nil, "fuzz-%d", i)
		}
		h := newDiffHarness(t, cfg, clock, keys, false)
		for data = data[1:]; len(data) >= 4 && h.ops < 512; data = data[4:] {
			kind, k, a, b := data[0]%6, int(data[1])%len(keys), data[2], data[3]
			delta, str := float64(a)/4, b&1 == 1
			switch kind {
			case 0:
				h.update(k, delta, str)
			case 1:
				h.query(k, str)
			case 2:
				h.updateAndQuery(k, delta, str)
			case 3:
				h.tryUpdate(k, delta, float64(int8(b))/8, str)
			case 4:
				h.queryDetailed(k)
			case 5:
				h.advance(int64(a)<<8 | int64(b))
			}
		}
		h.checkAll()
	})
}
