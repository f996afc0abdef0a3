package grudge_test

import (
	"fmt"
	"testing"

	"github.com/dchest/siphash"
	"github.com/spaolacci/murmur3"
	"pgregory.net/rapid"

	"github.com/lfgrudge/grudge"
)

func auditSplitMix64(state *uint64) uint64 {
	*state += 0x9e3779b97f4a7c15
	z := *state
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// TestAuditHashers: SipHash() is SipHash-2-4 keyed by two rounds of
// splitmix64 from the seed (REFERENCE.md, hash.go); Murmur3() is the first
// 64 bits of spaolacci/murmur3's x64-128 under the seed folded to 32 bits
// (hash.go).
func TestAuditHashers(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		seed := rapid.Uint64().Draw(rt, "seed")
		key := rapid.SliceOfN(rapid.Byte(), 0, 64).Draw(rt, "key")
		st := seed
		k0 := auditSplitMix64(&st)
		k1 := auditSplitMix64(&st)
		if got, want := grudge.SipHash()(seed).Hash64(key), siphash.Hash(k0, k1, key); got != want {
			rt.Fatalf("SipHash()(%#x).Hash64(%q) = %#x, want %#x", seed, key, got, want)
		}
		if got, want := grudge.Murmur3()(seed).Hash64(key), murmur3.Sum64WithSeed(key, uint32(seed)^uint32(seed>>32)); got != want {
			rt.Fatalf("Murmur3()(%#x).Hash64(%q) = %#x, want %#x", seed, key, got, want)
		}
	})
}

// fixedHasher hashes every key to the value in the map (0 if absent); it
// ignores the seed, so every sketch built with it lays keys out alike.
type fixedHasher map[string]uint64

func (f fixedHasher) Hash64(key []byte) uint64 { return f[string(key)] }

// TestAuditKirschMitzenmacher: level l of a key with hash h uses
// h1 + l*h2 (the low and high 32 bits, mod 2^32) reduced to [0, M) by a
// multiply-shift (hash.go, docs/migrating.md); a full 64-bit collision
// collides at every level and shares the cells' scores.
func TestAuditKirschMitzenmacher(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		h := rapid.Uint64().Draw(rt, "h") | 1<<32 // h2 odd: the documented formula applies as is
		m := rapid.Uint32Range(1, 1<<20).Draw(rt, "M")
		levels := rapid.Uint32Range(1, 8).Draw(rt, "L")
		hs := fixedHasher{"a": h, "b": h}
		s, err := grudge.New(grudge.Config{Levels: levels, CellsPerLevel: m, Lo: 0, Hi: 100,
			Hasher: func(uint64) grudge.Hasher { return hs }})
		if err != nil {
			rt.Fatal(err)
		}
		s.Update([]byte("a"), 7)
		d := s.QueryDetailed([]byte("b"))
		if len(d.CellIndexes) != int(levels) || len(d.LevelScores) != int(levels) {
			rt.Fatalf("QueryDetailed has %d indexes, %d scores; want %d", len(d.CellIndexes), len(d.LevelScores), levels)
		}
		h1, h2 := uint32(h), uint32(h>>32)
		for l := range levels {
			g := h1 + l*h2
			want := uint32(uint64(g) * uint64(m) >> 32)
			if d.CellIndexes[l] != want || d.CellIndexes[l] >= m {
				rt.Fatalf("level %d index %d, want %d (M=%d)", l, d.CellIndexes[l], want, m)
			}
			if d.LevelScores[l] != 7 {
				rt.Fatalf("level %d: colliding key reads %v, want 7", l, d.LevelScores[l])
			}
		}
		if d.Aggregate != 7 {
			rt.Fatalf("aggregate %v", d.Aggregate)
		}
	})
}

// TestAuditFastPathsMatchFunc: Min, Max and Mean take an inlined fast
// path; wrapped in a closure they are custom functions on the slow path.
// On the same layout (a seed-independent Hasher) and the same operations,
// both must answer identically: Query, UpdateAndQuery, QueryDetailed,
// TryUpdate's decision; and the aggregate equals the function applied to
// QueryDetailed's level scores.
func TestAuditFastPathsMatchFunc(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		builtins := []grudge.Aggregator{grudge.Min, grudge.Max, grudge.Mean}
		ai := rapid.IntRange(0, 2).Draw(rt, "agg")
		fast := builtins[ai]
		slow := grudge.Aggregator(func(v []float64) float64 { return fast(v) })
		hs := fixedHasher{}
		for i := range 12 {
			hs[fmt.Sprint("k", i)] = rapid.Uint64().Draw(rt, "h")
		}
		clock := &wallClock{}
		decays := []grudge.Decay{grudge.None, grudge.Exponential(0.7), grudge.Linear(3)}
		mk := func(agg grudge.Aggregator) *grudge.Sketch {
			s, err := grudge.New(grudge.Config{
				Levels: uint32(rapid.IntRange(1, 8).Draw(rt, "L")), CellsPerLevel: 8,
				Lo: -50, Hi: 50, Decay: decays[rapid.IntRange(0, 2).Draw(rt, "decay")],
				Aggregator: agg, Hasher: func(uint64) grudge.Hasher { return hs }, Clock: clock,
			})
			if err != nil {
				rt.Fatal(err)
			}
			return s
		}
		a := mk(fast)
		// the same Levels and Decay draws for b: replay them
		b, err := grudge.New(grudge.Config{
			Levels: uint32(len(a.QueryDetailed([]byte("k0")).LevelScores)), CellsPerLevel: 8,
			Lo: -50, Hi: 50, Decay: a.Native().Config().Decay,
			Aggregator: slow, Hasher: func(uint64) grudge.Hasher { return hs }, Clock: clock,
		})
		if err != nil {
			rt.Fatal(err)
		}
		for i := range rapid.IntRange(1, 60).Draw(rt, "n") {
			clock.t.Add(int64(rapid.IntRange(0, 400).Draw(rt, "dt")))
			k := []byte(fmt.Sprint("k", rapid.IntRange(0, 11).Draw(rt, "key")))
			d := float64(rapid.IntRange(-20, 20).Draw(rt, "delta")) / 4
			var x, y any
			switch rapid.IntRange(0, 3).Draw(rt, "op") {
			case 0:
				x, y = a.UpdateAndQuery(k, d), b.UpdateAndQuery(k, d)
			case 1:
				a.Update(k, d)
				b.Update(k, d)
				x, y = a.Query(k), b.Query(k)
			case 2:
				lim := float64(rapid.IntRange(-20, 60).Draw(rt, "limit"))
				x, y = a.TryUpdate(k, d, lim), b.TryUpdate(k, d, lim)
			case 3:
				da, db := a.QueryDetailed(k), b.QueryDetailed(k)
				if f := fast(da.LevelScores); f != da.Aggregate || f != a.Query(k) {
					rt.Fatalf("op %d: %d(levels %v) = %v, QueryDetailed %v, Query %v", i, ai, da.LevelScores, f, da.Aggregate, a.Query(k))
				}
				x, y = fmt.Sprint(da), fmt.Sprint(db)
			}
			if x != y {
				rt.Fatalf("op %d key %s: fast path %v, same function as custom %v", i, k, x, y)
			}
		}
	})
}
