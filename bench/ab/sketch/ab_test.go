package sketch_test

// A/B benchmarks of the public sketch face, written against the API every
// version of the module has had (Update, Query, TryUpdate on []byte keys,
// UpdateString), so that the same file compiles in an older tree: copy it
// into that tree's sketch/ directory, build both test binaries and run
// them interleaved (docs/benchmarks.md, "Faces over the engine").

import (
	"encoding/binary"
	"testing"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
)

var abKeys = func() [][]byte {
	ks := make([][]byte, 1<<20)
	for i := range ks {
		k := make([]byte, 16)
		binary.LittleEndian.PutUint64(k, uint64(i)*0x9e3779b97f4a7c15)
		ks[i] = k
	}
	return ks
}()

var abSinkF float64
var abSinkB bool

func abNew(b *testing.B) *sketch.Sketch {
	s, err := sketch.New(sketch.Config{Levels: 4, CellsPerLevel: 100_000, Decay: decay.Exponential(1), Hi: 1e12})
	if err != nil {
		b.Fatal(err)
	}
	for _, k := range abKeys {
		s.Update(k, 1)
	}
	return s
}

func abRun(b *testing.B, op func(s *sketch.Sketch, k []byte)) {
	for _, kd := range []string{"uniform1M", "hot1"} {
		b.Run("keys="+kd, func(b *testing.B) {
			s := abNew(b)
			mask := len(abKeys) - 1
			if kd == "hot1" {
				mask = 0
			}
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				op(s, abKeys[i])
				i = (i + 1) & mask
			}
		})
	}
}

func BenchmarkABUpdate(b *testing.B) { abRun(b, func(s *sketch.Sketch, k []byte) { s.Update(k, 1) }) }
func BenchmarkABQuery(b *testing.B) {
	abRun(b, func(s *sketch.Sketch, k []byte) { abSinkF = s.Query(k) })
}
func BenchmarkABTryUpdate(b *testing.B) {
	abRun(b, func(s *sketch.Sketch, k []byte) { abSinkB = s.TryUpdate(k, 1, 1e11) })
}
func BenchmarkABUpdateString(b *testing.B) {
	abRun(b, func(s *sketch.Sketch, k []byte) { s.UpdateString(string(k[:8]), 1) })
}
