package redis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a17Slot models one ring slot: the generation it holds, its header
// (hw, epoch) and the one key's cells (debt D last written at T).
type a17Slot struct {
	ok        bool
	gen       int64
	hw, epoch int64
	D, T      int64
}

// a17Ring is an exact model of a rotated server sketch for one key
// (Linear 1 unit/ms, Min, integer deltas), as docs/distributed.md
// ("The server's clock", "Rotation", "Long idle") describes it.
type a17Ring struct {
	P, G, rebaseAt int64
	slots          []a17Slot
}

func (r *a17Ring) tm(c int64) int64 {
	tm := c
	for _, s := range r.slots {
		if s.ok && s.hw > tm {
			tm = s.hw
		}
	}
	return tm
}

func a17Debt(s *a17Slot, tm int64) int64 {
	if s.D == 0 || tm <= s.T {
		return s.D
	}
	return max(s.D-(tm-s.T), 0)
}

func a17FloorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// op applies a query (w < 0) or an update of w at clock c and returns
// the estimate the call answers.
func (r *a17Ring) op(c, w int64) int64 {
	tm := r.tm(c)
	cur := a17FloorDiv(tm, r.P)
	var live []*a17Slot
	for i := cur - r.G + 1; i <= cur; i++ {
		s := &r.slots[((i%r.G)+r.G)%r.G]
		if !(s.ok && s.gen == i) {
			if w < 0 {
				continue
			}
			*s = a17Slot{ok: true, gen: i, hw: tm, epoch: tm}
		}
		live = append(live, s)
	}
	if len(live) == 0 {
		return 0
	}
	if w < 0 {
		return a17Debt(live[0], tm)
	}
	for _, s := range live {
		if tm-s.epoch >= r.rebaseAt {
			s.hw, s.epoch = tm, tm
		}
		s.D, s.T = a17Debt(s, tm)+w, max(s.T, tm)
	}
	return live[0].D
}

func TestAudit17RotationClockBack(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	for seed := uint64(1); seed <= 10; seed++ {
		for _, G := range []int64{2, 3} {
			for _, rebaseAt := range []int64{1 << 31, 1500} {
				t.Run(fmt.Sprintf("seed%d/G%d/rebase%d", seed, G, rebaseAt), func(t *testing.T) {
					a17RunRing(t, e, seed, G, rebaseAt)
				})
			}
		}
	}
}

func a17RunRing(t *testing.T, e *env, seed uint64, G, rebaseAt int64) {
	r := rand.New(rand.NewPCG(seed, 1717))
	clk := sketchtest.NewFakeClock()
	const start = int64(1_000_000_000_500)
	clk.Set(start)
	const P = 1000
	s := e.sketch(t, Config{Name: fmt.Sprintf("a17r:%d:%d:%d", seed, G, rebaseAt), Levels: 3, CellsPerLevel: 64,
		Decay: decay.Linear(1000), Lo: 0, Hi: 1 << 20, Aggregator: sketch.Min,
		Period: P * time.Millisecond, Generations: uint32(G), Clock: clk})
	if rebaseAt != 1<<31 {
		s.setRebaseAt(rebaseAt)
	}
	m := &a17Ring{P: P, G: G, rebaseAt: rebaseAt, slots: make([]a17Slot, G)}
	ctx := context.Background()
	c := start
	var hist []string
	for step := 0; step < 300; step++ {
		switch r.IntN(9) {
		case 0, 1:
			c += r.Int64N(400)
		case 2:
			c -= r.Int64N(400)
		case 3:
			c -= P * int64(1+r.IntN(3)) // back across generation boundaries
		case 4:
			c += P * int64(1+r.IntN(4))
		case 5:
			c = start - r.Int64N(3*P) // behind the creation
		case 6:
			c += int64(1)<<31 + r.Int64N(1<<20)
		case 7:
			c -= 3_600_000
		default:
			c += r.Int64N(40)
		}
		c = max(c, 1)
		clk.Set(c)
		var got float64
		var err error
		var want int64
		if r.IntN(3) == 0 {
			want = m.op(c, -1)
			got, err = s.Query(ctx, "k")
			hist = append(hist, fmt.Sprintf("c=%+d Query -> %v", c-start, got))
		} else {
			w := []int64{0, 1, 50, 300, 1000}[r.IntN(5)]
			want = m.op(c, w)
			got, err = s.UpdateAndQuery(ctx, "k", float64(w))
			hist = append(hist, fmt.Sprintf("c=%+d UpdateAndQuery(%d) -> %v", c-start, w, got))
		}
		if len(hist) > 10 {
			hist = hist[1:]
		}
		if err != nil {
			t.Fatalf("step %d: %v\n%s", step, err, joinLines(hist))
		}
		if got != float64(want) {
			t.Fatalf("step %d (seed %d): estimate %v, the model says %d (slots %+v)\n%s", step, seed, got, want, m.slots, joinLines(hist))
		}
	}
}
