package limit_test

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// TestAudit101MultiConcurrentOneKeyExact: many goroutines on one key
// through a Multi of two count-min windows, the first (in take order)
// wider than the second, at one instant of a fake clock, GOMAXPROCS 1..8.
// Every request the second window denies after the first took must be
// refunded (Multi's doc: "the windows already taken are refunded
// (Cancel's rule: exactly where nothing else touched the key's cells
// since, or, on the count-min, only in the same millisecond below
// MaxDebt"): everything here is one millisecond and below MaxDebt. So
// the Multi admits exactly the narrow window's burst (never more: each
// take is strict; never less: no take leaks), the wide window ends
// owing exactly what was admitted, as does the narrow one. A
// Buckets run checks only the upper bound and that the windows
// never owe less than what was admitted (Buckets may keep a take that
// another request wrote over). Variants: the narrow window with MaxDebt
// = burst (its take never comes back, so takeOrder puts it last), given
// first or second to NewMulti.
func TestAudit101MultiConcurrentOneKeyExact(t *testing.T) {
	procs := []int{1, 2, 4, 8}
	rounds := 2
	if testing.Short() {
		procs, rounds = []int{1, 4}, 1
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	type variant struct {
		name    string
		keeps   bool // narrow: MaxDebt = burst, its take never comes back, so it takes last
		swapped bool // NewMulti(narrow, wide)
	}
	variants := []variant{{"plain", false, false}, {"keeps", true, false}, {"keeps-swapped", true, true}}
	for _, v := range variants {
		for _, e := range a101Engines {
			for _, p := range procs {
				for r := range rounds {
					t.Run(fmt.Sprintf("%s/%v/P%d/%d", v.name, e, p, r), func(t *testing.T) {
						runtime.GOMAXPROCS(p)
						clk := limittest.NewFakeClock()
						clk.Set(1 << 32)
						wide := limit.MustNew(10, 40, limit.WithClock(clk), limit.WithEngine(e), limit.WithSeed(uint64(r)))
						nopts := []limit.Option{limit.WithClock(clk), limit.WithEngine(e), limit.WithSeed(uint64(r + 100))}
						if v.keeps {
							nopts = append(nopts, limit.WithMaxDebt(13))
						}
						narrow := limit.MustNew(2, 13, nopts...)
						m, _ := limit.NewMulti(wide, narrow)
						if v.swapped {
							m, _ = limit.NewMulti(narrow, wide)
						}
						now := clk.Now()
						var admitted atomic.Int64
						var wg sync.WaitGroup
						for g := range 8 {
							wg.Add(1)
							go func() {
								defer wg.Done()
								for i := range 20 {
									n := 1 + (g+i)%2
									if m.AllowN(now, "k", n) {
										admitted.Add(int64(n))
									}
								}
							}()
						}
						wg.Wait()
						a := admitted.Load()
						if a > 13 {
							t.Fatalf("admitted %d tokens against a burst of 13", a)
						}
						wt, nt := wide.TokensAt(now, "k"), narrow.TokensAt(now, "k")
						if 40-wt < float64(a) || 13-nt < float64(a) {
							t.Fatalf("admitted %d but the windows owe %v and %v", a, 40-wt, 13-nt)
						}
						if e == limit.Buckets {
							return
						}
						// Every request of 1 is admitted while one token is
						// left, so the narrow window ends full or at 12.
						if a < 12 {
							t.Errorf("admitted %d tokens, narrow window owes %v: a refund leaked (wide owes %v)", a, 13-nt, 40-wt)
						}
						if 40-wt != float64(a) || 13-nt != float64(a) {
							t.Errorf("admitted %d; wide owes %v, narrow %v: the denied requests' takes were not all given back", a, 40-wt, 13-nt)
						}
					})
				}
			}
		}
	}
}
