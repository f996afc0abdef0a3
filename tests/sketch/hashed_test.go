package sketch_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestHashedDifferential: the Hashed methods are the keyed At methods with
// the hash taken once. Two sketches of one Config on one fake clock, one
// driven through the keyed methods and one through Hash/HashString (with
// Prefetch calls sprinkled in, which must change nothing), return the same
// values at every step and end with the same cells, byte for byte.
func TestHashedDifferential(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		clk := sketchtest.NewFakeClock()
		cfg := sketch.Config{
			Levels:        uint32(rapid.IntRange(1, 6).Draw(t, "L")),
			CellsPerLevel: uint32(rapid.SampledFrom([]int{1, 3, 64}).Draw(t, "M")),
			Hi:            1000,
			Decay:         rapid.SampledFrom([]decay.Decay{decay.None(), decay.Linear(7), decay.Exponential(0.5)}).Draw(t, "decay"),
			Hasher:        rapid.SampledFrom([]sketch.HasherFactory{sketch.SipHash(), sketch.XXH3()}).Draw(t, "hasher"),
			Seed:          rapid.Uint64().Draw(t, "seed"),
			Clock:         clk,
		}
		keyed, err := newEngine(cfg)
		if err != nil {
			t.Fatal(err)
		}
		hashed, err := newEngine(cfg)
		if err != nil {
			t.Fatal(err)
		}
		keys := []string{"a", "b", "c", "d", "e"}
		for i := range rapid.IntRange(1, 60).Draw(t, "ops") {
			clk.Advance(time.Duration(rapid.IntRange(0, 300).Draw(t, "dt")) * time.Millisecond)
			now := clk.Now()
			key := rapid.SampledFrom(keys).Draw(t, "key")
			var k core.Hashed
			if rapid.Bool().Draw(t, "bytes") {
				k = hashed.Hash([]byte(key))
			} else {
				k = hashed.HashString(key)
			}
			if rapid.Bool().Draw(t, "prefetch") {
				hashed.Prefetch(k)
			}
			delta := float64(rapid.IntRange(-20, 60).Draw(t, "delta"))
			var want, got string
			switch op := rapid.IntRange(0, 4).Draw(t, "op"); op {
			case 0:
				want, got = fmt.Sprint(keyed.QueryStringAt(now, key)), fmt.Sprint(hashed.QueryHashedAt(now, k))
			case 1:
				keyed.UpdateStringAt(now, key, delta)
				hashed.UpdateHashedAt(now, k, delta)
			case 2:
				want = fmt.Sprint(keyed.UpdateAndQueryStringAt(now, key, delta))
				got = fmt.Sprint(hashed.UpdateAndQueryHashedAt(now, k, delta))
			case 3:
				limit := float64(rapid.IntRange(0, 1000).Draw(t, "limit"))
				rw, okw := keyed.TryReserveStringAt(now, key, delta, limit)
				rg, okg := hashed.TryReserveHashedAt(now, k, delta, limit)
				want, got = fmt.Sprint(okw), fmt.Sprint(okg)
				if okw && okg && rapid.Bool().Draw(t, "refund") {
					keyed.Refund(&rw)
					hashed.Refund(&rg)
				}
			case 4:
				rw := keyed.AddStringAt(now, key, delta)
				rg := hashed.AddHashedAt(now, k, delta)
				if rapid.Bool().Draw(t, "refund") {
					keyed.Refund(&rw)
					hashed.Refund(&rg)
				}
			}
			if want != got {
				t.Fatalf("step %d: keyed %s, hashed %s", i, want, got)
			}
		}
		a, _ := keyed.MarshalBinary()
		b, _ := hashed.MarshalBinary()
		if !bytes.Equal(a, b) {
			t.Fatal("the keyed and hashed sketches ended with different cells")
		}
	})
}

// TestHashedForeign: a Hashed from another sketch (another seed: other
// cells) or the zero Hashed is refused with a panic by every Hashed
// method, before anything is written.
func TestHashedForeign(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	cfg := sketch.Config{Levels: 3, CellsPerLevel: 64, Hi: 100, Clock: clk}
	s := mustNewEngine(t, cfg)
	cfg.Seed = 99
	other := mustNewEngine(t, cfg)
	now := clk.Now()
	for name, k := range map[string]core.Hashed{"foreign": other.HashString("k"), "zero": {}} {
		ops := map[string]func(){
			"Prefetch":       func() { s.Prefetch(k) },
			"Query":          func() { s.QueryHashedAt(now, k) },
			"Update":         func() { s.UpdateHashedAt(now, k, 1) },
			"UpdateAndQuery": func() { s.UpdateAndQueryHashedAt(now, k, 1) },
			"TryReserve":     func() { s.TryReserveHashedAt(now, k, 1, 10) },
			"Add":            func() { s.AddHashedAt(now, k, 1) },
		}
		for op, f := range ops {
			t.Run(name+"/"+op, func(t *testing.T) {
				msg := sketchtest.Panics(f)
				if msg == "" {
					t.Fatalf("%s accepted a %s Hashed", op, name)
				}
				t.Logf("panic: %s", msg)
			})
		}
	}
	if got := s.QueryString("k"); got != 0 {
		t.Fatalf("a refused Hashed wrote: Query = %v", got)
	}
}

// TestHashedAllocs: hashing, prefetching and every Hashed method allocate
// nothing.
func TestHashedAllocs(t *testing.T) {
	s := mustNewEngine(t, sketch.Config{Levels: 4, CellsPerLevel: 1024, Hi: 1e9, Hasher: sketch.SipHash()})
	key := []byte("client-42")
	f := func() {
		now := time.Now()
		k := s.Hash(key)
		s.Prefetch(k)
		s.UpdateHashedAt(now, k, 1)
		_ = s.QueryHashedAt(now, k)
		_ = s.UpdateAndQueryHashedAt(now, k, 1)
		rc, _ := s.TryReserveHashedAt(now, k, 1, 1e9)
		s.Refund(&rc)
		rc = s.AddHashedAt(now, k, 1)
		s.Refund(&rc)
		_ = s.HashString("client-42")
	}
	if n := testing.AllocsPerRun(200, f); n != 0 {
		t.Fatalf("the Hashed methods allocate %v times per round; want 0", n)
	}
}

// TestPrefetchAddresses: the addresses Prefetch hands to hw.Prefetch
// (computed without bounds checks) are the key's cells, for every level
// count and row size, including rows padded to whole cache lines.
func TestPrefetchAddresses(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s, err := newEngine(sketch.Config{
			Levels:        uint32(rapid.IntRange(1, sketch.MaxLevels).Draw(t, "L")),
			CellsPerLevel: uint32(rapid.IntRange(1, 5000).Draw(t, "M")),
			Hi:            10,
			Seed:          rapid.Uint64().Draw(t, "seed"),
		})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 50 {
			if k := s.HashString(fmt.Sprint("key-", i)); !core.CheckLines(s, k) {
				t.Fatalf("Prefetch addresses of key-%d are not its cells", i)
			}
		}
	})
}
