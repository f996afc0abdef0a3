package redis

import (
	"math"
	"testing"

	"github.com/lfgrudge/grudge/limit/httplimit"
)

// README.md:131-133: the Redis module's Limiter is an httplimit.Limiter.
var _ httplimit.Limiter = (*Limiter)(nil)

// README.md:54-59: the "Redis sketch (redis.Suggest)" column.
func TestAudit72READMERedisColumn(t *testing.T) {
	rows := []struct {
		keys int
		deny float64
		mib  float64
	}{
		{100_000, 0.01, 7.3},
		{1_000_000, 0.01, 73},
		{1_000_000, 0.001, 111},
		{10_000_000, 0.01, 0.7 * 1024},
	}
	for _, r := range rows {
		s, err := Suggest(r.keys, r.deny, 1)
		if err != nil {
			t.Fatal(err)
		}
		got := float64(s.MemoryBytes) / (1 << 20)
		t.Logf("Suggest(%d, %g, 1): %.2f MiB", r.keys, r.deny, got)
		if math.Abs(got-r.mib)/r.mib > 0.05 {
			t.Errorf("README.md sizing table: redis.Suggest(%d, %g, 1) = %.2f MiB, table says %g MiB", r.keys, r.deny, got, r.mib)
		}
	}
}
