package limit_test

import (
	"fmt"
	"testing"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit87LmMultiNoAllocNewOrder: Multi's doc: "A decision of a Multi
// of at most four windows does not allocate when every count-min window
// keeps at most two generations (the default)". With the new take order
// (the windows whose take may not come back take last), on every path:
// an admission (every window takes, in the new order), a denial by a
// later window on the precheck, a denial by an unrefundable first
// window (it now takes last: the others take and are refunded), and n
// above a burst; one key and per-window keys; one to four windows, with
// an Inf window among them.
func TestAudit87LmMultiNoAllocNewOrder(t *testing.T) {
	kinds := map[string][]limit.Option{
		"Ccu": {limit.WithEngine(limit.CountMin), limit.WithSize(4, 1024), limit.WithConservativeUpdate(true)},
		"Cmd": {limit.WithEngine(limit.CountMin), limit.WithSize(4, 1024), limit.WithMaxDebt(1000)},
		"Bmd": {limit.WithEngine(limit.Buckets), limit.WithCapacity(64, 0.01), limit.WithMaxDebt(1000)},
		"C":   {limit.WithEngine(limit.CountMin), limit.WithSize(4, 1024)},
		"B":   {limit.WithEngine(limit.Buckets), limit.WithCapacity(64, 0.01)},
		"Inf": nil,
	}
	mixes := [][]string{
		{"Ccu"},
		{"Ccu", "B"},
		{"Bmd", "C", "Ccu"},
		{"Ccu", "Cmd", "B", "C"},
		{"Cmd", "Inf", "Bmd", "C"},
		{"Bmd", "Ccu", "Cmd", "Inf"},
	}
	for _, mix := range mixes {
		t.Run(fmt.Sprint(mix), func(t *testing.T) {
			fc := sketchtest.NewFakeClock()
			fc.Set(1 << 30)
			var ws []*limit.Limiter
			for i, k := range mix {
				if k == "Inf" {
					ws = append(ws, limit.MustNew(limit.Inf, 1000, limit.WithName("inf")))
					continue
				}
				opts := append([]limit.Option{limit.WithSeed(uint64(i + 1)), limit.WithClock(fc), limit.WithName(fmt.Sprint("w", i))}, kinds[k]...)
				ws = append(ws, limit.MustNew(1000, 1000, opts...))
			}
			m, err := limit.NewMulti(ws...)
			if err != nil {
				t.Fatal(err)
			}
			keys := []string{"a", "b", "c", "d", "e"}
			per := make([]string, len(ws))
			now := fc.Now()
			// "full" owes each window its burst; "first" only the first.
			for i, w := range ws {
				w.AllowN(now, "full", 1000)
				if i == 0 {
					w.AllowN(now, "first", 1000)
				}
			}
			i := 0
			// The clock does not move: a count-min promotion (once per
			// Period) allocates its new generation, by design.
			var last limit.Decision
			cases := []struct {
				name  string
				f     func()
				admit bool
			}{
				{"denied by a full later window (precheck)", func() {
					for j := range per {
						per[j] = keys[(i+j)%5]
					}
					per[len(per)-1] = "full"
					last = m.DecideKeys(fc.Now(), 1, per...)
					i++
				}, mix[len(mix)-1] == "Inf"},
				{"denied by a full first window", func() { last = m.DecideKeys(fc.Now(), 1, "first") }, mix[0] == "Inf"},
				{"above a burst", func() { last = m.DecideKeys(fc.Now(), 1001, "x") }, false},
				{"admit one key", func() {
					last = m.DecideKeys(fc.Now(), 1, keys[i%5])
					i++
				}, true},
				{"admit per-window keys", func() {
					for j := range per {
						per[j] = keys[(i+j)%5]
					}
					last = m.DecideKeys(fc.Now(), 2, per...)
					i++
				}, true},
			}
			for _, tc := range cases {
				if got := testing.AllocsPerRun(100, tc.f); got != 0 {
					t.Errorf("%s: %v allocs/op; Multi's doc: none for up to four windows", tc.name, got)
				}
				if last.Allowed != tc.admit {
					t.Errorf("%s: setup: the last decision %+v; want Allowed %v", tc.name, last, tc.admit)
				}
			}
		})
	}
}
