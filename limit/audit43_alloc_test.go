package limit_test

import (
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// README.md: "if !l.Allow(clientIP) { // zero allocations"; limit/doc.go:
// a Tier's "Allow does not allocate"; Stats "does not allocate (but see
// Rotations)".
func TestAudit43NoAllocs(t *testing.T) {
	for _, e := range []limit.Engine{limit.Buckets, limit.CountMin} {
		c := limittest.NewFakeClock()
		c.Set(1_000_000)
		l := limit.MustNew(10, 20, limit.WithClock(c), limit.WithEngine(e), limit.WithMaxDebt(80))
		tier, err := l.Tier("free", 2.5, 20)
		if err != nil {
			t.Fatal(err)
		}
		keys := []string{"a", "b", "c", "192.0.2.1"}
		i := 0
		l.Stats()
		for name, f := range map[string]func(){
			"Allow":      func() { l.Allow(keys[i%4]); i++ },
			"AllowN":     func() { l.AllowN(c.Now(), keys[i%4], 2); i++ },
			"Decide":     func() { l.Decide(keys[i%4]); i++ },
			"Tier.Allow": func() { tier.Allow(keys[i%4]); i++ },
			"Stats":      func() { l.Stats() },
			"Tokens":     func() { l.Tokens("a") },
		} {
			if a := testing.AllocsPerRun(200, f); a != 0 {
				t.Errorf("%v %s: %v allocs/op, docs: none", e, name, a)
			}
		}
		_ = time.Second
	}
}
