package limit_test

import (
	"strconv"
	"testing"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// BenchmarkMultiDecide: a Multi of two count-min windows (per second and
// per hour) deciding for 1024 keys in turn on a frozen fake clock, so
// that each decision costs the same: admitted (windows far from full:
// the precheck, two takes and the state read) and denied (the second
// window full: the precheck denies, and the first window's RejectCost
// is 0).
func BenchmarkMultiDecide(b *testing.B) {
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = "client-" + strconv.Itoa(i)
	}
	for _, tc := range []struct {
		name  string
		burst int
	}{
		{"admitted", 1 << 20},
		{"denied", 1},
	} {
		b.Run(tc.name, func(b *testing.B) {
			clk := sketchtest.NewFakeClock()
			clk.Set(1 << 30)
			sec := limit.MustNew(1e6, 1<<20, limit.WithClock(clk), limit.WithSize(4, 1<<14))
			hour := limit.MustNew(limit.Limit(float64(tc.burst)/3600), tc.burst, limit.WithClock(clk), limit.WithSize(4, 1<<14))
			m, err := limit.NewMulti(sec, hour)
			if err != nil {
				b.Fatal(err)
			}
			now := clk.Now()
			for _, k := range keys {
				m.DecideKeys(now, 1, k)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				m.DecideKeys(now, 1, keys[i&1023])
			}
		})
	}
}
