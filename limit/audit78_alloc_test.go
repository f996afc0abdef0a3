package limit_test

import (
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// Allocation promises on the less-travelled surface, both engines:
// Allow/AllowN "does not allocate" (limit.go), also for long keys;
// Tier.Allow "does not allocate" (tier.go); ReserveN "allocates only its
// *Reservation, as x/time/rate's" (docs/migrating.md); Stats "does not
// allocate, unless it performs a rotation that is due" (stats.go);
// Multi.Stats "does not allocate"; a Multi of four windows with
// per-window keys "does not allocate" (multi.go).
func TestAudit78Allocs(t *testing.T) {
	testsize.Serial(t)
	if testing.Short() {
		t.Skip()
	}
	long := strings.Repeat("k", 300)
	for _, e := range []limit.Engine{limit.Buckets, limit.CountMin} {
		t.Run(e.String(), func(t *testing.T) {
			clk := limittest.NewFakeClock()
			clk.Set(a78Start)
			l := limit.MustNew(1000, 30000, a78Opts(clk, e, 3, limit.WithMaxDebt(60000))...)
			tr, err := l.Tier("half", 500, 1000)
			if err != nil {
				t.Fatal(err)
			}
			now := clk.Now()
			check := func(name string, want float64, f func()) {
				t.Helper()
				f()
				if got := testing.AllocsPerRun(200, f); got > want {
					t.Errorf("%s: %v allocs per call; want <= %v", name, got, want)
				}
			}
			check("AllowN long key", 0, func() { l.AllowN(now, long, 1) })
			check("Allow long key", 0, func() { l.Allow(long) })
			check("Tier.Allow", 0, func() { tr.Allow("t") })
			check("ReserveN", 1, func() { l.ReserveN(now, "r", 1) })
			check("Tier.ReserveN", 1, func() { tr.ReserveN(now, "r2", 1) })
			check("Stats", 0, func() { _ = l.Stats() })
			var ws []*limit.Limiter
			for i := range 4 {
				ws = append(ws, limit.MustNew(1000, 30000, a78Opts(clk, e, uint64(20+i), limit.WithMaxDebt(60000))...))
			}
			m, _ := limit.NewMulti(ws...)
			check("Multi.DecideKeys 4 keys", 0, func() { m.DecideKeys(now, 1, "a", "b", "c", "d") })
			check("Multi.AllowN", 0, func() { m.AllowN(now, "a", 1) })
			check("Multi.Stats", 0, func() { _ = m.Stats() })
			_ = time.Second
		})
	}
}
