package limit_test

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"
	"testing"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/snapshot"
)

// BenchmarkSnapshot measures a default limiter's snapshot on each engine
// (limit.New(10, 20): Buckets by Auto; CountMin forced), after 200,000
// keys took a token: WriteTo into io.Discard, ReadFrom from memory, and
// the durable WriteFile and Load through package snapshot. The size is
// reported as bytes (B/op's throughput).
func BenchmarkSnapshot(b *testing.B) {
	for _, eng := range []limit.Engine{limit.Buckets, limit.CountMin} {
		l := limit.MustNew(10, 20, limit.WithEngine(eng))
		for k := range 200_000 {
			l.Allow(fmt.Sprintf("client-%d", k))
		}
		var buf bytes.Buffer
		if _, err := l.WriteTo(&buf); err != nil {
			b.Fatal(err)
		}
		snap := buf.Bytes()
		b.Run(fmt.Sprintf("engine=%v/op=WriteTo", eng), func(b *testing.B) {
			b.SetBytes(int64(len(snap)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := l.WriteTo(io.Discard); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("engine=%v/op=ReadFrom", eng), func(b *testing.B) {
			r := limit.MustNew(10, 20, limit.WithEngine(eng))
			b.SetBytes(int64(len(snap)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := r.ReadFrom(bytes.NewReader(snap)); err != nil {
					b.Fatal(err)
				}
			}
		})
		path := filepath.Join(b.TempDir(), "limiter.snap")
		b.Run(fmt.Sprintf("engine=%v/op=WriteFile", eng), func(b *testing.B) {
			b.SetBytes(int64(len(snap)))
			for b.Loop() {
				if err := snapshot.WriteFile(path, l); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("engine=%v/op=Load", eng), func(b *testing.B) {
			r := limit.MustNew(10, 20, limit.WithEngine(eng))
			b.SetBytes(int64(len(snap)))
			for b.Loop() {
				if err := snapshot.Load(path, r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
