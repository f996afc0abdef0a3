package redis

import (
	"errors"
	"math"
	"testing"
)

// TestAudit75SuggestDocClaims: sizing.go's and docs/capacity.md's
// numbers: 1M keys at 1% take 7 x 1,370,425 cells (73 MiB); 10M keys at
// 1% take 2 shards of 7 x 6,852,114 cells (about 366 MiB each, 0.7 GiB
// in all); README's column: 7.3 MiB, 73 MiB, 111 MiB, 0.7 GiB.
func TestAudit75SuggestDocClaims(t *testing.T) {
	s, err := Suggest(1_000_000, 0.01, 0)
	if err != nil || s.Levels != 7 || s.CellsPerLevel != 1_370_425 || s.Shards != 1 {
		t.Fatalf("Suggest(1M, 1%%) = %+v, %v", s, err)
	}
	s, err = Suggest(10_000_000, 0.01, 0)
	if err != nil || s.Levels != 7 || s.CellsPerLevel != 6_852_114 || s.Shards != 2 {
		t.Fatalf("Suggest(10M, 1%%) = %+v, %v", s, err)
	}
	per := float64(s.MemoryBytes) / 2 / (1 << 20)
	if math.Round(per) != 366 || math.Round(float64(s.MemoryBytes)/(1<<30)*10)/10 != 0.7 {
		t.Fatalf("Suggest(10M, 1%%): %v MiB a shard, %v GiB", per, float64(s.MemoryBytes)/(1<<30))
	}
	for _, row := range []struct {
		keys int
		deny float64
		mib  float64
		prec float64
	}{{100_000, 0.01, 7.3, 10}, {1_000_000, 0.01, 73, 1}, {1_000_000, 0.001, 111, 1}} {
		s, err := Suggest(row.keys, row.deny, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := math.Round(float64(s.MemoryBytes)/(1<<20)*row.prec) / row.prec; got != row.mib {
			t.Errorf("README row %d keys at %v: %v MiB; Suggest gives %v MiB", row.keys, row.deny, row.mib, got)
		}
	}
}

// TestAudit75SuggestAccepted: every Size Suggest returns (edge denials,
// 1 key, huge counts, many shards in) is accepted by NewLimiter offline
// (CheckSkip), its strings fit 512 MiB, MemoryBytes is the sketch's,
// Shards >= the shards asked and <= 16384, Deny <= deny; and the refusals
// match ErrInvalidConfig.
func TestAudit75SuggestAccepted(t *testing.T) {
	t.Parallel() // its own server (or none), a fake clock: only the longest oracles run side by side
	c := audit74Offline(t)
	for _, keys := range []int{1, 2, 7, 1000, 123_457, 10_000_000, 70_000_000, 1_000_000_000, 50_000_000_000, 100_000_000_000, 114_000_000_000} {
		for _, deny := range []float64{1e-300, 1e-12, 1e-6, 0.01, 0.5, 0.999999, math.Nextafter(1, 0)} {
			for _, sh := range []uint32{0, 1, 3, 1000, 16384} {
				s, err := Suggest(keys, deny, sh)
				if err != nil {
					if !errors.Is(err, ErrInvalidConfig) {
						t.Fatalf("Suggest(%d, %v, %d): %v", keys, deny, sh, err)
					}
					continue
				}
				if s.Shards < max(sh, 1) || s.Shards > maxShards || s.Deny > deny {
					t.Fatalf("Suggest(%d, %v, %d) = %+v", keys, deny, sh, s)
				}
				l, err := NewLimiterGoRedis(c, LimiterConfig{Name: "s", Limit: PerSecond(1, 10), Levels: s.Levels, CellsPerLevel: s.CellsPerLevel, Shards: s.Shards, ServerCheck: CheckSkip})
				if err != nil {
					t.Fatalf("Suggest(%d, %v, %d) = %+v refused: %v", keys, deny, sh, s, err)
				}
				if l.sk.MemoryBytes() != s.MemoryBytes || l.sk.stringBytes() > defaultMaxBulk {
					t.Fatalf("Suggest(%d, %v, %d): MemoryBytes %d, the sketch's %d, string %d", keys, deny, sh, s.MemoryBytes, l.sk.MemoryBytes(), l.sk.stringBytes())
				}
			}
		}
	}
	for _, bad := range []struct {
		keys int
		deny float64
		sh   uint32
	}{{0, 0.01, 0}, {-1, 0.01, 0}, {1, 0, 0}, {1, 1, 0}, {1, math.NaN(), 0}, {1, 0.01, 16385}, {math.MaxInt, 0.01, 0}, {math.MaxInt, 0.5, 16384}} {
		if s, err := Suggest(bad.keys, bad.deny, bad.sh); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("Suggest(%d, %v, %d) = %+v, %v; want ErrInvalidConfig", bad.keys, bad.deny, bad.sh, s, err)
		}
	}
}

// audit75Mem is Suggest's MemoryBytes (-1 on error).
func audit75Mem(t *testing.T, keys int, deny float64, sh uint32) (int64, uint32) {
	s, err := Suggest(keys, deny, sh)
	if err != nil {
		return -1, 0
	}
	return s.MemoryBytes, s.Shards
}

// TestAudit75SuggestMonotoneShardsIn: more shards asked never gives fewer
// shards out (nor less memory: each shard's header and rounding).
func TestAudit75SuggestMonotoneShardsIn(t *testing.T) {
	for _, keys := range []int{10_000_000, 25_000_000, 70_000_000, 300_000_000} {
		for _, deny := range []float64{0.01, 0.001, 0.2} {
			_, prev := audit75Mem(t, keys, deny, 1)
			for sh := uint32(2); sh <= 48; sh++ {
				_, got := audit75Mem(t, keys, deny, sh)
				if got < prev {
					t.Errorf("Suggest(%d, %v, %d) gives %d shards; Suggest(.., %d) gave %d", keys, deny, sh, got, sh-1, prev)
				}
				prev = got
			}
		}
	}
}

// TestAudit75SuggestMonotoneKeys: around each point where Suggest raises
// the shard count (1 -> 2, 2 -> 3, 4 -> 5 at several denials), one more
// key never gives less memory or fewer shards.
func TestAudit75SuggestMonotoneKeys(t *testing.T) {
	for _, deny := range []float64{0.01, 0.001, 0.3} {
		for _, target := range []uint32{2, 3, 5} {
			lo, hi := 1, 1<<40
			for hi-lo > 1 {
				m := lo + (hi-lo)/2
				if _, sh := audit75Mem(t, m, deny, 1); sh >= target || sh == 0 {
					hi = m
				} else {
					lo = m
				}
			}
			pm, ps := audit75Mem(t, lo-60, deny, 1)
			for k := lo - 59; k < lo+60; k++ {
				m, s := audit75Mem(t, k, deny, 1)
				if m < pm || s < ps {
					t.Errorf("deny %v: %d keys take %d bytes in %d shards; %d keys %d bytes in %d shards", deny, k-1, pm, ps, k, m, s)
				}
				pm, ps = m, s
			}
		}
	}
}

// TestAudit75SuggestMonotoneDeny: a smaller denial never takes less
// memory (1 shard and beyond), and at 16384 shards asked the largest
// count that fits is accepted while one far beyond it is refused.
func TestAudit75SuggestMonotoneDeny(t *testing.T) {
	for _, keys := range []int{1000, 1_000_000, 9_000_000, 40_000_000} {
		prev := int64(0)
		for _, deny := range []float64{0.9, 0.5, 0.3, 0.1, 0.05, 0.01, 0.005, 0.001, 1e-4, 1e-5, 1e-6} {
			m, _ := audit75Mem(t, keys, deny, 0)
			if m < 0 {
				t.Fatalf("Suggest(%d, %v) refused", keys, deny)
			}
			if m < prev {
				t.Errorf("Suggest(%d, %v) takes %d bytes, less than a larger denial's %d", keys, deny, m, prev)
			}
			prev = m
		}
	}
	if _, sh := audit75Mem(t, 114_000_000_000, 0.01, 0); sh == 0 || sh > maxShards {
		t.Errorf("Suggest(114e9, 1%%): %d shards", sh)
	}
	if m, _ := audit75Mem(t, 1_000_000_000_000, 0.01, 0); m != -1 {
		t.Errorf("Suggest(1e12, 1%%) = %d bytes; want a refusal", m)
	}
}

// TestAudit75FixedCapacityDoc20kCells: docs/capacity.md's redis
// paragraph: "Measured against a redis-server (`TestSuggestMeasured`,
// 20,000 keys at 1%: 7 x 27,409 cells, 1.5 MB)". Suggest(20000, 0.01, 1),
// what TestSuggestMeasured sizes with, gives 7 x 27,412 cells since the
// double-hashing pairs term (95347b2): the paragraph's number is stale.
func TestAudit75FixedCapacityDoc20kCells(t *testing.T) {
	m, err := Suggest(20_000, 0.01, 1)
	if err != nil {
		t.Fatal(err)
	}
	if m.Levels != 7 || m.CellsPerLevel != 27_412 || math.Round(float64(m.MemoryBytes)/1e5)/10 != 1.5 {
		t.Errorf("docs/capacity.md: \"TestSuggestMeasured, 20,000 keys at 1%%: 7 x 27,412 cells, 1.5 MB\"; Suggest(20000, 0.01, 1) = %d x %d cells, %d bytes (Deny %v)",
			m.Levels, m.CellsPerLevel, m.MemoryBytes, m.Deny)
	}
}
