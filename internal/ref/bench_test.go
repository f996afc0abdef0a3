package ref

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
)

// benchKeys returns n uniformly random 8-byte keys, carved from one
// buffer so that setup costs one allocation.
func benchKeys(n int) [][]byte {
	rng := rand.New(rand.NewPCG(0xbe, 0xef))
	buf := make([]byte, 8*n)
	keys := make([][]byte, n)
	for i := range keys {
		k := buf[8*i : 8*i+8 : 8*i+8]
		binary.LittleEndian.PutUint64(k, rng.Uint64())
		keys[i] = k
	}
	return keys
}

// BenchmarkReference measures the serial hot paths at grudge's defaults
// (L=4, M=100k, Exponential(1), wall clock) over 1M uniform keys.
func BenchmarkReference(b *testing.B) {
	const nKeys = 1 << 20
	keys := benchKeys(nKeys)
	newSketch := func(b *testing.B) *Sketch {
		s, err := New(sketch.Config{Levels: 4, CellsPerLevel: 100_000, Decay: decay.Exponential(1), Hi: 1e12})
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	b.Run("op=Update", func(b *testing.B) {
		s := newSketch(b)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			s.Update(keys[i&(nKeys-1)], 1)
			i++
		}
	})
	b.Run("op=Query", func(b *testing.B) {
		s := newSketch(b)
		for _, k := range keys {
			s.Update(k, 1)
		}
		b.ReportAllocs()
		i := 0
		var sink float64
		for b.Loop() {
			sink += s.Query(keys[i&(nKeys-1)])
			i++
		}
		_ = sink
	})
	b.Run("op=TryUpdate/admitted", func(b *testing.B) {
		s := newSketch(b)
		b.ReportAllocs()
		i, denied := 0, 0
		for b.Loop() {
			if !s.TryUpdate(keys[i&(nKeys-1)], 1, 1e15) {
				denied++
			}
			i++
		}
		if denied != 0 {
			b.Fatalf("%d TryUpdates denied; this benchmark measures the admitted path", denied)
		}
	})
}
