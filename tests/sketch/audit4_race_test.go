package sketch_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a4Keys returns n keys of s, each on its own TryUpdate stripe, so that
// keys sharing cells are not serialised by a stripe and meet only at
// the cells.
func a4Keys(t *testing.T, s *sketch.Sketch, n int, prefix string) [][]byte {
	t.Helper()
	e := core.SketchOf(s)
	seen := map[uint64]bool{}
	var keys [][]byte
	for i := 0; len(keys) < n; i++ {
		if i > 10000 {
			t.Fatal("not enough keys on distinct stripes")
		}
		k := fmt.Appendf(nil, "%s-%d", prefix, i)
		if st := core.StripeOf(e, k); !seen[st] {
			seen[st] = true
			keys = append(keys, k)
		}
	}
	return keys
}

type a4Cell struct{ level, index uint32 }

// a4CellsOf returns the cells of every key, and for each cell the keys
// that touch it.
func a4CellsOf(s *sketch.Sketch, keys [][]byte) ([][]a4Cell, map[a4Cell][]int) {
	per := make([][]a4Cell, len(keys))
	by := map[a4Cell][]int{}
	for k, key := range keys {
		for _, lv := range s.QueryDetailed(key).Levels {
			c := a4Cell{lv.Level, lv.Index}
			per[k] = append(per[k], c)
			by[c] = append(by[c], k)
		}
	}
	return per, by
}

// a4CellScores returns every cell's score read through the keys.
func a4CellScores(s *sketch.Sketch, keys [][]byte) map[a4Cell]float64 {
	out := map[a4Cell]float64{}
	for _, key := range keys {
		for _, lv := range s.QueryDetailed(key).Levels {
			out[a4Cell{lv.Level, lv.Index}] = lv.Score
		}
	}
	return out
}

// a4CheckFinite fails t if any cell of keys is NaN, infinite or outside
// [lo, hi] (hi as the sketch stores it, rounded up to float32).
func a4CheckFinite(t *testing.T, s *sketch.Sketch, keys [][]byte, lo, hi float64) {
	t.Helper()
	hi32 := float64(float32(hi))
	if hi32 < hi {
		hi32 = float64(math.Nextafter32(float32(hi), float32(math.Inf(1))))
	}
	for c, v := range a4CellScores(s, keys) {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < lo || v > hi32 {
			t.Errorf("cell %v holds %v, outside [%v, %v]", c, v, lo, hi)
		}
	}
}

// a4Tally is what one worker did: per key, the mass its admitted
// TryUpdates and its Updates added, and the counts.
type a4Tally struct {
	try, upd         []float64
	admitted, denied int
	events           [][]a4Event // per key: admitted TryUpdates and Updates, with the lower bound of their time
}

type a4Event struct {
	at int64 // a time no later than the operation's
	d  float64
}

func newA4Tally(n int) *a4Tally {
	return &a4Tally{try: make([]float64, n), upd: make([]float64, n), events: make([][]a4Event, n)}
}

func (a *a4Tally) add(b *a4Tally) {
	for k := range a.try {
		a.try[k] += b.try[k]
		a.upd[k] += b.upd[k]
		a.events[k] = append(a.events[k], b.events[k]...)
	}
	a.admitted += b.admitted
	a.denied += b.denied
}

// a4Race runs the workers together (each spins until all have started,
// and is handed its own rand and tally) and returns the sum of the
// tallies.
func a4Race(nKeys int, seed uint64, workers ...func(r *rand.Rand, tl *a4Tally)) *a4Tally {
	var ready atomic.Int64
	tallies := make([]*a4Tally, len(workers))
	var wg sync.WaitGroup
	for w, f := range workers {
		tallies[w] = newA4Tally(nKeys)
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(w)))
			ready.Add(1)
			for ready.Load() < int64(len(workers)) {
				runtime.Gosched()
			}
			f(r, tallies[w])
		})
	}
	wg.Wait()
	sum := newA4Tally(nKeys)
	for _, tl := range tallies {
		sum.add(tl)
	}
	return sum
}

// a4Tryer returns a worker that issues n TryUpdate(keys[random], d,
// limit), d drawn from deltas.
func a4Tryer(s *sketch.Sketch, keys [][]byte, n int, deltas []float64, limit float64, at func() int64) func(*rand.Rand, *a4Tally) {
	return func(r *rand.Rand, tl *a4Tally) {
		for range n {
			k, d := r.IntN(len(keys)), deltas[r.IntN(len(deltas))]
			if r.IntN(4) == 0 {
				runtime.Gosched()
			}
			var t0 int64
			if at != nil {
				t0 = at()
			}
			if s.TryUpdate(keys[k], d, limit) {
				tl.try[k] += d
				tl.admitted++
				tl.events[k] = append(tl.events[k], a4Event{t0, d})
			} else {
				tl.denied++
			}
		}
	}
}

// a4Updater returns a worker that issues n Update(keys[random], d).
func a4Updater(s *sketch.Sketch, keys [][]byte, n int, d float64, at func() int64) func(*rand.Rand, *a4Tally) {
	return func(r *rand.Rand, tl *a4Tally) {
		for range n {
			k := r.IntN(len(keys))
			if r.IntN(4) == 0 {
				runtime.Gosched()
			}
			var t0 int64
			if at != nil {
				t0 = at()
			}
			s.Update(keys[k], d)
			tl.upd[k] += d
			tl.events[k] = append(tl.events[k], a4Event{t0, d})
		}
	}
}

// TestAudit4CrossStripeRace: keys on distinct stripes that share some
// (or all) of their cells race TryUpdate against each other and against
// Updates of the same keys, which land on shared cells between a
// TryUpdate's snapshot and its CASes and force commit conflicts and
// roll-backs. Frozen clock (Linear decay configured, no time passes),
// integer deltas. The promises
// checked ("TryUpdate(k, d, limit) applies d ... only if aggregate + d
// <= limit, atomically with respect to every other TryUpdate of any key
// that shares cells with k"; "with every key colliding the total
// admitted never exceeds the limit"; roll-backs "exact or nothing";
// "Query(k) >= the key's true score, whatever the collisions, clamps,
// roll-backs"):
//   - a key's admitted TryUpdate mass never exceeds the limit (all keys'
//     together when every key shares every cell);
//   - every cell holds at least min(Hi, the mass of the keys in it), and
//     every key's estimate at least min(Hi, its own mass);
//   - with the limit above Hi + every delta, nothing is ever denied (the
//     aggregate cannot exceed Hi);
//   - no cell is NaN, infinite or outside [Lo, Hi].
func TestAudit4CrossStripeRace(t *testing.T) {
	cases := []struct {
		name      string
		levels, m uint32
		hi, limit float64
		nKeys     int
		allShare  bool // M = 1: every key in every cell
		noDenial  bool // limit > Hi + max delta
	}{
		{"partial/L3M3", 3, 3, 1e9, 200, 6, false, false},
		{"partial/L4M2", 4, 2, 1e9, 150, 5, false, false},
		{"all/L3M1", 3, 1, 1e9, 600, 5, true, false},
		{"clamp/Hi40-limit36", 2, 2, 40, 36, 5, false, false},
		{"clamp/Hi20-limit1000", 3, 2, 20, 1000, 5, false, true},
	}
	for _, c := range cases {
		for _, hooked := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/hooks=%v", c.name, hooked), func(t *testing.T) {
				a4Procs(t, func(t *testing.T) {
					clk := sketchtest.NewFakeClock()
					clk.Set(3_600_000)
					s := mustNewSketch(t, sketch.Config{Levels: c.levels, CellsPerLevel: c.m, Hi: c.hi, Decay: decay.Linear(5), Clock: clk})
					keys := a4Keys(t, s, c.nKeys, "xs")
					conflicts, held := new(atomic.Int64), new(atomic.Int64)
					if hooked {
						conflicts, held = a4Yielding(s)
					}
					deltas := []float64{1, 1, 2}
					tl := a4Race(len(keys), uint64(c.levels*100+c.m),
						a4Tryer(s, keys, 500, deltas, c.limit, nil),
						a4Tryer(s, keys, 500, deltas, c.limit, nil),
						a4Tryer(s, keys, 500, deltas, c.limit, nil),
						a4Tryer(s, keys, 500, deltas, c.limit, nil),
						a4Updater(s, keys, 200, 1, nil),
						a4Updater(s, keys, 200, 1, nil),
					)
					a4CheckFinite(t, s, keys, 0, c.hi)
					hi32 := float64(float32(c.hi))
					total := 0.0
					for k := range keys {
						total += tl.try[k]
						if !c.noDenial && tl.try[k] > c.limit {
							t.Errorf("key %d: admitted TryUpdate mass %v > limit %v", k, tl.try[k], c.limit)
						}
						truth := min(hi32, tl.try[k]+tl.upd[k])
						if q := s.Query(keys[k]); q < truth {
							t.Errorf("key %d: Query %v < its true score %v (admitted %v, updated %v)", k, q, truth, tl.try[k], tl.upd[k])
						}
					}
					if c.allShare && total > c.limit {
						t.Errorf("every key in every cell: total admitted %v > limit %v", total, c.limit)
					}
					if c.noDenial && tl.denied != 0 {
						t.Errorf("limit %v above Hi %v + every delta: %d TryUpdates denied", c.limit, c.hi, tl.denied)
					}
					_, by := a4CellsOf(s, keys)
					cells := a4CellScores(s, keys)
					extra := 0.0
					for cell, ks := range by {
						mass := 0.0
						for _, k := range ks {
							mass += tl.try[k] + tl.upd[k]
						}
						if want := min(hi32, mass); cells[cell] < want {
							t.Errorf("cell %v holds %v < the mass of its keys %v", cell, cells[cell], want)
						} else {
							extra += cells[cell] - want
						}
					}
					t.Logf("admitted %d, denied %d, commit conflicts %d, levels held by denials %d, mass kept by roll-backs %v",
						tl.admitted, tl.denied, conflicts.Load(), held.Load(), extra)
				})
			})
		}
	}
}

// a4Yielding installs hooks on s that yield the processor between a
// TryUpdate's seq read and its snapshot (every other time) and before
// each CAS of its commit after the first, so that Updates and commits
// of colliding keys land inside its windows even at GOMAXPROCS 1. The
// hooked commit is the engine's commitAndRelease twin. It returns
// counters of commit conflicts and of levels a denial left holding its
// increment.
func a4Yielding(s *sketch.Sketch) (conflicts, held *atomic.Int64) {
	conflicts, held = new(atomic.Int64), new(atomic.Int64)
	var n atomic.Int64
	core.SetHooks(core.SketchOf(s), core.Hooks{
		Load: func(uint32) {
			if n.Add(1)%2 == 0 {
				runtime.Gosched()
			}
		},
		BeforeCAS: func(l uint32) {
			if l > 0 {
				runtime.Gosched()
			}
		},
		Rollback: func(uint32) { runtime.Gosched() },
		Conflict: func(uint32) { conflicts.Add(1) },
		Held:     func(uint32) { held.Add(1) },
	})
	return conflicts, held
}

// TestAudit4NegativeDeltasRace: Lo < 0 and negative deltas. Key k =
// TryUpdate(k, +1, 50) and TryUpdate(k, -0.5, 50) from three goroutines,
// Update(k, -1) from one, while key j (another stripe, sharing cells
// with k) is raised by Updates and TryUpdates. Every admission decides
// on an aggregate that holds k's landed mass (other keys only add), so
// k's own net mass can never end above the limit: admitted(+) -
// admitted(-) - updates(-) <= 50. No cell may leave [Lo, Hi] or hold NaN.
func TestAudit4NegativeDeltasRace(t *testing.T) {
	for _, hooked := range []bool{false, true} {
		t.Run(fmt.Sprintf("hooks=%v", hooked), func(t *testing.T) { a4NegativeRace(t, hooked) })
	}
}

func a4NegativeRace(t *testing.T, hooked bool) {
	a4Procs(t, func(t *testing.T) {
		clk := sketchtest.NewFakeClock()
		clk.Set(99_000)
		s := mustNewSketch(t, sketch.Config{Levels: 2, CellsPerLevel: 2, Lo: -1000, Hi: 1e6, Clock: clk})
		cands := a4Keys(t, s, 16, "neg")
		keys := [][]byte{cands[0]}
		kc := s.QueryDetailed(cands[0]).Levels
		for _, c := range cands[1:] {
			if lv := s.QueryDetailed(c).Levels; lv[0].Index == kc[0].Index || lv[1].Index == kc[1].Index {
				keys = append(keys, c) // j: shares a cell with k
				break
			}
		}
		if len(keys) != 2 {
			t.Fatal("no key sharing a cell with k")
		}
		conflicts, held := new(atomic.Int64), new(atomic.Int64)
		if hooked {
			conflicts, held = a4Yielding(s)
		}
		pick := func(idx int) [][]byte { return [][]byte{keys[idx]} }
		var kTally [4]*a4Tally
		var ws []func(*rand.Rand, *a4Tally)
		for w := range 4 {
			var f func(*rand.Rand, *a4Tally)
			if w < 3 {
				f = a4Tryer(s, pick(0), 150, []float64{1, 1, 1, -0.5}, 50, nil)
			} else {
				f = a4Updater(s, pick(0), 60, -1, nil)
			}
			ws = append(ws, func(r *rand.Rand, _ *a4Tally) {
				kTally[w] = newA4Tally(1)
				f(r, kTally[w])
			})
		}
		ws = append(ws, a4Updater(s, pick(1), 150, 1, nil), a4Tryer(s, pick(1), 150, []float64{1, 2}, 500, nil))
		a4Race(1, 11, ws...)
		net := 0.0
		for _, tl := range kTally {
			net += tl.try[0] + tl.upd[0]
		}
		if net > 50 {
			t.Errorf("key k's net admitted mass %v > limit 50", net)
		}
		a4CheckFinite(t, s, keys, -1000, 1e6)
		t.Logf("k's net mass %v, commit conflicts %d, levels held by denials %d", net, conflicts.Load(), held.Load())
	})
}

// a4PhaseClock moves a fake clock through phases while a race runs:
// phase p's readings stay in [lo(p), lo(p)+130] ms, stepping back and
// forth, and lo grows by 100 ms a phase, so a reading taken after phase p
// is announced is at least lo(p). Workers stamp each operation with
// a4PhaseClock.floor() read before it: a lower bound on its time.
type a4PhaseClock struct {
	clk   *sketchtest.FakeClock
	t0    int64
	phase atomic.Int64
	max   int64
}

func (pc *a4PhaseClock) lo(p int64) int64 { return pc.t0 + 100*p }
func (pc *a4PhaseClock) floor() int64     { return pc.lo(pc.phase.Load()) }

// run drives phases 1..n, then leaves the clock at its largest reading.
func (pc *a4PhaseClock) run(r *rand.Rand, n int64) {
	pc.max = pc.t0
	for p := int64(1); p <= n; p++ {
		pc.clk.Set(pc.lo(p)) // a step back from the previous phase's top
		pc.phase.Store(p)
		for range 6 {
			x := pc.lo(p) + r.Int64N(131)
			pc.max = max(pc.max, x)
			pc.clk.Set(x)
			runtime.Gosched()
		}
	}
	pc.clk.Set(pc.max)
}

// TestAudit4DecayMovingClockRace: colliding keys on distinct stripes race
// TryUpdate and Update under Linear and Exponential decay while the
// clock moves forward and steps back. Checked after the race, at a
// final time: no key's estimate is below a lower bound of its true
// score (its admitted TryUpdates and Updates each decayed from a time no
// later than its own), and no key's admitted TryUpdate mass exceeds what
// the limit allows given at most span ms of decay (limit + rate x span
// for Linear, limit x e^(lambda x span) for Exponential). Each law also
// with Hi = 12 (cells saturate; the truth is clamped there too), and
// each with the commit windows widened by yielding hooks.
func TestAudit4DecayMovingClockRace(t *testing.T) {
	const limit = 8.0
	laws := []struct {
		name   string
		law    decay.Decay
		rate   float64 // Linear, per second
		lambda float64 // Exponential, per second
		hi     float64
	}{
		{"linear", decay.Linear(10), 10, 0, 1e9},
		{"exponential", decay.Exponential(0.5), 0, 0.5, 1e9},
		{"linear/Hi12", decay.Linear(10), 10, 0, 12},
		{"exponential/Hi12", decay.Exponential(0.5), 0, 0.5, 12},
	}
	for _, lw := range laws {
		for _, hooked := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/hooks=%v", lw.name, hooked), func(t *testing.T) {
				a4Procs(t, func(t *testing.T) {
					clk := sketchtest.NewFakeClock()
					pc := &a4PhaseClock{clk: clk, t0: 50_000_000}
					clk.Set(pc.t0)
					s := mustNewSketch(t, sketch.Config{Levels: 3, CellsPerLevel: 3, Hi: lw.hi, Decay: lw.law, Clock: clk})
					keys := a4Keys(t, s, 5, "dc")
					conflicts, held := new(atomic.Int64), new(atomic.Int64)
					if hooked {
						conflicts, held = a4Yielding(s)
					}
					var stop atomic.Bool
					until := func(f func(*rand.Rand, *a4Tally)) func(*rand.Rand, *a4Tally) {
						return func(r *rand.Rand, tl *a4Tally) {
							for !stop.Load() {
								f(r, tl)
							}
						}
					}
					tl := a4Race(len(keys), 5,
						func(r *rand.Rand, _ *a4Tally) { pc.run(r, 40); stop.Store(true) },
						until(a4Tryer(s, keys, 10, []float64{1, 2, 0.75}, limit, pc.floor)),
						until(a4Tryer(s, keys, 10, []float64{1, 2, 0.75}, limit, pc.floor)),
						until(a4Tryer(s, keys, 10, []float64{1, 2, 0.75}, limit, pc.floor)),
						until(a4Updater(s, keys, 1, 0.25, pc.floor)),
					)
					final := pc.max + 7
					clk.Set(final)
					span := float64(pc.max-pc.t0) / 1000
					a4CheckFinite(t, s, keys, 0, lw.hi)
					for k := range keys {
						var bound float64
						if lw.rate > 0 {
							bound = limit + lw.rate*span
						} else {
							bound = limit * math.Exp(lw.lambda*span)
						}
						if lw.hi > 1e6 && tl.try[k] > bound+1e-9 { // the bound needs no clamp below limit + decay
							t.Errorf("key %d: admitted mass %v > %v, the most limit %v allows with %v s of decay", k, tl.try[k], bound, limit, span)
						}
						truth := a4LowerTruth(tl.events[k], final, lw.rate, lw.lambda, float64(float32(lw.hi)))
						if q := s.Query(keys[k]); q < truth*(1-1e-12) {
							t.Errorf("key %d: Query %v below its true score (at least %v)", k, q, truth)
						}
					}
					t.Logf("admitted %d, denied %d over %v s, commit conflicts %d, levels held by denials %d",
						tl.admitted, tl.denied, span, conflicts.Load(), held.Load())
				})
			})
		}
	}
}

// a4LowerTruth is a lower bound of a key's true score at final: its
// events applied at their lower-bound times (earlier means more decay),
// under Linear(rate) or Exponential(lambda), clamped at hi.
func a4LowerTruth(ev []a4Event, final int64, rate, lambda, hi float64) float64 {
	ev = append([]a4Event(nil), ev...)
	sort.Slice(ev, func(i, j int) bool { return ev[i].at < ev[j].at })
	x, at := 0.0, int64(math.MinInt64)
	drain := func(to int64) {
		if at == math.MinInt64 || to <= at {
			return
		}
		dt := float64(to-at) / 1000
		if rate > 0 {
			x = max(0, x-rate*dt)
		} else {
			x *= math.Exp(-lambda * dt)
		}
	}
	for _, e := range ev {
		drain(e.at)
		at = max(at, e.at)
		x = min(hi, x+e.d)
	}
	drain(final)
	return x
}

// TestAudit4IdleYearsAndBackwardJumps: racing phases on one key (8
// goroutines, TryUpdate(k, 1, limit)), separated by years of idle time,
// and a phase during which the clock jumps backwards (days, and years)
// again and again. Promised: "N goroutines racing TryUpdate(k, 1, 1000)
// with no decay admit exactly 1000"; "a clock step back counts as zero
// elapsed time, never as growth"; "Any idle time, 1 ms to years, decays
// as int64 stamps would". So, per law:
//   - phase A (frozen at T): exactly 120 of limit 120;
//   - 3 years idle, phase B (frozen), limit 240: 120 more without decay,
//     240 with (everything drained);
//   - phase C, clock stepping back below T+3y only, limit 360: no time
//     elapses, so exactly 120 more.
//
// And the same with every key in every cell (M = 1, four keys on
// distinct stripes): each phase's total within the limit, and without
// decay the running total too.
func TestAudit4IdleYearsAndBackwardJumps(t *testing.T) {
	const year = int64(365 * 24 * time.Hour / time.Millisecond)
	laws := map[string]decay.Decay{"none": decay.None(), "linear": decay.Linear(1), "exponential": decay.Exponential(1)}
	for name, law := range laws {
		t.Run(name, func(t *testing.T) {
			a4Procs(t, func(t *testing.T) {
				for _, m := range []uint32{64, 1} {
					clk := sketchtest.NewFakeClock()
					clk.Set(1_234_567)
					s := mustNewSketch(t, sketch.Config{Levels: 3, CellsPerLevel: m, Hi: 1e9, Decay: law, Clock: clk})
					nKeys := 1
					if m == 1 {
						nKeys = 4
					}
					keys := a4Keys(t, s, nKeys, "idle")
					phase := func(limit float64, mover func(r *rand.Rand, stop *atomic.Bool)) float64 {
						var stop atomic.Bool
						ws := []func(*rand.Rand, *a4Tally){}
						for range 8 {
							ws = append(ws, a4Tryer(s, keys, 45, []float64{1}, limit, nil))
						}
						var wg sync.WaitGroup
						if mover != nil {
							wg.Go(func() { mover(rand.New(rand.NewPCG(1, 2)), &stop) })
						}
						tl := a4Race(len(keys), uint64(limit), ws...)
						stop.Store(true)
						wg.Wait()
						sum := 0.0
						for k := range keys {
							sum += tl.try[k]
						}
						return sum
					}
					a := phase(120, nil)
					clk.Set(clk.NowMillis() + 3*year + 17)
					top := clk.NowMillis()
					b := phase(240, nil)
					c := phase(360, func(r *rand.Rand, stop *atomic.Bool) {
						for !stop.Load() {
							switch r.IntN(3) {
							case 0:
								clk.Set(top - 1 - r.Int64N(10*24*3600*1000))
							case 1:
								clk.Set(top - 3*year - r.Int64N(1000))
							default:
								clk.Set(top - 1)
							}
							runtime.Gosched()
						}
					})
					clk.Set(top)
					a4CheckFinite(t, s, keys, 0, 1e9)
					wantB := 240.0
					if law == decay.None() {
						wantB = 120
					}
					if m == 64 {
						if a != 120 || b != wantB || c != 120 {
							t.Errorf("M=%d one key: admitted %v, %v, %v in phases A, B, C; want 120, %v, 120", m, a, b, c, wantB)
						}
						continue
					}
					if a > 120 || b > 240 || c > 360 || (law == decay.None() && a+b+c > 360) {
						t.Errorf("M=1, every key in every cell: admitted %v, %v, %v in phases A, B, C (limits 120, 240, 360; without decay the running total too)", a, b, c)
					}
					if law != decay.None() && b+c > 360 {
						t.Errorf("M=1: phases B and C admitted %v > 360 with no time elapsing between them", b+c)
					}
				}
			})
		})
	}
}

// TestAudit4SweepDuringRace: a racing phase that starts just past the
// sweep's due time (2^30 ms after the first writes: not urgent, so the
// operations sweep the cells in chunks, helping one another, while they
// run) on a sketch of 5 chunks. The key's cells are old when the phase
// starts, so the sweep re-stamps them under the racing TryUpdates'
// snapshots. Without decay the count is exact all the same: 300 of
// limit 300 before, 300 more of limit 600 after; Updates of other keys
// help the sweep meanwhile, and every score is kept.
func TestAudit4SweepDuringRace(t *testing.T) {
	a4Procs(t, func(t *testing.T) {
		clk := sketchtest.NewFakeClock()
		clk.Set(8_000_000)
		s := mustNewSketch(t, sketch.Config{Levels: 2, CellsPerLevel: 40_000, Hi: 1e9, Clock: clk})
		k := [][]byte{[]byte("swept")}
		others := [][]byte{[]byte("o1"), []byte("o2"), []byte("o3")}
		var upd [3]float64
		race := func(limit float64) float64 {
			ws := []func(*rand.Rand, *a4Tally){}
			for range 6 {
				ws = append(ws, a4Tryer(s, k, 60, []float64{1}, limit, nil))
			}
			ws = append(ws, a4Updater(s, others, 50, 1, nil))
			tl := a4Race(len(others), uint64(limit), ws...)
			for i := range others {
				upd[i] += tl.upd[i]
			}
			return tl.try[0]
		}
		if a := race(300); a != 300 {
			t.Fatalf("phase A admitted %v, want 300", a)
		}
		clk.Set(clk.NowMillis() + 1<<30 + 5)
		if b := race(600); b != 300 {
			t.Errorf("phase B, racing the sweep: admitted %v, want 300", b)
		}
		if q := s.Query(k[0]); q != 600 {
			t.Errorf("Query = %v, want 600", q)
		}
		for i, o := range others {
			if q := s.Query(o); q < upd[i] {
				t.Errorf("Query(%s) = %v < its %v Updates: an Update lost across the sweep", o, q, upd[i])
			}
		}
	})
}

// TestAudit4InfiniteBoundsRace: Lo = -Inf and Hi = +Inf (allowed with a
// law that drains; "a score saturates at MaxFloat32 (3.4e38), as if Hi
// were MaxFloat32"), and deltas of either sign near the float32 range's
// end, racing TryUpdate (limit 1e300: the aggregate is at most 3.4e38, so
// nothing may be denied) against Updates of the colliding keys, with the
// commit windows widened. "No cell ever holds NaN or Inf": every cell
// stays within +-MaxFloat32 and reads as a number.
func TestAudit4InfiniteBoundsRace(t *testing.T) {
	for _, hooked := range []bool{false, true} {
		t.Run(fmt.Sprintf("hooks=%v", hooked), func(t *testing.T) {
			a4Procs(t, func(t *testing.T) {
				clk := sketchtest.NewFakeClock()
				clk.Set(31_000)
				s := mustNewSketch(t, sketch.Config{Levels: 3, CellsPerLevel: 2, Lo: math.Inf(-1), Hi: math.Inf(1), Decay: decay.Linear(1), Clock: clk})
				if hooked {
					a4Yielding(s)
				}
				keys := a4Keys(t, s, 4, "inf")
				big := []float64{1e38, 3e38, -1e38, -3e38, math.MaxFloat32}
				tl := a4Race(len(keys), 13,
					a4Tryer(s, keys, 200, big, 1e300, nil),
					a4Tryer(s, keys, 200, big, 1e300, nil),
					a4Tryer(s, keys, 200, big, 1e300, nil),
					a4Updater(s, keys, 100, 3e38, nil),
					a4Updater(s, keys, 100, -3e38, nil),
				)
				if tl.denied != 0 {
					t.Errorf("%d TryUpdates denied with limit 1e300 on aggregates within +-MaxFloat32", tl.denied)
				}
				a4CheckFinite(t, s, keys, -math.MaxFloat32, math.MaxFloat32)
				for k, key := range keys {
					if q := s.Query(key); math.IsNaN(q) || math.IsInf(q, 0) {
						t.Errorf("Query(key %d) = %v", k, q)
					}
				}
			})
		})
	}
}
