package core

import (
	"runtime"
	"testing"
)

// TestSuggestLevelsHugeHotKeysIsCheap: with billions of hot keys in a
// few cells each level's miss probability is far below 2^-512, and
// 1 - miss rounds to 1 at the rate's precision; computing it by
// big.Float's Sub shifted 1 across the whole exponent gap (audit 87:
// SuggestLevels(4 cells, 2^32-1 keys) allocated 212 MB). The answer is
// MaxLevels (no level meets a target below 1), 1 for a target of 1, and
// the allocation stays small.
func TestSuggestLevelsHugeHotKeysIsCheap(t *testing.T) {
	for _, tc := range []struct {
		m       uint32
		hotKeys uint64
		target  float64
		want    uint32
	}{
		{4, 1<<32 - 1, 0.5, MaxLevels},
		{8, 1<<32 - 1, 0.5, MaxLevels},
		{4, 1 << 31, 0.999, MaxLevels},
		{4, 1<<32 - 1, 1, 1},
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		got := SuggestLevels(tc.m, tc.hotKeys, tc.target)
		runtime.ReadMemStats(&after)
		if got != tc.want {
			t.Errorf("SuggestLevels(%d, %d, %v) = %d; want %d", tc.m, tc.hotKeys, tc.target, got, tc.want)
		}
		if b := after.TotalAlloc - before.TotalAlloc; b > 1<<20 {
			t.Errorf("SuggestLevels(%d, %d, %v) allocated %d bytes; want under 1 MiB", tc.m, tc.hotKeys, tc.target, b)
		}
	}
}
