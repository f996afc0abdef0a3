package core_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

func newCU(t testing.TB, levels, cells uint32, d decay.Decay, hi float64, clk *sketchtest.FakeClock) *core.Sketch {
	t.Helper()
	cfg := core.Config{Levels: levels, CellsPerLevel: cells, Decay: d, Hi: hi, Seed: 3, Conservative: true}
	if clk != nil {
		cfg.Clock = clk
	}
	s, err := core.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestConservativeConfig: conservative update needs Min; it refuses
// negative deltas; its receipts give nothing back.
func TestConservativeConfig(t *testing.T) {
	for _, agg := range []core.Aggregator{core.Max, core.Mean} {
		_, err := core.New(core.Config{Hi: 10, Aggregator: agg, Conservative: true})
		var ce *sketch.ConfigError
		if !errors.As(err, &ce) || ce.Field != "Conservative" {
			t.Errorf("%v: %v", agg, err)
		}
	}
	_, err := core.New(core.Config{Hi: 10, AggregateFunc: func(v []float64) float64 { return v[0] }, Conservative: true})
	if err == nil {
		t.Error("AggregateFunc accepted")
	}
	s := newCU(t, 4, 64, nil, 100, nil)
	for name, f := range map[string]func(){
		"Update":         func() { s.UpdateString("k", -1) },
		"UpdateAndQuery": func() { s.UpdateAndQueryString("k", -1) },
		"TryUpdate":      func() { s.TryUpdateString("k", -1, 10) },
	} {
		func() {
			defer func() {
				if r, _ := recover().(string); !strings.Contains(r, "no negative delta") {
					t.Errorf("%s(-1): panic %q", name, r)
				}
			}()
			f()
		}()
	}
	rc, ok := s.TryReserveStringAt(time.Now(), "k", 3, 10)
	if !ok {
		t.Fatal("reservation denied")
	}
	if s.Refund(&rc) || s.QueryString("k") != 3 {
		t.Fatalf("Refund gave back: now %v", s.QueryString("k"))
	}
	if r := s.AddStringAt(time.Now(), "j", 2); s.Refund(&r) || s.QueryString("j") != 2 {
		t.Fatal("Refund of an Add gave back")
	}
}

// TestConservativeLighter: a light key that shares one of its two cells
// with a heavy key leaves that cell as it is, where a plain count-min
// adds to it; both read the heavy key at least at its truth, and the
// light key exactly (its other cell is its own).
func TestConservativeLighter(t *testing.T) {
	plain, err := core.New(core.Config{Levels: 2, CellsPerLevel: 64, Hi: 1e6, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	cu := newCU(t, 2, 64, nil, 1e6, nil)
	idx := func(s *core.Sketch, key string) [2]uint32 {
		_, ls := core.DetailedAt(s, time.Now(), key, func(_, index uint32, _ float64) uint32 { return index })
		return [2]uint32{ls[0], ls[1]}
	}
	h := idx(cu, "heavy")
	light := ""
	for i := 0; light == ""; i++ {
		k := fmt.Sprint("light-", i)
		if x := idx(cu, k); x[0] == h[0] && x[1] != h[1] {
			light = k
		}
	}
	for _, s := range []*core.Sketch{plain, cu} {
		s.UpdateString("heavy", 100)
		for range 10 {
			s.UpdateString(light, 1)
		}
	}
	shared := func(s *core.Sketch) float64 {
		_, ls := core.DetailedAt(s, time.Now(), "heavy", func(_, _ uint32, v float64) float64 { return v })
		return ls[0]
	}
	if got := shared(plain); got != 110 {
		t.Fatalf("plain: the shared cell holds %v, want 110", got)
	}
	if got := shared(cu); got != 100 {
		t.Fatalf("conservative: the shared cell holds %v, want 100 (the light key's writes are below it)", got)
	}
	if got := cu.QueryString(light); got != 10 {
		t.Fatalf("conservative light %v, want 10", got)
	}
	alone := newCU(t, 4, 1<<12, nil, 1e6, nil)
	for i := range 50 {
		alone.UpdateString("k", float64(i%3))
	}
	if got := alone.QueryString("k"); got != 49 {
		t.Fatalf("a key alone reads %v, want 49", got)
	}
}

// TestConservativeOneSided: random Update, UpdateAndQuery and TryUpdate
// of 200 keys in 4 x 16 cells under a linear law, with time moving:
// every key always reads at least its true debt (the exact bucket of its
// admitted and added writes), and UpdateAndQuery returns what Query reads.
func TestConservativeOneSided(t *testing.T) {
	testsize.Serial(t)
	for seed := range uint64(20) {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_000_000)
		const rate, hi = 1000.0, 50.0 // 1 per ms
		s := newCU(t, 4, 16, decay.Linear(rate), hi, clk)
		r := rand.New(rand.NewPCG(seed, 1))
		type truth struct {
			debt float64
			at   int64
		}
		keys := make([]string, 200)
		tr := make([]truth, len(keys))
		for i := range keys {
			keys[i] = fmt.Sprint("k", i)
		}
		now := func(i int) float64 {
			dt := float64(clk.NowMillis() - tr[i].at)
			return math.Max(tr[i].debt-dt*rate/1000, 0)
		}
		for step := range 5000 {
			if r.IntN(10) == 0 {
				clk.Advance(time.Duration(r.IntN(20)) * time.Millisecond)
			}
			i := r.IntN(len(keys))
			n := float64(r.IntN(5))
			cur := now(i)
			add := func() { tr[i] = truth{math.Min(cur+n, hi), clk.NowMillis()} }
			switch r.IntN(3) {
			case 0:
				s.UpdateString(keys[i], n)
				add()
			case 1:
				v := s.UpdateAndQueryString(keys[i], n)
				add()
				if q := s.QueryString(keys[i]); v != q {
					t.Fatalf("seed %d step %d: UpdateAndQuery %v, Query %v", seed, step, v, q)
				}
			case 2:
				if s.TryUpdateString(keys[i], n, 30) {
					add()
				}
			}
			for j := range keys {
				if j != i && step%25 != 0 {
					continue // every key every 25 steps; the one written at each
				}
				if q, w := s.QueryString(keys[j]), now(j); q < w-1e-9 {
					t.Fatalf("seed %d step %d: key %d reads %v below its debt %v", seed, step, j, q, w)
				}
			}
		}
	}
}

// TestConservativeConcurrent: 8 goroutines racing on one key: Update
// loses no increment (every write of a key is serialized on its
// stripe), TryUpdate admits exactly the limit; and racing writes of 40
// keys in 2 x 4 cells leave every key at or above its total.
func TestConservativeConcurrent(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		s := newCU(t, 4, 1<<10, nil, 1e9, nil)
		var admitted atomic.Int64
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 500 {
					s.UpdateString("u", 1)
					if s.TryUpdateString("t", 1, 1000) {
						admitted.Add(1)
					}
				}
			})
		}
		wg.Wait()
		if got := s.QueryString("u"); got != 4000 {
			t.Fatalf("8 x 500 racing Updates read %v", got)
		}
		if admitted.Load() != 1000 || s.QueryString("t") != 1000 {
			t.Fatalf("admitted %d (reads %v), want exactly 1000", admitted.Load(), s.QueryString("t"))
		}

		c := newCU(t, 2, 4, nil, 1e9, nil)
		var tot [40]atomic.Int64
		for g := range 8 {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(g), 2))
				for range 2000 {
					k := r.IntN(len(tot))
					n := float64(r.IntN(3))
					if r.IntN(2) == 0 {
						c.UpdateString(fmt.Sprint("c", k), n)
						tot[k].Add(int64(n))
					} else if c.TryUpdateString(fmt.Sprint("c", k), n, 1e6) {
						tot[k].Add(int64(n))
					}
				}
			})
		}
		wg.Wait()
		for k := range tot {
			if q := c.QueryString(fmt.Sprint("c", k)); q < float64(tot[k].Load()) {
				t.Fatalf("key %d reads %v below its total %d", k, q, tot[k].Load())
			}
		}
	})
}
