package redis

import "testing"

// README's sizing table, "Redis sketch (`redis.Suggest`)" column: 7.3 MiB,
// 73 MiB, 111 MiB, 0.7 GiB.
func TestAudit64ReadmeRedisSuggest(t *testing.T) {
	for _, c := range []struct {
		keys int
		deny float64
		mib  float64
		tol  float64
	}{{100_000, 0.01, 7.3, 0.05}, {1_000_000, 0.01, 73, 0.5}, {1_000_000, 0.001, 111, 0.5}, {10_000_000, 0.01, 0.7 * 1024, 0.05 * 1024}} {
		s, err := Suggest(c.keys, c.deny, 1)
		if err != nil {
			t.Fatal(err)
		}
		got := float64(s.MemoryBytes) / (1 << 20)
		t.Logf("Suggest(%d, %v, 1) = %+v (%.2f MiB)", c.keys, c.deny, s, got)
		if got < c.mib-c.tol || got > c.mib+c.tol {
			t.Errorf("redis.Suggest(%d, %v) = %.2f MiB; README: %v MiB", c.keys, c.deny, got, c.mib)
		}
	}
}
