package sketch_test

import (
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a4ConflictKeys returns keys A = (x, y), B = (x, v) and D = (u, y) of a
// two-level layout (detail gives a key's cells): B shares only A's
// level-0 cell, D only its level-1 cell.
func a4ConflictKeys(t *testing.T, detail func([]byte) sketch.Detail) (a, b, d []byte) {
	t.Helper()
	type cells struct{ x, y uint32 }
	var keys [][]byte
	var cs []cells
	for i := range 200 {
		k := fmt.Appendf(nil, "a4c-%d", i)
		lv := detail(k).Levels
		keys, cs = append(keys, k), append(cs, cells{lv[0].Index, lv[1].Index})
	}
	for i := range keys {
		for j := range keys {
			if cs[j].x != cs[i].x || cs[j].y == cs[i].y {
				continue
			}
			for l := range keys {
				if cs[l].x != cs[i].x && cs[l].y == cs[i].y {
					return keys[i], keys[j], keys[l]
				}
			}
		}
	}
	t.Fatal("no keys with the wanted collision pattern")
	return nil, nil, nil
}

// a4GatedMin is an AggregateFunc (Min) that, once armed, blocks its
// first call until released (a TryUpdate between its snapshot and its
// stripe: an Update then changes a cell and the commit's CAS on it
// fails) and panics on its second (the TryUpdate's decision again after
// the conflict, inside the commit, holding the stripe).
type a4GatedMin struct {
	armed            atomic.Bool
	calls            atomic.Int32
	reached, release chan struct{}
}

func newA4GatedMin(t *testing.T) *a4GatedMin {
	g := &a4GatedMin{reached: make(chan struct{}), release: make(chan struct{})}
	t.Cleanup(func() {
		select {
		case <-g.release:
		default:
			close(g.release)
		}
	})
	return g
}

func (g *a4GatedMin) agg(v []float64) float64 {
	if g.armed.Load() {
		switch g.calls.Add(1) {
		case 1:
			close(g.reached)
			<-g.release
		case 2:
			panic("a4: aggregator fault inside the commit")
		}
	}
	m := v[0]
	for _, x := range v[1:] {
		m = math.Min(m, x)
	}
	return m
}

// a4Within runs f in a goroutine and fails t if it does not return in 5 s
// (a TryUpdate wedged on a stripe left held spins forever).
func a4Within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s did not return: a stripe was left held", what)
	}
}

// a4Recover runs f and returns what it panicked with (nil if none).
func a4Recover(f func()) (p any) {
	defer func() { p = recover() }()
	f()
	return nil
}

// TestAudit4PanicInsideCommitSketch: "A custom decay law that panics
// inside the commit still releases the stripe (deferred release)"
// (docs/design.md), and the AggregateFunc is user code the commit calls
// on its decision after a conflict. The engine's own path (no test
// hooks): TryUpdate(A, 1, 5) decides on min(10.5, 0.5), an Update of D
// changes y before A's commit, A's CAS on x succeeds, its CAS on y fails,
// x is rolled back and the decision taken again, where the aggregator
// panics. Afterwards the stripe must be free (a TryUpdate of A returns,
// and is admitted at its exact limit) and the cells must hold exactly
// what the other writes left: x = 10.5, y = 2.5, no trace of the
// panicked call.
func TestAudit4PanicInsideCommitSketch(t *testing.T) {
	g := newA4GatedMin(t)
	clk := sketchtest.NewFakeClock()
	clk.Set(10_000)
	s := mustNewSketch(t, sketch.Config{Levels: 2, CellsPerLevel: 4, Hi: 1e9, AggregateFunc: g.agg, Clock: clk})
	a, b, d := a4ConflictKeys(t, s.QueryDetailed)
	s.Update(b, 10)  // x = 10
	s.Update(a, 0.5) // x = 10.5, y = 0.5
	g.armed.Store(true)
	res := make(chan any, 1)
	go func() { res <- a4Recover(func() { s.TryUpdate(a, 1, 5) }) }()
	<-g.reached
	s.Update(d, 2) // y = 2.5
	close(g.release)
	if p := <-res; p == nil {
		t.Fatal("the aggregator was not called again after the conflict (the test no longer reaches the commit's re-decision)")
	}
	g.armed.Store(false)
	if seq := core.StripeSeq(core.SketchOf(s), a); seq&1 != 0 {
		t.Errorf("A's stripe seq is %d (odd: held) after the panic", seq)
	}
	lv := s.QueryDetailed(a).Levels
	if lv[0].Score != 10.5 || lv[1].Score != 2.5 {
		t.Errorf("cells (x, y) = (%v, %v) after the panicked call; want (10.5, 2.5)", lv[0].Score, lv[1].Score)
	}
	var ok bool
	a4Within(t, "TryUpdate(A) after the panic", func() { ok = s.TryUpdate(a, 1, 3.5) })
	if !ok || s.Query(a) != 3.5 {
		t.Errorf("TryUpdate(A, 1, 3.5) = %v, Query(A) = %v; want true, 3.5", ok, s.Query(a))
	}
}

// TestAudit4PanicInsideCommitRotator: the same fault in a rotator's
// primary, whose admission holds its stripe until the younger
// generations are written. The stripe must be free after the panic:
// TryUpdate of A returns, and so does the next promotion, which waits
// for the primary's held stripes before it publishes.
func TestAudit4PanicInsideCommitRotator(t *testing.T) {
	g := newA4GatedMin(t)
	clk := sketchtest.NewFakeClock()
	clk.Set(10_000)
	r, err := rotator.New(rotator.Config{Sketch: sketch.Config{Levels: 2, CellsPerLevel: 4, Hi: 1e9, AggregateFunc: g.agg, Clock: clk}, Generations: 2, Period: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	a, b, d := a4ConflictKeys(t, r.QueryDetailed)
	r.Update(b, 10)
	r.Update(a, 0.5)
	g.armed.Store(true)
	res := make(chan any, 1)
	go func() { res <- a4Recover(func() { r.TryUpdate(a, 1, 5) }) }()
	<-g.reached
	r.Update(d, 2)
	close(g.release)
	if p := <-res; p == nil {
		t.Fatal("the aggregator was not called again after the conflict")
	}
	g.armed.Store(false)
	primary := core.RotatorOf(r).Current().Gens[0]
	if seq := core.StripeSeq(primary, a); seq&1 != 0 {
		t.Errorf("A's stripe of the primary: seq %d (odd: held) after the panic", seq)
	}
	if lv := r.QueryDetailed(a).Levels; lv[0].Score != 10.5 || lv[1].Score != 2.5 {
		t.Errorf("primary cells (x, y) = (%v, %v); want (10.5, 2.5)", lv[0].Score, lv[1].Score)
	}
	var ok bool
	a4Within(t, "rotator TryUpdate(A) after the panic", func() { ok = r.TryUpdate(a, 1, 3.5) })
	if !ok {
		t.Error("TryUpdate(A, 1, 3.5) denied")
	}
	clk.Advance(time.Second)
	a4Within(t, "the promotion after the panic", func() { r.Query(a) })
	if st := r.Stats(); st.Promotions != 1 {
		t.Errorf("Promotions = %d, want 1", st.Promotions)
	}
}

// a4HeldLaw is Linear(1) that panics, once armed, when it is evaluated
// while the stripe watched (the key's, in the sketch held) is odd: user
// code running while a TryUpdate or a conservative write holds the
// stripe.
type a4HeldLaw struct {
	armed   *atomic.Bool
	watch   *atomic.Pointer[core.Sketch]
	key     []byte
	panicks *atomic.Int32
}

func (l a4HeldLaw) Apply(s float64, dt int64) float64 {
	if l.armed.Load() {
		if e := l.watch.Load(); e != nil && core.StripeSeq(e, l.key)&1 != 0 {
			l.panicks.Add(1)
			panic("a4: decay law fault while the stripe is held")
		}
	}
	return decay.Linear(1).Apply(s, dt)
}

func newA4HeldLaw(key string) a4HeldLaw {
	return a4HeldLaw{armed: new(atomic.Bool), watch: new(atomic.Pointer[core.Sketch]), key: []byte(key), panicks: new(atomic.Int32)}
}

// TestAudit4PanicLawRotatorYounger: a rotator's admitted TryUpdate holds
// the primary's stripe while it writes the younger generations, which
// evaluate the decay law on their aged cells. A law that panics there
// must not leave the primary's stripe held: the next TryUpdate of the
// key returns, and so does the promotion that closes the primary's
// stripes.
func TestAudit4PanicLawRotatorYounger(t *testing.T) {
	law := newA4HeldLaw("k")
	clk := sketchtest.NewFakeClock()
	clk.Set(10_000)
	r, err := rotator.New(rotator.Config{Sketch: sketch.Config{Levels: 3, CellsPerLevel: 16, Hi: 1e9, Decay: law, Clock: clk}, Generations: 2, Period: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r.UpdateString("k", 5)
	clk.Advance(time.Second) // every cell of k has aged: the law runs on it
	law.watch.Store(core.RotatorOf(r).Current().Gens[0])
	law.armed.Store(true)
	if p := a4Recover(func() { r.TryUpdateString("k", 1, 100) }); p == nil || law.panicks.Load() == 0 {
		t.Fatalf("no panic with the primary's stripe held (recovered %v): the law is no longer evaluated there", p)
	}
	law.armed.Store(false)
	var ok bool
	a4Within(t, "TryUpdate after the panic", func() { ok = r.TryUpdateString("k", 1, 100) })
	if !ok {
		t.Error("TryUpdate after the panic denied")
	}
	clk.Advance(time.Second) // the deadline: the younger generation becomes primary
	a4Within(t, "the promotion after the panic", func() { r.QueryString("k") })
	if st := r.Stats(); st.Promotions != 1 {
		t.Errorf("Promotions = %d, want 1", st.Promotions)
	}
	if q := r.QueryString("k"); math.IsNaN(q) || q < 1 || q > 7 {
		t.Errorf("Query after the promotion = %v; want within [1, 7]", q)
	}
}

// TestAudit4PanicLawConservative: a conservative sketch's writes hold the
// key's stripe while they read and raise its cells, evaluating the decay
// law (docs/design.md: "every conservative write takes the key's
// TryUpdate stripe"; internal/core/conservative.go: "releases the stripe
// (even if a custom decay law panics)"). A law that panics there, in a
// TryUpdate and in an Update, must leave the stripe free and the cells as
// they were.
func TestAudit4PanicLawConservative(t *testing.T) {
	for _, op := range []string{"TryUpdate", "Update"} {
		t.Run(op, func(t *testing.T) {
			law := newA4HeldLaw("k")
			clk := sketchtest.NewFakeClock()
			clk.Set(10_000)
			e, err := core.New(core.Config{Levels: 3, CellsPerLevel: 16, Hi: 1e9, Decay: law, Clock: clk, Conservative: true})
			if err != nil {
				t.Fatal(err)
			}
			e.UpdateString("k", 5)
			clk.Advance(time.Second) // 5 -> 4
			law.watch.Store(e)
			law.armed.Store(true)
			p := a4Recover(func() {
				if op == "TryUpdate" {
					e.TryUpdateString("k", 1, 100)
				} else {
					e.UpdateString("k", 1)
				}
			})
			if p == nil || law.panicks.Load() == 0 {
				t.Fatalf("no panic with the stripe held (recovered %v): the law is no longer evaluated there", p)
			}
			law.armed.Store(false)
			if seq := core.StripeSeq(e, []byte("k")); seq&1 != 0 {
				t.Errorf("stripe seq %d (odd: held) after the panic", seq)
			}
			if q := e.QueryString("k"); q != 4 {
				t.Errorf("Query = %v after the panicked write; want 4 (5 decayed 1 s at rate 1)", q)
			}
			var ok bool
			a4Within(t, "TryUpdate after the panic", func() { ok = e.TryUpdateString("k", 1, 5) })
			if !ok || e.QueryString("k") != 5 {
				t.Errorf("TryUpdate(k, 1, 5) = %v, Query = %v; want true, 5", ok, e.QueryString("k"))
			}
		})
	}
}
