package ref

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

func newTestSketch(t testing.TB, cfg sketch.Config) *Sketch {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	return s
}

// cellsOf returns the key's cell indexes, one per level.
func cellsOf(s *Sketch, key []byte) []uint32 {
	h := s.hasher.Sum64(key)
	idx := make([]uint32, s.levels)
	for l := range idx {
		idx[l] = core.Index(h, uint32(l), s.m)
	}
	return idx
}

// rawScores returns the key's stored (undecayed) cell scores.
func rawScores(s *Sketch, key []byte) []float64 {
	out := make([]float64, s.levels)
	for l, i := range cellsOf(s, key) {
		out[l] = s.CellScore(uint32(l), i)
	}
	return out
}

func TestCellSize(t *testing.T) {
	if got := unsafe.Sizeof(cell{}); got != 24 {
		t.Fatalf("unsafe.Sizeof(cell{}) = %d, want 24 (grudge's cell)", got)
	}
}

func TestNewAndConfig(t *testing.T) {
	s := newTestSketch(t, sketch.Config{Hi: 1})
	cfg := s.Config()
	if cfg.Levels != sketch.DefaultLevels || cfg.CellsPerLevel != sketch.DefaultCellsPerLevel ||
		cfg.Decay == nil || cfg.Hasher == nil || cfg.Aggregator != sketch.Min || cfg.Clock != nil {
		t.Fatalf("Config() = %+v, want defaults filled and Clock nil", cfg)
	}
	sz := s.Sizes()
	if want := sketch.DefaultLevels * sketch.DefaultCellsPerLevel * 24; sz.Cells != want {
		t.Fatalf("Sizes().Cells = %d, want %d", sz.Cells, want)
	}
	if sz.Total <= sz.Cells {
		t.Fatalf("Sizes().Total = %d, want > Cells = %d", sz.Total, sz.Cells)
	}

	// New returns sketch.New's error unchanged.
	bad := sketch.Config{Levels: 9, Hi: 1}
	_, want := sketch.New(bad)
	s, err := New(bad)
	if s != nil || err == nil || err.Error() != want.Error() {
		t.Fatalf("New(Levels: 9) = %v, %v; want nil, %v", s, err, want)
	}
}

// TestLayout checks that a key owns cell core.Index(h, l, M) of each
// row, that Update touches exactly those L cells, and that the string
// twins hash to the same cells.
func TestLayout(t *testing.T) {
	for _, hf := range []sketch.HasherFactory{sketch.XXH3(), sketch.SipHash()} {
		cfg := sketch.Config{Levels: 5, CellsPerLevel: 97, Hi: 100, Hasher: hf, Seed: 42}
		s := newTestSketch(t, cfg)
		key := []byte("layout")
		h := hf(42).Sum64(key)
		d := s.QueryDetailed(key)
		for l, ld := range d.Levels {
			if ld.Level != uint32(l) || ld.Index != core.Index(h, uint32(l), 97) {
				t.Fatalf("level %d: detail %+v, want index %d", l, ld, core.Index(h, uint32(l), 97))
			}
		}
		s.Update(key, 1)
		s.UpdateString(string(key), 2)
		nonzero := 0
		for l := range uint32(5) {
			for i := range uint32(97) {
				v := s.CellScore(l, i)
				if v == 0 {
					continue
				}
				nonzero++
				if v != 3 || i != d.Levels[l].Index {
					t.Fatalf("cell (%d, %d) = %v; key's cell is %d", l, i, v, d.Levels[l].Index)
				}
			}
		}
		if nonzero != 5 {
			t.Fatalf("%d cells changed, want L = 5", nonzero)
		}
	}
}

func TestCellScoreOutOfRangePanics(t *testing.T) {
	s := newTestSketch(t, sketch.Config{Levels: 2, CellsPerLevel: 8, Hi: 1})
	for _, c := range [][2]uint32{{2, 0}, {0, 8}} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.HasPrefix(fmt.Sprint(r), "sketch: ") {
					t.Fatalf("CellScore(%d, %d): recovered %v, want a sketch: panic", c[0], c[1], r)
				}
			}()
			s.CellScore(c[0], c[1])
		}()
	}
}

// TestDeterminism runs one random operation sequence on two sketches with
// the same seed and fake clock readings: every output and every cell must
// be bit-identical.
func TestDeterminism(t *testing.T) {
	mk := func() (*Sketch, *sketchtest.FakeClock) {
		clk := sketchtest.NewFakeClock()
		return newTestSketch(t, sketch.Config{
			Levels: 4, CellsPerLevel: 128, Decay: decay.Exponential(0.3),
			Lo: -50, Hi: 500, Aggregator: sketch.Mean, Hasher: sketch.SipHash(), Seed: 7, Clock: clk,
		}), clk
	}
	a, ca := mk()
	b, cb := mk()
	rng := rand.New(rand.NewPCG(1, 2))
	keys := make([][]byte, 300)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "key-%d", i)
	}
	for step := range 20_000 {
		k := keys[rng.IntN(len(keys))]
		d := float64(rng.IntN(21) - 5)
		var ra, rb string
		switch op := rng.IntN(7); op {
		case 0:
			a.Update(k, d)
			b.Update(k, d)
		case 1:
			ra, rb = fmt.Sprint(math.Float64bits(a.Query(k))), fmt.Sprint(math.Float64bits(b.Query(k)))
		case 2:
			ra, rb = fmt.Sprint(math.Float64bits(a.UpdateAndQuery(k, d))), fmt.Sprint(math.Float64bits(b.UpdateAndQuery(k, d)))
		case 3:
			ra, rb = fmt.Sprint(a.TryUpdate(k, d, 40)), fmt.Sprint(b.TryUpdate(k, d, 40))
		case 4:
			ra, rb = fmt.Sprint(a.QueryDetailed(k)), fmt.Sprint(b.QueryDetailed(k))
		case 5:
			ra, rb = fmt.Sprint(a.UpdateAndQueryString(string(k), d)), fmt.Sprint(b.UpdateAndQueryString(string(k), d))
		case 6:
			ms := time.Duration(rng.IntN(2000)-200) * time.Millisecond
			ca.Advance(ms)
			cb.Advance(ms)
		}
		if ra != rb {
			t.Fatalf("step %d: outputs differ: %s vs %s", step, ra, rb)
		}
	}
	for i := range a.cells {
		if math.Float64bits(a.cells[i].score) != math.Float64bits(b.cells[i].score) || a.cells[i].last != b.cells[i].last {
			t.Fatalf("cell %d differs: %+v vs %+v", i, a.cells[i].score, b.cells[i].score)
		}
	}
}

// TestHasherAndSeedLayouts: SipHash and XXH3 place keys differently, and
// so do two seeds of one hasher.
func TestHasherAndSeedLayouts(t *testing.T) {
	layout := func(hf sketch.HasherFactory, seed uint64) []string {
		s := newTestSketch(t, sketch.Config{Levels: 4, CellsPerLevel: 100_000, Hi: 1, Hasher: hf, Seed: seed})
		out := make([]string, 200)
		for i := range out {
			out[i] = fmt.Sprint(cellsOf(s, fmt.Appendf(nil, "key-%d", i)))
		}
		return out
	}
	same := func(a, b []string) (n int) {
		for i := range a {
			if a[i] == b[i] {
				n++
			}
		}
		return n
	}
	x1, x2 := layout(sketch.XXH3(), 1), layout(sketch.XXH3(), 2)
	p1, p2 := layout(sketch.SipHash(), 1), layout(sketch.SipHash(), 2)
	if n := same(x1, p1); n != 0 {
		t.Errorf("XXH3 and SipHash (seed 1) place %d of 200 keys identically", n)
	}
	if n := same(x1, x2); n != 0 {
		t.Errorf("XXH3 seeds 1 and 2 place %d of 200 keys identically", n)
	}
	if n := same(p1, p2); n != 0 {
		t.Errorf("SipHash seeds 1 and 2 place %d of 200 keys identically", n)
	}
	if n := same(x1, layout(sketch.XXH3(), 1)); n != 200 {
		t.Errorf("same hasher and seed place only %d of 200 keys identically", n)
	}
}

// TestConcurrentMixed hammers a few keys with every operation while the
// clock moves both ways; under -race it checks the locking, and after it
// no cell is NaN or outside [Lo, Hi].
func TestConcurrentMixed(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	s := newTestSketch(t, sketch.Config{Levels: 4, CellsPerLevel: 16, Decay: decay.Linear(5), Lo: -20, Hi: 200, Clock: clk})
	n := 2000
	if testing.Short() {
		n = 200
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 9))
			for range n {
				k := []byte{byte(rng.IntN(6))}
				d := float64(rng.IntN(11) - 3)
				switch rng.IntN(6) {
				case 0:
					s.Update(k, d)
				case 1:
					s.Query(k)
				case 2:
					s.UpdateAndQuery(k, d)
				case 3:
					s.TryUpdate(k, d, 50)
				case 4:
					s.QueryDetailed(k)
				case 5:
					clk.Advance(time.Duration(rng.IntN(300)-50) * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	for l := range uint32(4) {
		for i := range uint32(16) {
			if v := s.CellScore(l, i); math.IsNaN(v) || v < -20 || v > 200 {
				t.Fatalf("cell (%d, %d) = %v after concurrent ops", l, i, v)
			}
		}
	}
}
