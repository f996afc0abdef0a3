package sketch_test

import (
	"sync/atomic"
	"testing"

	"github.com/lfgrudge/grudge/bench/matrix"
)

// BenchmarkHot is the cached-line part of the matrix as a go test
// benchmark, for benchstat: the hot-key write cells the cheaper-cell
// targets name (docs/design.md, "Hot keys on a cached line"), lockfree
// and reference both on the matrix's shared clock (matrix.SharedClock,
// the runtime's nanotime), so the ratio is the cell design's alone.
// Sub-benchmarks: op=Update|UpdateAndQuery|TryUpdateAdmitted|UpdateSaturated
// / keys=hot1|hot8 / mode=serial|parallel / impl=lockfree|reference.
// UpdateSaturated adds Hi to keys filled with Hi: every cell pinned at
// Hi (the lock-free sketch then writes nothing within a millisecond).
//
//	go test -run '^$' -bench 'BenchmarkHot$' -cpu 1,2 ./sketch/
func BenchmarkHot(b *testing.B) {
	ops := []struct {
		name string
		fill float64
		op   benchOp
	}{
		{"Update", 1, func(s benchScorer, k []byte) { s.Update(k, 1) }},
		{"UpdateAndQuery", 1, func(s benchScorer, k []byte) { sinkF = s.UpdateAndQuery(k, 1) }},
		{"TryUpdateAdmitted", 1, func(s benchScorer, k []byte) { sinkB = s.TryUpdate(k, 1, hugeLimit) }},
		{"UpdateSaturated", matrix.Hi, func(s benchScorer, k []byte) { s.Update(k, matrix.Hi) }},
	}
	for _, o := range ops {
		b.Run("op="+o.name, func(b *testing.B) {
			for _, kd := range []struct {
				name string
				n    int
			}{{"hot1", 1}, {"hot8", 8}} {
				b.Run("keys="+kd.name, func(b *testing.B) {
					keys, mask := benchKeys()[:kd.n], kd.n-1
					for _, mode := range []string{"serial", "parallel"} {
						b.Run("mode="+mode, func(b *testing.B) {
							for _, name := range implNames[:2] {
								b.Run("impl="+name, func(b *testing.B) {
									s, closeFn, err := matrix.NewTarget(name, benchLevels, benchCells, matrix.ClockShared)
									if err != nil {
										b.Fatal(err)
									}
									defer closeFn()
									for _, k := range keys {
										s.Update(k, o.fill)
									}
									b.ReportAllocs()
									if mode == "serial" {
										i := 0
										for b.Loop() {
											o.op(s, keys[i])
											i = (i + 1) & mask
										}
									} else {
										var seed atomic.Uint64
										b.ResetTimer()
										b.RunParallel(func(pb *testing.PB) {
											i := int(seed.Add(1)) & mask
											for pb.Next() {
												o.op(s, keys[i])
												i = (i + 1) & mask
											}
										})
									}
									reportMops(b)
								})
							}
						})
					}
				})
			}
		})
	}
}
