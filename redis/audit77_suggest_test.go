package redis

import (
	"errors"
	"testing"
)

// TestAudit77SuggestDocNumbers: the numbers stop 48 put in the docs.
// sizing.go: "1M keys at 1% take 7 x 1,370,425 cells, 73 MiB" and "10M
// keys at 1% take 2 shards of about 366 MiB"; capacity.md: "2 shards of
// 7 x 6,852,114 cells (366 MiB each, 0.7 GiB in all)" and "20,000 keys at
// 1%: 7 x 27,412 cells, 1.5 MB"; README: "0.7 GiB (2 shards)". Every
// returned shard's string fits the 512 MiB default and Check's formula
// (stringBytes) agrees with MemoryBytes; shards > 16384 is ErrInvalidConfig.
func TestAudit77SuggestDocNumbers(t *testing.T) {
	const MiB = 1 << 20
	z, err := Suggest(1_000_000, 0.01, 0)
	if err != nil || z.Levels != 7 || z.CellsPerLevel != 1_370_425 || z.Shards != 1 || z.MemoryBytes/MiB != 73 {
		t.Fatalf("Suggest(1M, 1%%) = %+v, %v; want 7 x 1,370,425, 1 shard, 73 MiB", z, err)
	}
	z, err = Suggest(10_000_000, 0.01, 0)
	if err != nil || z.Levels != 7 || z.CellsPerLevel != 6_852_114 || z.Shards != 2 {
		t.Fatalf("Suggest(10M, 1%%) = %+v, %v; want 2 shards of 7 x 6,852,114", z, err)
	}
	per := z.MemoryBytes / int64(z.Shards)
	if per/MiB != 365 && per/MiB != 366 || per > defaultMaxBulk {
		t.Fatalf("Suggest(10M, 1%%) per shard %d bytes (%d MiB); want about 366 MiB, <= 512 MiB", per, per/MiB)
	}
	if g := float64(z.MemoryBytes) / (1 << 30); g < 0.65 || g >= 0.75 {
		t.Fatalf("Suggest(10M, 1%%) total %.3f GiB; want 0.7", g)
	}
	s := &Sketch{cfg: normalized{Config: Config{Levels: z.Levels, CellsPerLevel: z.CellsPerLevel}}}
	if s.stringBytes() != per {
		t.Fatalf("Check's string size %d != Suggest's per-shard %d", s.stringBytes(), per)
	}
	z, err = Suggest(20_000, 0.01, 0)
	if err != nil || z.Levels != 7 || z.CellsPerLevel != 27_412 {
		t.Fatalf("Suggest(20k, 1%%) = %+v, %v; want 7 x 27,412 (capacity.md)", z, err)
	}
	if mb := float64(z.MemoryBytes) / 1e6; mb < 1.45 || mb >= 1.55 {
		t.Fatalf("Suggest(20k, 1%%) = %d bytes; want 1.5 MB", z.MemoryBytes)
	}
	for _, k := range []int{100_000_000, 1_000_000_000} {
		z, err = Suggest(k, 0.001, 0)
		if err != nil {
			t.Fatalf("Suggest(%d, 0.1%%): %v", k, err)
		}
		if b := z.MemoryBytes / int64(z.Shards); b > defaultMaxBulk {
			t.Fatalf("Suggest(%d, 0.1%%) = %+v: a shard of %d bytes, above 512 MiB", k, z, b)
		}
	}
	if _, err := Suggest(10, 0.01, 16385); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("Suggest shards 16385: %v; want ErrInvalidConfig", err)
	}
}
