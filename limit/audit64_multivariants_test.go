package limit_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

func TestAudit64Stop46MultiNoAllocVariants(t *testing.T) {
	variants := map[string][]limit.Option{
		"conservative": {limit.WithConservativeUpdate(true)},
		"optimistic":   {limit.WithEngine(limit.CountMin), limit.WithStrict(false)},
		"noprefetch":   {limit.WithEngine(limit.CountMin), limit.WithPrefetch(false)},
		"gen2explicit": {limit.WithGenerations(2)},
		"slow":         {},
	}
	for name, extra := range variants {
		clk := sketchtest.NewFakeClock()
		var ws []*limit.Limiter
		for i := 0; i < 4; i++ {
			opts := append([]limit.Option{limit.WithClock(clk), limit.WithName(fmt.Sprint("w", i)), limit.WithSize(4, 2048)}, extra...)
			r := limit.Limit(10 * (i + 1))
			if name == "slow" {
				r = limit.Limit(1e-3 * float64(i+1))
			}
			ws = append(ws, limit.MustNew(r, 3*(i+1), opts...))
		}
		m, err := limit.NewMulti(ws...)
		if err != nil {
			t.Fatal(err)
		}
		keys := []string{"a", "b", "c", "d", "e"}
		i := 0
		a := testing.AllocsPerRun(300, func() { m.Allow(keys[i%5]); i++ })
		b := testing.AllocsPerRun(300, func() { m.DecideKeys(clk.Now(), 2, keys[i%5], keys[(i+1)%5], keys[(i+2)%5], keys[(i+3)%5]); i++ })
		clk.Advance(time.Second)
		tier, err := ws[0].Tier("t", ws[0].Limit()/2, 1)
		if err != nil {
			t.Fatal(err)
		}
		c := testing.AllocsPerRun(300, func() { tier.ReserveN(clk.Now(), keys[i%5], 1); i++ })
		t.Logf("%s: engine %v Multi.Allow %v, DecideKeys %v, Tier.ReserveN %v", name, ws[0].Engine(), a, b, c)
		if a != 0 || b != 0 || c != 1 {
			t.Errorf("%s: Multi.Allow %v, DecideKeys %v allocs (want 0), Tier.ReserveN %v (want 1: its *Reservation); migrating.md Stop 46", name, a, b, c)
		}
	}
}
