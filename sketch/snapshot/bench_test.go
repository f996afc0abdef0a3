package snapshot_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/snapshot"
)

// BenchmarkFile measures a durable save (WriteFile: temp file, fsync,
// rename, directory fsync) and a Load from the page cache, for L=4 at
// M=100k and M=10M (docs/snapshots.md; run M=10M with -benchtime=3x).
func BenchmarkFile(b *testing.B) {
	for _, m := range []uint32{100_000, 10_000_000} {
		cfg := sketch.Config{Levels: 4, CellsPerLevel: m, Hi: 1e9, Decay: decay.Exponential(0.01)}
		src, _ := sketch.New(cfg)
		var key [8]byte
		for i := range 2 * int(m) {
			key[0], key[1], key[2], key[3] = byte(i), byte(i>>8), byte(i>>16), byte(i>>24)
			src.Update(key[:], 1)
		}
		path := filepath.Join(b.TempDir(), "s.snap")
		name := fmt.Sprintf("L=4/M=%d", m)
		b.Run(name+"/op=WriteFile", func(b *testing.B) {
			b.SetBytes(core.SketchOf(src).SnapshotSize())
			for b.Loop() {
				if err := snapshot.WriteFile(path, src); err != nil {
					b.Fatal(err)
				}
			}
		})
		dst, _ := sketch.New(cfg)
		b.Run(name+"/op=Load", func(b *testing.B) {
			b.SetBytes(core.SketchOf(src).SnapshotSize())
			for b.Loop() {
				if err := snapshot.Load(path, dst); err != nil {
					b.Fatal(err)
				}
			}
		})
		os.Remove(path)
	}
}
