package limit_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// TestAudit90ExactMultiRejectCostTwins: a Multi of exact windows with
// RejectCosts (whole and on-grid fractions, both engines) decides as its
// windows would one after the other: admitted iff every window admits,
// and on a denial only the first window in order that denies is charged
// its RejectCost ("Each window's RejectCost is charged only by the window
// that denies", multi.go), the others keeping their state. Checked
// against twin limiters driven by PeekN and DecideN, field by field on
// every window after each call, with SetLimit and SetBurst on a window
// in between (Exact re-read: the windows stay exact).
func TestAudit90ExactMultiRejectCostTwins(t *testing.T) {
	type win struct {
		lim   limit.Limit
		burst int
		opts  []limit.Option
		alts  []limit.Limit
	}
	sets := [][]win{
		{{10, 20, []limit.Option{limit.WithRejectCost(0.5)}, []limit.Limit{5, 20}},
			{limit.Every(3 * time.Second), 4, []limit.Option{limit.WithRejectCost(1), limit.WithEngine(limit.CountMin), limit.WithMaxDebt(9)}, []limit.Limit{limit.Every(6 * time.Second)}}},
		{{1000, 50, []limit.Option{limit.WithRejectCost(2), limit.WithEngine(limit.Buckets)}, []limit.Limit{500}},
			{2000.0 / 3, 30, []limit.Option{limit.WithRejectCost(0.25), limit.WithEngine(limit.CountMin)}, []limit.Limit{1000.0 / 3}},
			{1, 3, []limit.Option{limit.WithRejectCost(3.5)}, []limit.Limit{0.5}}},
	}
	for si, ws := range sets {
		t.Run(fmt.Sprint(si), func(t *testing.T) {
			clk := limittest.NewFakeClock()
			clk.Set(4_000_000)
			var ls, twins []*limit.Limiter
			for i, w := range ws {
				for _, dst := range []*[]*limit.Limiter{&ls, &twins} {
					l, err := limit.New(w.lim, w.burst, append([]limit.Option{limit.WithClock(clk), limit.WithSeed(uint64(i))}, w.opts...)...)
					if err != nil {
						t.Fatal(err)
					}
					if !l.Exact() {
						t.Fatalf("window %d (%v) not Exact", i, w.lim)
					}
					*dst = append(*dst, l)
				}
			}
			m, err := limit.NewMulti(ls...)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(90, uint64(si)))
			for step := range 600 {
				switch x := rng.IntN(10); {
				case x < 5:
				case x < 9:
					clk.Advance(time.Duration(rng.IntN(400)) * time.Millisecond)
				default:
					clk.Advance(time.Duration(rng.IntN(20_000)) * time.Millisecond)
				}
				if rng.IntN(40) == 0 {
					i := rng.IntN(len(ws))
					to := ws[i].alts[rng.IntN(len(ws[i].alts))]
					if rng.IntN(2) == 0 {
						to = ws[i].lim
					}
					e1, e2 := ls[i].SetLimit(to), twins[i].SetLimit(to)
					if (e1 == nil) != (e2 == nil) || !ls[i].Exact() || ls[i].Exact() != twins[i].Exact() {
						t.Fatalf("SetLimit(%v) on window %d: %v / %v, Exact %v", to, i, e1, e2, ls[i].Exact())
					}
				}
				now := clk.Now()
				n := 1 + rng.IntN(4)
				got := m.DecideKeys(now, n, "k")
				denied := -1
				for i, tw := range twins {
					if !tw.PeekN(now, "k", n).Allowed {
						denied = i
						break
					}
				}
				for i, tw := range twins {
					if denied < 0 || i == denied {
						tw.DecideN(now, "k", n)
					}
				}
				if got.Allowed != (denied < 0) {
					t.Fatalf("step %d: Multi Allowed %v, the twins deny at window %d", step, got.Allowed, denied)
				}
				for i := range ls {
					a, b := ls[i].PeekN(now, "k", 1), twins[i].PeekN(now, "k", 1)
					if a != b {
						t.Fatalf("step %d, window %d after a Multi decision (denied by %d):\n got %+v\nwant %+v (twin)", step, i, denied, a, b)
					}
				}
			}
		})
	}
}
