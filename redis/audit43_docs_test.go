package redis

import (
	"math"
	"testing"
)

// README.md's sizing table, "Redis sketch (redis.Suggest)" column, and
// Suggest's doc: "1M keys at 1% take 7 x 1,370,425 cells, 73 MiB";
// MemoryBytes = Shards x (40 + L x M x 8).
func TestAudit43ReadmeRedisSuggest(t *testing.T) {
	rows := []struct {
		keys int
		deny float64
		mib  float64
		prec float64
	}{
		{100_000, 0.01, 7.3, 10},
		{1_000_000, 0.01, 73, 1},
		{1_000_000, 0.001, 111, 1},
		{10_000_000, 0.01, 0.7 * 1024, 0},
	}
	for _, r := range rows {
		s, err := Suggest(r.keys, r.deny, 0)
		if err != nil {
			t.Fatalf("Suggest(%d, %v): %v", r.keys, r.deny, err)
		}
		// Stop 48: Suggest raises Shards until a shard's string fits in
		// 512 MiB, so 10M keys at 1% take 2 shards (README: "2 shards").
		wantShards := uint32(1)
		if r.keys == 10_000_000 {
			wantShards = 2
		}
		if s.MemoryBytes != int64(s.Shards)*(40+int64(s.Levels)*int64(s.CellsPerLevel)*8) || s.Shards != wantShards {
			t.Errorf("MemoryBytes %d != Shards x (40 + L x M x 8) for %+v", s.MemoryBytes, s)
		}
		m := float64(s.MemoryBytes) / (1 << 20)
		if r.prec == 0 {
			if g := math.Round(m/1024*10) / 10; g != 0.7 {
				t.Errorf("Suggest(%d, %v) = %.3f GiB, README says 0.7 GiB", r.keys, r.deny, m/1024)
			}
		} else if g := math.Round(m*r.prec) / r.prec; g != r.mib {
			t.Errorf("Suggest(%d, %v) = %.3f MiB, README says %v", r.keys, r.deny, m, r.mib)
		}
	}
	s, _ := Suggest(1_000_000, 0.01, 0)
	if s.Levels != 7 || s.CellsPerLevel != 1_370_425 {
		t.Errorf("Suggest(1M, 1%%) = %d x %d, doc: 7 x 1,370,425", s.Levels, s.CellsPerLevel)
	}
}
