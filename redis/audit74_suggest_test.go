package redis

import (
	"errors"
	"math"
	"math/big"
	"strings"
	"testing"
)

// TestAudit74SuggestFits: the sizes Suggest gives for README's first rows
// are accepted by New (offline) and fit the default proto-max-bulk-len.
func TestAudit74SuggestFits(t *testing.T) {
	c := audit74Offline(t)
	for _, k := range []int{100_000, 1_000_000} {
		for _, sh := range []uint32{0, 1, 4, 16384} {
			s, err := Suggest(k, 0.01, sh)
			if err != nil {
				t.Fatal(err)
			}
			l, err := NewLimiterGoRedis(c, LimiterConfig{Name: "s", Limit: PerSecond(1, 10), Levels: s.Levels, CellsPerLevel: s.CellsPerLevel, Shards: s.Shards, ServerCheck: CheckSkip})
			if err != nil {
				t.Fatalf("Suggest(%d, 0.01, %d) = %+v refused: %v", k, sh, s, err)
			}
			if l.sk.MemoryBytes() != s.MemoryBytes || l.sk.stringBytes() > defaultMaxBulk {
				t.Fatalf("Suggest(%d, 0.01, %d): MemoryBytes %d, sketch's %d, string %d", k, sh, s.MemoryBytes, l.sk.MemoryBytes(), l.sk.stringBytes())
			}
		}
	}
}

// TestAudit74FixedSuggestAboveDefaultBulkLen: README's sizing row
// "10,000,000 | 1% | ... | 0.7 GiB" (redis.Suggest): Suggest(10M, 1%, 0)
// returns one shard of one 767,436,584-byte string, above Redis's default
// proto-max-bulk-len (512 MiB), so NewLimiter with that Size refuses it
// under the default ServerCheck on a default server. Nothing is written.
func TestAudit74FixedSuggestAboveDefaultBulkLen(t *testing.T) {
	s, err := Suggest(10_000_000, 0.01, 0)
	if err != nil {
		t.Fatal(err)
	}
	str := 40 + int64(s.Levels)*int64(s.CellsPerLevel)*8
	e := newEnv(t, "rueidis", "standalone")
	_, err = e.newLimiter(t, LimiterConfig{Name: "sugg", Limit: PerSecond(1, 10), Levels: s.Levels, CellsPerLevel: s.CellsPerLevel, Shards: s.Shards})
	if audit74Exists(t, e.srv.addr(), "{sugg}:g") != 0 {
		t.Fatal("a string was created")
	}
	if err != nil {
		t.Errorf("Suggest(10_000_000, 0.01, 0) = %+v (one string of %d bytes > 512 MiB = %d); NewLimiter with that Size on a default redis-server: %v.\n"+
			"sizing.go: \"Size is a server sketch size for a capacity target: what Suggest returns, to put in LimiterConfig\"; "+
			"README's row gives 0.7 GiB for 10M keys at 1%%. Expected Suggest to pick Shards so each string fits (or to refuse), got a Size the default check refuses (errors.Is ErrInvalidConfig: %v)",
			s, str, defaultMaxBulk, err, errors.Is(err, ErrInvalidConfig))
	}
}

// TestAudit74FixedSuggestAboveMaxBytes: Suggest(100M, 1%, 0) returns 7
// levels of 137,042,213 cells (a 7.67 GB string), which Config refuses
// before any server is contacted (the core's 4 GiB MaxBytes): a Size "to
// put in LimiterConfig" that LimiterConfig cannot take.
func TestAudit74FixedSuggestAboveMaxBytes(t *testing.T) {
	s, err := Suggest(100_000_000, 0.01, 0)
	if err != nil {
		return // refusing is fine too
	}
	_, err = NewLimiterGoRedis(audit74Offline(t), LimiterConfig{Name: "s", Limit: PerSecond(1, 10), Levels: s.Levels, CellsPerLevel: s.CellsPerLevel, Shards: s.Shards, ServerCheck: CheckSkip})
	if err != nil {
		t.Errorf("Suggest(100_000_000, 0.01, 0) = %+v with no error, but NewLimiter (CheckSkip, no server) refuses that Size: %v.\n"+
			"sizing.go: \"Size ... what Suggest returns, to put in LimiterConfig (or Config)\"; expected Suggest to return a usable Size or an error matching ErrInvalidConfig", s, err)
	}
}

// TestAudit74FixedSuggestShardsUnbounded: Config.Shards is at most
// 16384, but Suggest takes any shards: it returns Shards 20000 (refused by
// New), a negative MemoryBytes once shards x string overflows int64, and
// for keys near MaxInt an error saying keys is negative (keys+shards-1
// overflows).
func TestAudit74FixedSuggestShardsUnbounded(t *testing.T) {
	s, err := Suggest(1, 0.5, 20000)
	if err == nil {
		if _, cerr := NewGoRedis(audit74Offline(t), Config{Name: "s", Hi: 1e9, Levels: s.Levels, CellsPerLevel: s.CellsPerLevel, Shards: s.Shards}); cerr != nil {
			t.Errorf("Suggest(1, 0.5, 20000) = %+v, nil; New with that Size: %v. sizing.go: Size is \"what Suggest returns, to put in LimiterConfig (or Config)\"; config.go: Shards \"at most 16384\". Expected an ErrInvalidConfig from Suggest or Shards <= 16384", s, cerr)
		}
	}
	s, err = Suggest(1<<60, 0.5, math.MaxUint32)
	if err == nil {
		want := new(big.Int).Mul(big.NewInt(int64(s.Shards)), big.NewInt(40+int64(s.Levels)*int64(s.CellsPerLevel)*8))
		if !want.IsInt64() || want.Int64() != s.MemoryBytes {
			t.Errorf("Suggest(1<<60, 0.5, MaxUint32) = %+v: MemoryBytes %d; sizing.go: \"MemoryBytes ... Shards x (40 + L x M x 8) bytes\" = %s (overflows int64)", s, s.MemoryBytes, want)
		}
	}
	_, err = Suggest(math.MaxInt, 0.01, 2)
	if err != nil && strings.Contains(err.Error(), "got -") {
		t.Errorf("Suggest(MaxInt, 0.01, 2): %v; the input keys = %d >= 1, yet the error reports a negative keys (per-shard count keys+shards-1 overflowed, sizing.go:47)", err, math.MaxInt)
	}
}
