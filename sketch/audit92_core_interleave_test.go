package sketch_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a92coreCells returns the cell index of key at each level.
func a92coreCells(s *sketch.Sketch, key []byte) []uint32 {
	d := s.QueryDetailed(key)
	out := make([]uint32, len(d.Levels))
	for i, lv := range d.Levels {
		out[i] = lv.Index
	}
	return out
}

// a92coreFind returns a key named prefix-i whose cells satisfy want and whose
// stripe differs from every stripe in used; it adds its stripe to used.
func a92coreFind(t *testing.T, s *sketch.Sketch, prefix string, used map[uint64]bool, want func(c []uint32) bool) []byte {
	t.Helper()
	for i := range 100000 {
		k := []byte(fmt.Sprintf("%s-%d", prefix, i))
		st := core.StripeOf(core.SketchOf(s), k)
		if used[st] || !want(a92coreCells(s, k)) {
			continue
		}
		used[st] = true
		return k
	}
	t.Fatalf("no key %s-* with the wanted cells", prefix)
	return nil
}

// a92coreModel is the sequential count-min model of one millisecond (no
// decay) with clamps [lo, hi]: cells per level, keyed by index.
type a92coreModel struct {
	lo, hi float64
	cells  []map[uint32]float64
}

func newA92coreModel(levels int, lo, hi float64) *a92coreModel {
	m := &a92coreModel{lo: lo, hi: hi}
	for range levels {
		m.cells = append(m.cells, map[uint32]float64{})
	}
	return m
}

func (m *a92coreModel) clone() *a92coreModel {
	c := &a92coreModel{lo: m.lo, hi: m.hi}
	for _, lv := range m.cells {
		n := map[uint32]float64{}
		for k, v := range lv {
			n[k] = v
		}
		c.cells = append(c.cells, n)
	}
	return c
}

func (m *a92coreModel) est(idx []uint32) float64 {
	e := math.Inf(1)
	for l, i := range idx {
		e = min(e, m.cells[l][i])
	}
	return e
}

func (m *a92coreModel) add(idx []uint32, d float64) {
	for l, i := range idx {
		m.cells[l][i] = min(max(m.cells[l][i]+d, m.lo), m.hi)
	}
}

// a92coreOp is one operation of a replayed history.
type a92coreOp struct {
	name  string
	idx   []uint32
	delta float64
	limit float64 // NaN: an Update
	ok    bool    // a TryUpdate's answer
}

// replay applies ops in order; it reports false if an admitted TryUpdate
// does not fit the model's estimate at its place (denials are free: a
// denial across stripes may be spurious).
func (m *a92coreModel) replay(ops []a92coreOp) bool {
	for _, op := range ops {
		if math.IsNaN(op.limit) {
			m.add(op.idx, op.delta)
			continue
		}
		if !op.ok {
			continue
		}
		if !(m.est(op.idx)+op.delta <= op.limit) {
			return false
		}
		m.add(op.idx, op.delta)
	}
	return true
}

// a92coreExplain reports whether the held operation x (which overlaps every
// other operation of seq, which ran one after another) can be placed
// somewhere in seq so that the replay admits what was admitted, and
// returns the model after that order, preferring one whose cells equal
// got (the sketch's cells after the history).
func a92coreExplain(base *a92coreModel, seq []a92coreOp, x a92coreOp, got func(*a92coreModel) bool) (*a92coreModel, bool) {
	var fallback *a92coreModel
	for p := 0; p <= len(seq); p++ {
		ops := append(append(append([]a92coreOp{}, seq[:p]...), x), seq[p:]...)
		m := base.clone()
		if !m.replay(ops) {
			continue
		}
		if got(m) {
			return m, true
		}
		if fallback == nil {
			fallback = m
		}
	}
	return fallback, fallback != nil
}

// TestAudit92CoreRollbackWriterBeforeUndo: docs/design.md "Writers
// outside the stripe, and the roll-back" and sketch/doc.go ("Roll-backs
// ... are exact or nothing"). Keys X (cells a, s), Y (cells b, s: shares
// level 1 only) and Z (cells a, t: shares level 0 only), each on its own
// stripe; L = 2, M = 8, no decay, a fixed clock. X's TryUpdate commits
// level 0 and, before its level-1 CAS, Y's Update lands on s: a commit
// conflict. Between the conflict and X's undo of level 0 (the Rollback
// hook) an action writes cell a. Whatever the action, after X returns:
// every key's estimate is at least its truth (positive deltas), the
// cells never hold X's increment twice, and where the roll-back can be
// exact (same millisecond, below Hi, no negative delta ever) every cell
// equals exactly what the admitted operations add up to.
func TestAudit92CoreRollbackWriterBeforeUndo(t *testing.T) {
	type action struct {
		name  string
		exact bool // the cells must equal the model exactly
		setup func(s *sketch.Sketch, neg []byte)
		act   func(s *sketch.Sketch, clk *sketchtest.FakeClock, z []byte)
		zadd  float64 // what act adds to Z's truth (before the clamp)
	}
	actions := []action{
		{name: "nothing", exact: true, act: func(*sketch.Sketch, *sketchtest.FakeClock, []byte) {}},
		{name: "same-ms-update", exact: true, zadd: 2, act: func(s *sketch.Sketch, _ *sketchtest.FakeClock, z []byte) { s.Update(z, 2) }},
		{name: "same-ms-tryupdate", exact: true, zadd: 3, act: func(s *sketch.Sketch, _ *sketchtest.FakeClock, z []byte) {
			if !s.TryUpdate(z, 3, 50) {
				panic("TryUpdate(z, 3, 50) denied")
			}
		}},
		{name: "same-ms-fraction", exact: true, zadd: 0.25, act: func(s *sketch.Sketch, _ *sketchtest.FakeClock, z []byte) { s.Update(z, 0.25) }},
		{name: "later-ms-update", zadd: 2, act: func(s *sketch.Sketch, clk *sketchtest.FakeClock, z []byte) {
			clk.Advance(3 * time.Millisecond)
			s.Update(z, 2)
		}},
		{name: "cut-at-hi", zadd: 500, act: func(s *sketch.Sketch, _ *sketchtest.FakeClock, z []byte) { s.Update(z, 500) }},
		{name: "negative-flag", zadd: 2, setup: func(s *sketch.Sketch, neg []byte) { s.Update(neg, -1) },
			act: func(s *sketch.Sketch, _ *sketchtest.FakeClock, z []byte) { s.Update(z, 2) }},
	}
	const hi = 100.0
	for _, ac := range actions {
		for _, xd := range []float64{1, 0.5, 7} {
			for _, limit := range []float64{1, 2, 50} {
				if xd > limit {
					continue // denied on its first snapshot: no commit to interleave
				}
				t.Run(fmt.Sprintf("%s/x%v/lim%v", ac.name, xd, limit), func(t *testing.T) {
					clk := sketchtest.NewFakeClock()
					clk.Set(1_000_000)
					s, err := sketch.New(sketch.Config{Levels: 2, CellsPerLevel: 8, Lo: -50, Hi: hi, Clock: clk})
					if err != nil {
						t.Fatal(err)
					}
					used := map[uint64]bool{}
					x := a92coreFind(t, s, "x", used, func([]uint32) bool { return true })
					cx := a92coreCells(s, x)
					y := a92coreFind(t, s, "y", used, func(c []uint32) bool { return c[0] != cx[0] && c[1] == cx[1] })
					z := a92coreFind(t, s, "z", used, func(c []uint32) bool { return c[0] == cx[0] && c[1] != cx[1] })
					cy, cz := a92coreCells(s, y), a92coreCells(s, z)
					// neg: a key on neither of the three keys' cells.
					neg := a92coreFind(t, s, "n", used, func(c []uint32) bool {
						return c[0] != cx[0] && c[0] != cy[0] && c[1] != cx[1] && c[1] != cz[1]
					})
					if ac.setup != nil {
						ac.setup(s, neg)
					}
					var conflicts, rollbacks int
					core.SetHooks(core.SketchOf(s), core.Hooks{
						BeforeCAS: func(l uint32) {
							if l == 1 && conflicts == 0 {
								conflicts++
								s.Update(y, 1) // Y's write on s: X's CAS on level 1 fails
							}
						},
						Rollback: func(l uint32) {
							if l == 0 && rollbacks == 0 {
								rollbacks++
								ac.act(s, clk, z)
							}
						},
					})
					xok := s.TryUpdate(x, xd, limit)
					core.SetHooks(core.SketchOf(s), core.Hooks{})
					if conflicts != 1 || rollbacks != 1 {
						t.Fatalf("the interleaving did not happen: %d conflicts, %d roll-backs", conflicts, rollbacks)
					}
					truth := map[string]float64{"y": 1, "z": min(ac.zadd, hi), "x": 0}
					if xok {
						truth["x"] = xd
					}
					for name, k := range map[string][]byte{"x": x, "y": y, "z": z} {
						if got := s.Query(k); got < truth[name] {
							t.Errorf("Query(%s) = %v, below its truth %v (X admitted %v, cells %+v)", name, got, truth[name], xok, s.QueryDetailed(k).Levels)
						}
					}
					// Cell a: Z's adds and X's increment once at most.
					za := min(ac.zadd, hi)
					a := s.QueryDetailed(x).Levels[0].Score
					wantA := za
					if xok {
						wantA = min(za+xd, hi)
					}
					if a < wantA {
						t.Errorf("cell a = %v, below what the admitted writes add up to (%v)", a, wantA)
					}
					if a > min(za+xd, hi) {
						t.Errorf("cell a = %v, above Z's %v plus X's increment once (%v): X's increment counted twice", a, za, min(za+xd, hi))
					}
					if ac.exact && a != wantA {
						t.Errorf("cell a = %v, want exactly %v: the same-millisecond roll-back below Hi with no negative delta is exact (design.md, Roll-backs, case 3)", a, wantA)
					}
					sv := s.QueryDetailed(x).Levels[1].Score
					wantS := 1.0
					if xok {
						wantS += xd
					}
					if sv != wantS {
						t.Errorf("cell s = %v, want exactly %v (Y's 1, X's %v if admitted)", sv, wantS, xd)
					}
					// The decision, where the roll-back is exact: X decides
					// again on a = Z's adds, s = Y's 1.
					if want := min(za, 1)+xd <= limit; ac.exact && xok != want {
						t.Errorf("X admitted %v, want %v: its fresh snapshot reads min(%v, 1) for limit %v", xok, want, za, limit)
					}
				})
			}
		}
	}
}

// TestAudit92CorePartialCollisionHeldCommit: docs/design.md "Keys on
// different stripes: one instant per decision". X (cells a, s), Y (b, s)
// and Z (a, t) on three stripes, L = 2, M = 8, no decay, one
// millisecond. X is admitted and held before its level-1 CAS (level 0
// written); meanwhile a scripted sequence of TryUpdates and Updates of Y
// and Z runs to completion. Every history must be explained by placing X
// at one point of that sequence (admitted calls fit the limit at their
// place; denials are free), and the cells must end at exactly what that
// order adds up to (same millisecond, below Hi: every roll-back exact).
func TestAudit92CorePartialCollisionHeldCommit(t *testing.T) {
	type step struct {
		key   byte // 'y' or 'z'
		delta float64
		limit float64 // NaN: Update
		phase int     // 0: X held before its CAS; 1: before its undo of level 0; 2: before its fresh snapshot; 3: before its second commit's level-1 CAS
	}
	upd := math.NaN()
	scripts := [][]step{
		{{'z', 1, 3, 0}, {'y', 1, 3, 0}},
		{{'y', 1, upd, 0}, {'z', 1, 2, 0}},
		{{'z', 2, 2, 0}, {'y', 2, 2, 0}, {'z', 1, 3, 0}},
		{{'z', 1, 1, 0}, {'z', 1, 2, 0}, {'y', 1, upd, 0}},
		{{'y', 1, 1, 0}, {'z', 1, upd, 0}, {'y', 1, 2, 0}},
		{{'z', 0.5, upd, 0}, {'y', 0.5, 1, 0}, {'z', 0.5, 1.5, 0}},
		{{'y', 3, 3, 0}, {'z', 3, 3, 0}},
		{{'y', 1, upd, 0}, {'z', 1, 3, 1}, {'y', 1, 3, 2}},
		{{'y', 1, 2, 0}, {'z', 2, upd, 1}, {'z', 1, 4, 2}, {'y', 1, 2, 3}},
		{{'y', 1, upd, 0}, {'y', 1, upd, 3}, {'z', 1, 2, 3}},
		{{'z', 1, 2, 0}, {'y', 1, 2, 0}, {'y', 1, upd, 2}, {'z', 1, 2, 3}, {'y', 1, 3, 3}},
		{{'y', 0.5, upd, 0}, {'z', 1.5, upd, 1}, {'y', 0.25, 4, 3}},
	}
	var phases [4]int // subtests in which each phase ran: each must, somewhere
	defer func() {
		for p, n := range phases {
			if n == 0 {
				t.Errorf("phase %d never ran: the hooks no longer reach it", p)
			}
		}
	}()
	for si, sc := range scripts {
		for _, xd := range []float64{1, 0.5} {
			for _, xl := range []float64{1, 2, 4} {
				for _, holdLevel := range []uint32{0, 1} {
					t.Run(fmt.Sprintf("s%d/x%v/lim%v/hold%d", si, xd, xl, holdLevel), func(t *testing.T) {
						clk := sketchtest.NewFakeClock()
						clk.Set(1_000_000)
						s, err := sketch.New(sketch.Config{Levels: 2, CellsPerLevel: 8, Lo: 0, Hi: 100, Clock: clk})
						if err != nil {
							t.Fatal(err)
						}
						used := map[uint64]bool{}
						x := a92coreFind(t, s, "x", used, func([]uint32) bool { return true })
						cx := a92coreCells(s, x)
						y := a92coreFind(t, s, "y", used, func(c []uint32) bool { return c[0] != cx[0] && c[1] == cx[1] })
						z := a92coreFind(t, s, "z", used, func(c []uint32) bool { return c[0] == cx[0] && c[1] != cx[1] })
						keys := map[byte][]byte{'y': y, 'z': z}
						var seq []a92coreOp
						ran := false
						fired := [4]bool{}
						inScript := false // the script's own calls run the hooks too: ignore them
						run := func(phase int) {
							if fired[phase] {
								return
							}
							fired[phase] = true
							inScript = true
							defer func() { inScript = false }()
							for _, st := range sc {
								if st.phase != phase {
									continue
								}
								k := keys[st.key]
								op := a92coreOp{name: string(st.key), idx: a92coreCells(s, k), delta: st.delta, limit: st.limit}
								if math.IsNaN(st.limit) {
									s.Update(k, st.delta)
								} else {
									op.ok = s.TryUpdate(k, st.delta, st.limit)
								}
								seq = append(seq, op)
							}
						}
						commits := 0
						core.SetHooks(core.SketchOf(s), core.Hooks{
							BeforeCAS: func(l uint32) {
								if inScript {
									return
								}
								if l == 0 {
									commits++
								}
								switch {
								case commits == 1 && l == holdLevel:
									ran = true
									run(0)
								case commits == 2 && l == 1:
									run(3)
								}
							},
							Rollback: func(l uint32) {
								if l == 0 && !inScript {
									run(1)
								}
							},
							Reread: func(uint32) {
								if !inScript {
									run(2)
								}
							},
						})
						xok := s.TryUpdate(x, xd, xl)
						core.SetHooks(core.SketchOf(s), core.Hooks{})
						for p, f := range fired {
							if f {
								phases[p]++
							}
						}
						if !ran {
							t.Fatal("X was not admitted to its commit: the script never ran")
						}
						xop := a92coreOp{name: "x", idx: cx, delta: xd, limit: xl, ok: xok}
						all := append(append([]a92coreOp{}, seq...), xop)
						same := func(m *a92coreModel) bool {
							for _, op := range all {
								for l, lv := range s.QueryDetailed(map[string][]byte{"x": x, "y": y, "z": z}[op.name]).Levels {
									if lv.Score != m.cells[l][op.idx[l]] {
										return false
									}
								}
							}
							return true
						}
						m, ok := a92coreExplain(newA92coreModel(2, 0, 100), seq, xop, same)
						if !ok {
							t.Fatalf("no order explains the history: script %+v, X(%v, %v) = %v", seq, xd, xl, xok)
						}
						if !same(m) {
							for _, name := range []string{"x", "y", "z"} {
								k := map[string][]byte{"x": x, "y": y, "z": z}[name]
								t.Errorf("%s: cells %+v, an explaining order leaves %v", name, s.QueryDetailed(k).Levels, []float64{m.cells[0][a92coreCells(s, k)[0]], m.cells[1][a92coreCells(s, k)[1]]})
							}
							t.Errorf("history: script %+v, X(%v, %v) = %v", seq, xd, xl, xok)
						}
					})
				}
			}
		}
	}
}

// TestAudit92CoreNegativeRollbackWriterBeforeUndo: the negative half of
// the roll-back rule (sketch/doc.go, "A negative increment, which kept
// would be an under-estimate, is always given back: exactly, or by adding
// it back as an Update would (rounded up, never below the cell's value
// without it)"; docs/design.md, "Roll-backs", case 6). X (cells a, s)
// takes a negative TryUpdate, commits level 0 and meets Y's Update on s;
// between the conflict and its undo of a, Z (cells a, t) writes a: in the
// same millisecond, later, or with X's decrement cut at Lo. After X
// returns, cell a is never below what the admitted writes add up to
// (clamped), and with no clamp in play it is exactly that.
func TestAudit92CoreNegativeRollbackWriterBeforeUndo(t *testing.T) {
	type tc struct {
		name  string
		lo    float64
		zpre  float64 // Z's mass in a before X
		xd    float64
		zadd  float64 // Z's write between the conflict and the undo
		later bool    // Z's write comes 4 ms later
		exact bool
	}
	cases := []tc{
		{"same-ms", -50, 5, -3, 2, false, true},
		{"same-ms-fraction", -50, 5, -0.75, 0.5, false, true},
		{"later", -50, 5, -3, 2, true, true},
		{"cut-at-lo", -1, 1, -3, 0.5, false, false},
		{"cut-at-lo-later", -1, 1, -3, 0.5, true, false},
		{"z-negative", -50, 5, -3, -2, false, true},
	}
	for _, c := range cases {
		for _, limit := range []float64{-10, 0, 10} {
			t.Run(fmt.Sprintf("%s/lim%v", c.name, limit), func(t *testing.T) {
				clk := sketchtest.NewFakeClock()
				clk.Set(1_000_000)
				s, err := sketch.New(sketch.Config{Levels: 2, CellsPerLevel: 8, Lo: c.lo, Hi: 100, Clock: clk})
				if err != nil {
					t.Fatal(err)
				}
				used := map[uint64]bool{}
				x := a92coreFind(t, s, "x", used, func([]uint32) bool { return true })
				cx := a92coreCells(s, x)
				y := a92coreFind(t, s, "y", used, func(c []uint32) bool { return c[0] != cx[0] && c[1] == cx[1] })
				z := a92coreFind(t, s, "z", used, func(c []uint32) bool { return c[0] == cx[0] && c[1] != cx[1] })
				s.Update(z, c.zpre)
				var conflicts, rollbacks int
				core.SetHooks(core.SketchOf(s), core.Hooks{
					BeforeCAS: func(l uint32) {
						if l == 1 && conflicts == 0 {
							conflicts++
							s.Update(y, 1)
						}
					},
					Rollback: func(l uint32) {
						if l == 0 && rollbacks == 0 {
							rollbacks++
							if c.later {
								clk.Advance(4 * time.Millisecond)
							}
							s.Update(z, c.zadd)
						}
					},
				})
				xok := s.TryUpdate(x, c.xd, limit)
				core.SetHooks(core.SketchOf(s), core.Hooks{})
				if conflicts+rollbacks == 0 {
					if xok {
						t.Fatal("X admitted without the interleaving")
					}
					return // denied on its first snapshot (min(zpre, 0) + xd > limit)
				}
				if conflicts != 1 || rollbacks != 1 {
					t.Fatalf("the interleaving did not happen: %d conflicts, %d roll-backs", conflicts, rollbacks)
				}
				sum := c.zpre + c.zadd
				if xok {
					sum += c.xd
				}
				want := min(max(sum, c.lo), 100)
				a := s.QueryDetailed(x).Levels[0].Score
				if a < want {
					t.Errorf("cell a = %v, below the %v the admitted writes add up to (X admitted %v): X's decrement was not given back in full", a, want, xok)
				}
				if c.exact && a != want {
					t.Errorf("cell a = %v, want exactly %v (X admitted %v)", a, want, xok)
				}
				if got := s.QueryDetailed(x).Levels[1].Score; got < min(max(1+map[bool]float64{true: c.xd}[xok], c.lo), 100) {
					t.Errorf("cell s = %v, below Y's 1 plus X's %v if admitted (%v)", got, c.xd, xok)
				}
			})
		}
	}
}
