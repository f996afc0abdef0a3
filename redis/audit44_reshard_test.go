package redis

import (
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit44ReshardRefillExact: the exactness of
// TestAudit44ExactRefillAcrossInstances through a slot move on the
// 3-master cluster: 4 instances (both clients, two with DenyCacheCells
// and PreCheck) race on 5 keys, one saturated round before the move and
// one at each step of it (slot open, nothing moved: the source answers;
// the key migrated, slot not yet reassigned: ASK to the target; the move
// complete: MOVED), the fake clock advancing 130 ms between rounds. For
// exact units (10/s, burst 25) the admissions per key equal
// floor(Burst + Rate*T) after every round; for tokens (7.123456789/s,
// burst 11.5) they lie in [floor-1, floor] and never pass the rational
// bound.
func TestAudit44ReshardRefillExact(t *testing.T) {
	t.Cleanup(audit3WaitDelayedRefresh)
	for _, lim := range []Limit{PerSecond(10, 25), PerSecond(7.123456789, 11.5)} {
		t.Run(fmt.Sprint(lim.Rate), func(t *testing.T) {
			e := newEnv(t, "rueidis", "cluster")
			c := e.cluster
			slot, src, dst := pickMove(t, c)
			name := nameForSlot(t, e.ns("a44resh"), slot)
			clk := sketchtest.NewFakeClock()
			clk.Set(1_700_000_000_000)
			ls := a44Instances(t, e, 4, LimiterConfig{Name: name, Limit: lim, Clock: clk})
			exact := ls[0].unit != 1
			keys := []string{"a", "b", "c", "d", "e"}
			total := make([]int64, len(keys))
			round := 0
			check := func(step int) {
				T := int64(round * 130)
				got := a44Race(t, ls, keys, 1, 3)
				bound := new(big.Rat).SetFloat64(lim.Rate)
				bound.Mul(bound, big.NewRat(T, 1000))
				bound.Add(bound, new(big.Rat).SetFloat64(lim.Burst))
				fl := new(big.Int).Quo(bound.Num(), bound.Denom()).Int64()
				for ki := range keys {
					total[ki] += got[ki]
					n := total[ki]
					if (exact && n != fl) || n > fl || n < fl-1 {
						t.Errorf("move step %d (T=%d ms) key %s: %d admitted in all; want %d (exact units: %v)", step, T, keys[ki], n, fl, exact)
					}
				}
				round++
				clk.Advance(130 * time.Millisecond)
			}
			check(-2)
			steps := 0
			moveBySetslot(t, c, slot, src, dst, func(step int, key string) {
				steps++
				check(step)
			})
			if steps < 3 {
				t.Fatalf("the move had %d steps; want open, moved, done", steps)
			}
			checkMoved(t, slot, []string{"{" + name + "}:g"}, src, dst)
			check(-3)
		})
	}
}
