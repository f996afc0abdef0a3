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

// a75try is the exact model of a TryUpdate on a17Ring: a write call opens
// (creates or resets) the live generations whatever it decides; a denied
// one writes nothing else; an admitted one rebases the due generations
// and adds w to every live one (sketch.lua's run).
func a75try(r *a17Ring, c, w, limit int64) (bool, int64) {
	tm := r.tm(c)
	cur := a17FloorDiv(tm, r.P)
	var live []*a17Slot
	for i := cur - r.G + 1; i <= cur; i++ {
		s := &r.slots[((i%r.G)+r.G)%r.G]
		if !(s.ok && s.gen == i) {
			*s = a17Slot{ok: true, gen: i, hw: tm, epoch: tm}
		}
		live = append(live, s)
	}
	est := a17Debt(live[0], tm)
	if est+w > limit {
		return false, est
	}
	for _, s := range live {
		if tm-s.epoch >= r.rebaseAt {
			s.hw, s.epoch = tm, tm
		}
		s.D, s.T = a17Debt(s, tm)+w, max(s.T, tm)
	}
	return true, live[0].D
}

// TestAudit75RotationTryUpdateOracle: rotating sketches (G 2..4, Linear
// 1 unit/ms, Min) across rotations and rebases every rebaseAt ms (lowered
// to 300..1500), with TryUpdate, UpdateAndQuery and Query, a fake clock
// that mostly moves forward (and sometimes back): every admission and
// every estimate equals the exact model's, the reordered commit (all
// rebases first, cells from level L down) included. A second key on the
// same strings (its own cells) keeps the scratch tables busy.
func TestAudit75RotationTryUpdateOracle(t *testing.T) {
	t.Parallel() // its own server (or none), a fake clock: only the longest oracles run side by side
	e := newEnv(t, "rueidis", "standalone")
	for _, G := range []int64{2, 3, 4} {
		for _, rebaseAt := range []int64{300, 1500} {
			for seed := uint64(1); seed <= 3; seed++ {
				t.Run(fmt.Sprintf("G%d/rebase%d/seed%d", G, rebaseAt, seed), func(t *testing.T) {
					a75RunTry(t, e, seed, G, rebaseAt)
				})
			}
		}
	}
}

func a75RunTry(t *testing.T, e *env, seed uint64, G, rebaseAt int64) {
	r := rand.New(rand.NewPCG(seed, 7575))
	clk := sketchtest.NewFakeClock()
	const start = int64(1_700_000_000_123)
	clk.Set(start)
	const P = 500
	s := e.sketch(t, Config{Name: fmt.Sprintf("a75t:%d:%d:%d", seed, G, rebaseAt), Levels: 4, CellsPerLevel: 4096,
		Decay: decay.Linear(1000), Lo: 0, Hi: 1 << 20, Aggregator: sketch.Min,
		Period: P * time.Millisecond, Generations: uint32(G), Clock: clk})
	s.setRebaseAt(rebaseAt)
	// Two keys whose cells are disjoint at every level.
	keys := []string{"k"}
	for i := 0; len(keys) < 2; i++ {
		cand := fmt.Sprintf("j%d", i)
		ok := true
		hk, hc := s.hasher.Sum64String("k"), s.hasher.Sum64String(cand)
		args1 := scriptArgs(s.cfg, "Q", hk, 0, 0, 1)
		args2 := scriptArgs(s.cfg, "Q", hc, 0, 0, 1)
		for l := 0; l < 4; l++ {
			if args1[4+2*l] == args2[4+2*l] {
				ok = false
			}
		}
		if ok {
			keys = append(keys, cand)
		}
	}
	models := map[string]*a17Ring{}
	for _, k := range keys {
		models[k] = &a17Ring{P: P, G: G, rebaseAt: rebaseAt, slots: make([]a17Slot, G)}
	}
	ctx := context.Background()
	c := start
	var hist []string
	for step := 0; step < 250; step++ {
		switch r.IntN(8) {
		case 0, 1, 2:
			c += r.Int64N(120)
		case 3:
			c += P * int64(1+r.IntN(2))
		case 4:
			c -= r.Int64N(200)
		case 5:
			c += rebaseAt/2 + r.Int64N(rebaseAt)
		default:
			c += r.Int64N(15)
		}
		clk.Set(c)
		k := keys[r.IntN(len(keys))]
		// Every write goes to both models: the other key's generations
		// are opened (created, reset, rebased) by it too.
		var got, want float64
		var gotOK, wantOK bool
		var err error
		switch r.IntN(4) {
		case 0:
			want = float64(models[k].op(c, -1))
			got, err = s.Query(ctx, k)
			gotOK, wantOK = true, true
			hist = append(hist, fmt.Sprintf("c=%+d Query(%s) -> %v", c-start, k, got))
		case 1:
			w := int64(r.IntN(200))
			want = float64(models[k].op(c, w))
			a75OpenOther(models, k, c, true, 0)
			got, err = s.UpdateAndQuery(ctx, k, float64(w))
			gotOK, wantOK = true, true
			hist = append(hist, fmt.Sprintf("c=%+d UpdateAndQuery(%s, %d) -> %v", c-start, k, w, got))
		default:
			w := int64(1 + r.IntN(300))
			lim := int64(400 + r.IntN(400))
			var d int64
			wantOK, d = a75try(models[k], c, w, lim)
			want = float64(d)
			a75OpenOther(models, k, c, wantOK, 0)
			gotOK, err = s.TryUpdate(ctx, k, float64(w), float64(lim))
			if err == nil {
				got, err = s.Query(ctx, k)
				want = float64(models[k].op(c, -1))
			}
			hist = append(hist, fmt.Sprintf("c=%+d TryUpdate(%s, %d, %d) -> %v; Query %v", c-start, k, w, lim, gotOK, got))
		}
		if len(hist) > 12 {
			hist = hist[1:]
		}
		if err != nil {
			t.Fatalf("step %d: %v\n%s", step, err, joinLines(hist))
		}
		if gotOK != wantOK || got != want {
			t.Fatalf("step %d: admitted %v estimate %v; the exact model: %v, %v\n%s", step, gotOK, got, wantOK, want, joinLines(hist))
		}
	}
}

// a75OpenOther applies, to every model but k's, what a write call of k
// does to the shared strings: it opens the live generations and, when it
// commits, rebases the due ones (adding 0 to their cells changes no
// debt: the stamp moves to max(T, tm) only where the debt is kept).
func a75OpenOther(models map[string]*a17Ring, k string, c int64, commit bool, _ int64) {
	for o, m := range models {
		if o == k {
			continue
		}
		tm := m.tm(c)
		cur := a17FloorDiv(tm, m.P)
		for i := cur - m.G + 1; i <= cur; i++ {
			s := &m.slots[((i%m.G)+m.G)%m.G]
			if !(s.ok && s.gen == i) {
				*s = a17Slot{ok: true, gen: i, hw: tm, epoch: tm}
				continue
			}
			if commit && tm-s.epoch >= m.rebaseAt {
				// The rebase decays the other key's cells to tm.
				s.D, s.T = a17Debt(s, tm), max(s.T, tm)
				s.hw, s.epoch = tm, tm
			}
		}
	}
}

// TestAudit75InterleavedScratch: two rotating sketches of different
// shapes (G 4 x L 4 and G 2 x L 2, both rebased every 250 ms) called in
// turn on one server, so the library's scratch tables (V, ST, RAW,
// AFTER, LIVE, SLOTS, REBASED, pos) hold the other sketch's longer
// entries at every call: every admission and estimate is the exact
// model's.
func TestAudit75InterleavedScratch(t *testing.T) {
	e := newEnv(t, "go-redis", "standalone")
	clk := sketchtest.NewFakeClock()
	const start = int64(1_700_000_000_777)
	clk.Set(start)
	const P = 400
	type one struct {
		s *Sketch
		m *a17Ring
	}
	var sk []one
	for i, g := range []int64{4, 2} {
		L := uint32(2 * (2 - i))
		s := e.sketch(t, Config{Name: fmt.Sprintf("a75i%d", i), Levels: L, CellsPerLevel: 512,
			Decay: decay.Linear(1000), Lo: 0, Hi: 1 << 20, Aggregator: sketch.Min,
			Period: P * time.Millisecond, Generations: uint32(g), Clock: clk})
		s.setRebaseAt(250)
		sk = append(sk, one{s, &a17Ring{P: P, G: g, rebaseAt: 250, slots: make([]a17Slot, g)}})
	}
	r := rand.New(rand.NewPCG(75, 75))
	ctx := context.Background()
	c := start
	for step := 0; step < 600; step++ {
		c += int64(r.IntN(90))
		if r.IntN(10) == 0 {
			c -= int64(r.IntN(150))
		}
		clk.Set(c)
		o := sk[r.IntN(2)]
		w := int64(1 + r.IntN(200))
		lim := int64(300 + r.IntN(300))
		wantOK, _ := a75try(o.m, c, w, lim)
		ok, err := o.s.TryUpdate(ctx, "k", float64(w), float64(lim))
		if err != nil {
			t.Fatal(err)
		}
		want := o.m.op(c, -1)
		got, err := o.s.Query(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if ok != wantOK || got != float64(want) {
			t.Fatalf("step %d (%s, +%d ms): TryUpdate(%d, %d) = %v, Query %v; the model: %v, %d", step, o.s.Config().Name, c-start, w, lim, ok, got, wantOK, want)
		}
	}
}
