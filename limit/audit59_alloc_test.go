package limit_test

import (
	"fmt"
	"testing"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

func a59MultiAllocs(t *testing.T, nw int, e limit.Engine) (allow, deny float64) {
	c := limittest.NewFakeClock()
	c.Set(1_000_000)
	var ws []*limit.Limiter
	for range nw {
		ws = append(ws, limit.MustNew(1000, 2000, limit.WithClock(c), limit.WithEngine(e)))
	}
	m, err := limit.NewMulti(ws...)
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{"a", "b", "c", "d"}
	i := 0
	allow = testing.AllocsPerRun(200, func() { m.Allow(keys[i%4]); i++ })
	ws[nw-1].AllowN(c.Now(), "full", 2000)
	deny = testing.AllocsPerRun(200, func() { m.DecideKeys(c.Now(), 1, "full") })
	return allow, deny
}

// Multi's doc: "A decision does not allocate when every count-min window
// keeps at most two generations (the default)". Three and four windows
// of default count-mins or of Buckets: admissions and a denial by the
// last window allocate nothing.
func TestAudit59MultiFewWindowsNoAllocs(t *testing.T) {
	for _, nw := range []int{1, 2, 3, 4} {
		for _, e := range []limit.Engine{limit.Buckets, limit.CountMin} {
			t.Run(fmt.Sprintf("%d x %v", nw, e), func(t *testing.T) {
				if a, d := a59MultiAllocs(t, nw, e); a != 0 || d != 0 {
					t.Errorf("%d windows: Allow %v, denial %v allocs/op; Multi's doc: none", nw, a, d)
				}
			})
		}
	}
}
