package bucket_test

// audit27: the bucket engine's one-sided guarantee under forced
// fingerprint collisions (a custom hasher whose hashes all map to 2
// fingerprints), churn past capacity, evictions and a fake clock that
// steps back, forward, by exact residue wraps and by hours and days.
// Every key is checked against an exact per-key GCRA model (stamps in
// ticks), and every eviction against the documented victim rule.

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/bucket"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a27Hasher maps each key to a precomputed hash.
type a27Hasher map[string]uint64

func (h a27Hasher) Sum64(b []byte) uint64       { return h[string(b)] }
func (h a27Hasher) Sum64String(s string) uint64 { return h[s] }
func a27Factory(h a27Hasher) core.HasherFactory { return func(uint64) core.Hasher { return h } }
func a27Key(i int) string                       { return fmt.Sprintf("k%03d", i) }
func a27FP(h uint64) uint16 {
	m := h * 0x9E3779B97F4A7C15
	m ^= m >> 29
	m *= 0xBF58476D1CE4E5B9
	fp := uint16(m >> 48)
	if fp == 0 {
		fp = 1
	}
	return fp
}

// a27Colliding returns n keys with distinct hashes: every third has
// fingerprint 1 or 2 (so that their lookups meet false matches), the
// others any fingerprint (so that lines fill and evict).
func a27Colliding(n int, seed uint64) a27Hasher {
	h := a27Hasher{}
	x := seed
	for len(h) < n {
		v := core.SplitMix64(&x)
		if fp := a27FP(v); fp <= 2 || len(h)%3 != 0 {
			h[a27Key(len(h))] = v
		}
	}
	return h
}

// a27TickBase is the engine's tick origin (law.go's tickBase, unexported):
// the tick of ms 0, so that StateOf's stamps compare with ms*PerMs+base.
const a27TickBase = 1 << 17

type a27Law struct {
	name string
	law  bucket.Law
}

var a27Laws = []a27Law{
	{"10x20", bucket.Linear(10, 20)},     // limit.New(10, 20): 15 ticks/ms, slack 369 ms
	{"1e6x60", bucket.Linear(1e6, 60)},   // a slack of a few ms: long moves everywhere
	{"1000x60", bucket.Linear(1000, 60)}, // the stands-stress law
	{"0.5x20", bucket.Linear(0.5, 20)},   // a slow drain: 40 s to empty
}

// a27Engine builds a linear engine of lines lines on clk with hasher h,
// and returns its ticks per unit and per ms.
func a27Engine(t testing.TB, lines int, law bucket.Law, h core.HasherFactory, clk *sketchtest.FakeClock) (*bucket.Engine, uint64, uint64, bool) {
	t.Helper()
	e, err := bucket.New(bucket.Config{Lines: lines, Law: law, Clock: clk, SeedSet: true, Seed: 7, Hasher: h})
	if err != nil {
		t.Fatal(err)
	}
	q := e.Quantum()
	if q.PerMs == 0 || q.PerUnit != float64(uint64(q.PerUnit)) {
		return e, 0, 0, false
	}
	return e, uint64(q.PerUnit), q.PerMs, true
}

// a27Step moves the fake clock: mostly small steps, sometimes back,
// sometimes by exactly a residue wrap (2^16 ticks) or a multiple, the
// slack, an hour, a day, 40 days.
func a27Step(rng *rand.Rand, clk *sketchtest.FakeClock, g, span uint64) {
	slack := int64((1<<16 - 1 - span) / g)
	wrap := int64((1 << 16) / g) // ms per residue wrap (rounded down)
	switch r := rng.IntN(100); {
	case r < 55:
		clk.Advance(time.Duration(rng.IntN(3)) * time.Millisecond)
	case r < 65:
		clk.Set(clk.NowMillis() - int64(rng.IntN(2000))) // back: the Timebase holds its high-water mark
	case r < 72:
		clk.Set(clk.NowMillis() + slack + int64(rng.IntN(3)) - 1)
	case r < 80:
		clk.Set(clk.NowMillis() + wrap*int64(1+rng.IntN(3)) + int64(rng.IntN(3)) - 1)
	case r < 88:
		clk.Advance(time.Duration(rng.IntN(200)) * time.Millisecond)
	case r < 93:
		clk.Advance(time.Hour + time.Duration(rng.IntN(5))*time.Millisecond)
	case r < 97:
		clk.Advance(24 * time.Hour)
	default:
		clk.Advance(40 * 24 * time.Hour)
	}
}

// TestAudit27CollidingChurnOneSided: 120 keys (a third on 2 fingerprints)
// in 5 lines (70 slots): every lookup meets false matches, every line fills, keys
// are evicted and inherit floors, time jumps. After every operation every
// key's Query is at least its exact GCRA debt, an admission never takes a
// key past its limit, and every eviction takes the entry the doc's rule
// names (both lines full of live entries, no candidate, least resulting
// floor). After an idle longer than the span every key reads exactly 0
// (no phantom from a stale residue or floor).
func TestAudit27CollidingChurnOneSided(t *testing.T) {
	testsize.Serial(t)
	for _, L := range a27Laws {
		t.Run(L.name, func(t *testing.T) {
			const nkeys, lines, ops = 120, 5, 6000
			hs := a27Colliding(nkeys, 27)
			clk := sketchtest.NewFakeClock()
			clk.Set(5_000_000)
			e, u, g, ok := a27Engine(t, lines, L.law, a27Factory(hs), clk)
			if !ok {
				t.Skip("ticks longer than a millisecond: the per-ms model is not exact")
			}
			span := e.Quantum().Span
			lim := float64(span/u) * 0.75  // a limit below Max: no clamp
			truth := make([]uint64, nkeys) // the true stamp of each key, in ticks
			rng := rand.New(rand.NewPCG(27, uint64(len(L.name))))
			evictions, admits, denials := 0, 0, 0
			for op := 0; op < ops; op++ {
				if rng.IntN(25) == 0 {
					a27Step(rng, clk, g, span)
				}
				k := rng.IntN(nkeys)
				key := a27Key(k)
				ms := bucket.NowMs(e)
				tick := ms*g + a27TickBase
				n := float64(1 + rng.IntN(4))
				c := uint64(n) * u
				i0, i1, fp := e.Locate(key)
				before := [2]bucket.LineState{bucket.StateOf(e, int(i0)), bucket.StateOf(e, int(i1))}
				debt := uint64(0)
				if truth[k] > tick {
					debt = truth[k] - tick
				}
				var admitted bool
				if rng.IntN(5) == 0 {
					e.Update(key, n)
					admitted = true
				} else {
					admitted = e.TryUpdate(key, n, lim)
					if admitted && debt+c > uint64(lim)*u {
						t.Fatalf("op %d: %s admitted %v with a true debt of %d ticks, past the limit %v", op, key, n, debt, lim)
					}
				}
				if admitted {
					admits++
					truth[k] = min(max(truth[k], tick)+c, tick+span)
				} else {
					denials++
				}
				after := [2]bucket.LineState{bucket.StateOf(e, int(i0)), bucket.StateOf(e, int(i1))}
				if a27CheckEviction(t, before, after, fp, tick, op, key) {
					evictions++
				}
				for j := 0; j < nkeys; j++ {
					if j != k && op%8 != 0 {
						continue // every key every 8th operation, the written key always
					}
					want := float64(0)
					if truth[j] > tick {
						want = float64(truth[j]-tick) / float64(u)
					}
					if got := e.Query(a27Key(j)); got < want-1e-9 {
						t.Fatalf("op %d (%s at ms %d): key %d reads %v below its true debt %v", op, key, ms, j, got, want)
					}
				}
			}
			// An idle time past every debt: every key reads exactly 0.
			clk.Advance(time.Duration(span/g+2) * time.Millisecond)
			for j := 0; j < nkeys; j++ {
				if got := e.Query(a27Key(j)); got != 0 {
					t.Fatalf("after an idle time past the span: key %d reads %v, want 0 (a phantom)", j, got)
				}
			}
			if evictions == 0 || admits == 0 || denials == 0 {
				t.Fatalf("the workload did not exercise the engine: %d evictions, %d admits, %d denials", evictions, admits, denials)
			}
			t.Logf("%d evictions, %d admits, %d denials", evictions, admits, denials)
		})
	}
}

// a27CheckEviction reports whether the write replaced a live entry of
// another fingerprint, and if so checks the doc's victim rule against the
// lines as read before the write (at tick tick).
func a27CheckEviction(t *testing.T, before, after [2]bucket.LineState, fp uint16, tick uint64, op int, key string) bool {
	t.Helper()
	ev := false
	for l := 0; l < 2; l++ {
		for s := 0; s < bucket.SlotsPerLine; s++ {
			b, a := before[l], after[l]
			if b.FP[s] != 0 && b.FP[s] != fp && b.Stamp[s] > tick && a.FP[s] == fp {
				ev = true
				// No candidate of fp before the write.
				for l2 := 0; l2 < 2; l2++ {
					for s2 := 0; s2 < bucket.SlotsPerLine; s2++ {
						if before[l2].FP[s2] == fp {
							t.Fatalf("op %d (%s): evicted line %d slot %d while fp %d had a candidate at line %d slot %d", op, key, l, s, fp, l2, s2)
						}
						if before[l2].FP[s2] == 0 || before[l2].Stamp[s2] <= tick {
							t.Fatalf("op %d (%s fp %d): evicted line %d slot %d, a live entry (stamp %d, now %d) while line %d slot %d was free\nbefore %+v\nafter %+v", op, key, fp, l, s, b.Stamp[s], tick, l2, s2, before, after)
						}
					}
				}
				cost := max(b.Floor, b.Stamp[s])
				for l2 := 0; l2 < 2; l2++ {
					for s2 := 0; s2 < bucket.SlotsPerLine; s2++ {
						if c2 := max(before[l2].Floor, before[l2].Stamp[s2]); c2 < cost {
							t.Fatalf("op %d (%s): evicted line %d slot %d (floor %d, stamp %d: cost %d) where line %d slot %d costs %d", op, key, l, s, b.Floor, b.Stamp[s], cost, l2, s2, c2)
						}
					}
				}
				if a.Floor < b.Stamp[s] {
					t.Fatalf("op %d (%s): evicted stamp %d but the line's floor is %d", op, key, b.Stamp[s], a.Floor)
				}
			}
		}
	}
	return ev
}
