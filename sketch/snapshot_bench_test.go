package sketch_test

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
)

// BenchmarkSnapshot measures encoding (WriteTo to io.Discard, and
// MarshalBinary), decoding (UnmarshalBinary, ReadFrom from memory) and
// Merge for L=4 at M=100k and M=10M, Exponential decay, every cell
// written. docs/snapshots.md records the numbers; M=10M needs about
// 1.3 GB (two sketches, one snapshot buffer), run it with -benchtime=3x.
func BenchmarkSnapshot(b *testing.B) {
	for _, m := range []uint32{100_000, 10_000_000} {
		cfg := sketch.Config{Levels: 4, CellsPerLevel: m, Hi: 1e9, Decay: decay.Exponential(0.01)}
		src, err := sketch.New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		var key [8]byte
		for i := range 2 * int(m) {
			key[0], key[1], key[2], key[3] = byte(i), byte(i>>8), byte(i>>16), byte(i>>24)
			src.Update(key[:], 1)
		}
		data, _ := src.MarshalBinary()
		dst, _ := sketch.New(cfg)
		name := fmt.Sprintf("L=4/M=%d", m)
		b.Run(name+"/op=WriteTo", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportMetric(float64(len(data)), "snapshot-bytes")
			for b.Loop() {
				if _, err := src.WriteTo(io.Discard); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/op=MarshalBinary", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := src.MarshalBinary(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/op=UnmarshalBinary", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if err := dst.UnmarshalBinary(data); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/op=ReadFrom", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			r := bytes.NewReader(data)
			for b.Loop() {
				r.Reset(data)
				if _, err := dst.ReadFrom(r); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/op=Merge", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if err := dst.Merge(src, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
