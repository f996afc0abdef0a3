package limit_test

import (
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// Multi's doc: a decision does not allocate when every count-min window
// keeps at most two generations (the default): admissions (each takes a
// reservation from every window), a request above a window's burst and
// one a full later window denies, on both engines and on a mix.
func TestMultiDecisionsDoNotAllocate(t *testing.T) {
	mixes := map[string][2]limit.Engine{
		"buckets":   {limit.Buckets, limit.Buckets},
		"count-min": {limit.CountMin, limit.CountMin},
		"mixed":     {limit.CountMin, limit.Buckets},
	}
	for name, es := range mixes {
		t.Run(name, func(t *testing.T) {
			c := limittest.NewFakeClock()
			c.Set(1_000_000)
			a := limit.MustNew(1000, 2000, limit.WithClock(c), limit.WithEngine(es[0]))
			b := limit.MustNew(limit.Every(time.Millisecond), 5000, limit.WithClock(c), limit.WithEngine(es[1]))
			m, err := limit.NewMulti(a, b)
			if err != nil {
				t.Fatal(err)
			}
			keys := []string{"a", "b", "c", "d"}
			i := 0
			cases := []struct {
				name string
				f    func()
			}{
				{"Allow", func() { m.Allow(keys[i%4]); i++ }},
				{"DecideKeys two keys", func() { m.DecideKeys(c.Now(), 1, keys[i%4], keys[(i+1)%4]); i++ }},
				{"above a burst", func() { m.DecideKeys(c.Now(), 3000, "x") }},
				{"denied by a full window", func() { m.DecideKeys(c.Now(), 1, "y", "full") }},
			}
			b.AllowN(c.Now(), "full", 5000)
			for _, tc := range cases {
				if got := testing.AllocsPerRun(200, tc.f); got != 0 {
					t.Errorf("%s: %v allocs/op; Multi's doc: none", tc.name, got)
				}
			}
		})
	}
}
