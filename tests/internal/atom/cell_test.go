package atom_test

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"testing"
	"unsafe"

	"pgregory.net/rapid"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/atom"
)

// TestCellSize: a Cell is exactly one 64-bit word, 8-byte aligned, so that
// sketch levels can lay cells out densely.
func TestCellSize(t *testing.T) {
	var c atom.Cell
	if s, a := unsafe.Sizeof(c), unsafe.Alignof(c); s != 8 || a != 8 {
		t.Fatalf("Cell: Sizeof = %d, Alignof = %d, want 8, 8", s, a)
	}
	if s := unsafe.Sizeof(atom.Word(0)); s != 8 {
		t.Fatalf("Word: Sizeof = %d, want 8", s)
	}
}

func TestZeroCell(t *testing.T) {
	var c atom.Cell
	if w := c.Load(); w != 0 {
		t.Fatalf("zero Cell holds %#x, want 0", uint64(w))
	}
	r := atom.NewRules(nil, -10, 10)
	if w := c.Add(r, 5, 3, c.Load()); w.Score() != 3 || w.Stamp() != 5 || c.Load() != w {
		t.Fatalf("Add on a zero Cell = (%v, %d), cell holds %#x", w.Score(), w.Stamp(), uint64(c.Load()))
	}
}

// TestHorizon sets stamps next to both edges of the 2^31 ms horizon and
// checks what doc.go documents: an idle of 2^31-1 ms decays; an idle of
// 2^31 .. 2^32-1 ms reads as no aging (score unchanged, never grown, stamp
// kept); an idle of 2^32+k ms reads as k ms.
func TestHorizon(t *testing.T) {
	const (
		half = 1 << 31
		full = 1 << 32
	)
	d := decay.Exponential(10) // 5 ms: factor exp(-0.05)
	r := atom.NewRules(d, -1e6, 1e6)
	tests := []struct {
		name   string
		idle   int64 // true idle time in ms
		decays bool
		asIf   int64 // the idle time it is read as
	}{
		{"idle=0", 0, false, 0},
		{"idle=5", 5, true, 5},
		{"idle=2^31-1", half - 1, true, half - 1},
		{"idle=2^31", half, false, 0},
		{"idle=2^31+1", half + 1, false, 0},
		{"idle=2^32-1", full - 1, false, 0},
		{"idle=2^32", full, false, 0},
		{"idle=2^32+5", full + 5, true, 5},
		{"idle=2^32+2^31-1", full + half - 1, true, half - 1},
		{"idle=2^32+2^31", full + half, false, 0},
	}
	stamps := []uint32{0, 1, half - 1, half, half + 1, full - 6, full - 1}
	for _, tt := range tests {
		for _, stamp := range stamps {
			for _, score := range []float32{1000, -1000} {
				t.Run(fmt.Sprintf("%s/stamp=%d/score=%v", tt.name, stamp, score), func(t *testing.T) {
					now := stamp + uint32(tt.idle) // the owner's clock, truncated
					var c atom.Cell
					old := atom.Pack(score, stamp)
					c.Store(old)
					got := c.Add(r, now, 0, c.Load())
					if c.Load() != got {
						t.Fatalf("Add returned %#x, cell holds %#x", uint64(got), uint64(c.Load()))
					}
					if math.Abs(float64(got.Score())) > math.Abs(float64(score)) {
						t.Fatalf("score grew: %v -> %v", score, got.Score())
					}
					if !tt.decays {
						if got != old {
							t.Fatalf("idle %d ms: cell became (%v, %d), want unchanged (%v, %d)",
								tt.idle, got.Score(), got.Stamp(), score, stamp)
						}
						return
					}
					want := atom.RoundUp(d.Apply(float64(score), tt.asIf))
					if got.Score() != want || got.Stamp() != now {
						t.Fatalf("idle %d ms: cell became (%v, %d), want (%v, %d) as after %d ms",
							tt.idle, got.Score(), got.Stamp(), want, now, tt.asIf)
					}
					if got.Score() == score {
						t.Fatalf("idle %d ms: score %v did not decay", tt.idle, score)
					}
				})
			}
		}
	}
}

// TestAddSequential runs random Add sequences on a Cell and on a float64
// model with no decay, integer deltas and clamping; they must agree exactly
// (integers below 2^24 are exact in float32).
func TestAddSequential(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		lo := float64(rapid.IntRange(-5000, 0).Draw(t, "lo"))
		hi := float64(rapid.IntRange(1, 5000).Draw(t, "hi"))
		r := atom.NewRules(rapid.SampledFrom([]decay.Decay{nil, decay.None()}).Draw(t, "law"), lo, hi)
		var c atom.Cell
		model, modelStamp := 0.0, uint32(0)
		now := rapid.Uint32().Draw(t, "start")
		n := rapid.IntRange(1, 200).Draw(t, "n")
		for i := range n {
			now += uint32(rapid.Int32Range(-1000, 1000).Draw(t, fmt.Sprintf("step%d", i)))
			delta := float64(rapid.IntRange(-3000, 3000).Draw(t, fmt.Sprintf("delta%d", i)))
			model = clamp(model+delta, lo, hi)
			modelStamp = atom.Newer(modelStamp, now)
			w := c.Add(r, now, delta, c.Load())
			if float64(w.Score()) != model || w.Stamp() != modelStamp || c.Load() != w {
				t.Fatalf("op %d (now %d, delta %v): cell (%v, %d), returned %#x, model (%v, %d)",
					i, now, delta, c.Load().Score(), c.Load().Stamp(), uint64(w), model, modelStamp)
			}
		}
	})
}

// TestAddStaleWordRetries: a stale word that differs from the result costs
// a retry and no update is lost.
func TestAddStaleWordRetries(t *testing.T) {
	r := atom.NewRules(nil, -100, 100)
	var c atom.Cell
	c.Store(atom.Pack(5, 0))
	w := c.Add(r, 0, 1, atom.Pack(0, 0)) // stale view: 0
	if w.Score() != 6 || c.Load() != w {
		t.Fatalf("Add with a stale word: returned %v, cell holds %v, want 6", w.Score(), c.Load().Score())
	}
}

// TestAddStaleWordNoOp: a stale view that is already at the result
// (clamped at Hi, a delta absorbed by float32 rounding, or delta 0) must
// not short-circuit Add: only the CAS proves the cell holds the word, so
// the delta reaches the cell's real value and Add returns what it stored.
func TestAddStaleWordNoOp(t *testing.T) {
	tests := []struct {
		name         string
		hi           float64
		cell, stale  float32
		delta        float64
		wantInCell   float32
		wantReturned float32
	}{
		// Stale view at Hi: +1 clamps to Hi, nothing is stored; the cell
		// keeps 0 instead of 1.
		{"clamped-at-hi", 10, 0, 10, 1, 1, 1},
		// Stale view large: -0.01 is absorbed by RoundUp at 1e6; the
		// cell keeps 0.5 instead of 0.49.
		{"absorbed-by-rounding", 2e6, 0.5, 1e6, -0.01, atom.RoundUp(0.5 - 0.01), atom.RoundUp(0.5 - 0.01)},
		// delta 0: Add reports a word the cell never held.
		{"zero-delta", 10, 3, 7, 0, 3, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := atom.NewRules(nil, -10, tt.hi)
			var c atom.Cell
			c.Store(atom.Pack(tt.cell, 0))
			w := c.Add(r, 0, tt.delta, atom.Pack(tt.stale, 0))
			if got := c.Load().Score(); got != tt.wantInCell || w.Score() != tt.wantReturned {
				t.Fatalf("cell held %v, stale view %v, Add(%v): returned %v, cell holds %v; want %v in both",
					tt.cell, tt.stale, tt.delta, w.Score(), got, tt.wantInCell)
			}
		})
	}
}

// TestAddContention: G goroutines add a known pattern to one Cell with no
// decay; the total must be exact at every GOMAXPROCS, and the stamp must
// end at the latest now.
func TestAddContention(t *testing.T) {
	const g = 8
	iters := 30_000
	if testing.Short() {
		iters = 3_000
	}
	pattern := []float64{+1, +2, -1, +3, -2} // sums to 3
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{1, 2, 4, 8} {
		t.Run(fmt.Sprintf("procs=%d", procs), func(t *testing.T) {
			runtime.GOMAXPROCS(procs)
			r := atom.NewRules(decay.None(), -1e9, 1e9)
			var c atom.Cell
			var want float64
			for id := range g {
				for i := range iters {
					want += pattern[(i+id)%len(pattern)]
				}
			}
			if want >= 1<<24 {
				t.Fatalf("test bug: total %v is not exact in float32", want)
			}
			var wg sync.WaitGroup
			for id := range g {
				wg.Go(func() {
					for i := range iters {
						now := uint32(i) // each goroutine's clock runs 0..iters-1
						d := pattern[(i+id)%len(pattern)]
						w := c.Load()
						if id%2 == 1 {
							// Half the goroutines pass a stale word,
							// as the loser of a race would.
							w = 0
						}
						c.Add(r, now, d, w)
					}
				})
			}
			wg.Wait()
			w := c.Load()
			if float64(w.Score()) != want || w.Stamp() != uint32(iters-1) {
				t.Fatalf("after %d goroutines x %d adds: cell (%v, %d), want (%v, %d)",
					g, iters, w.Score(), w.Stamp(), want, iters-1)
			}
		})
	}
}

// TestAddAllocs: Add does not allocate, whatever the law.
func TestAddAllocs(t *testing.T) {
	for _, d := range []decay.Decay{decay.None(), decay.Linear(1), decay.Exponential(1), customExp{1}} {
		r := atom.NewRules(d, -1e6, 1e6)
		var c atom.Cell
		now := uint32(0)
		if n := testing.AllocsPerRun(1000, func() {
			now += 17
			c.Add(r, now, 1, c.Load())
			c.Add(r, now, 1, 0) // a stale word: one lost CAS, then the loop
		}); n != 0 {
			t.Errorf("%T: Add allocates %v times per call", d, n)
		}
	}
}
