package grudge_test

import (
	"fmt"
	"math"
	"math/rand"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
)

// audit24GModel is the exact model of grudge's rotator for keys alone in
// their cells: N generations, oldest first, writes to all, reads from the
// oldest. lazy: a call at or past the deadline retires k = elapsed
// periods (all generations when k >= N) and the deadline stays on its
// grid; ticked: each tick retires exactly one, whatever the clock. Every
// call happens at the clock's reading through a high-water mark (a step
// back counts as no time). Decay is linear at rate units per ms.
type audit24GModel struct {
	n, p      int64
	rate, hi  float64
	gens      []map[string][2]float64 // key -> {value, stamp}
	deadline  int64
	hw        int64
	rotations int64
}

func newAudit24GModel(n, p, start int64, rate, hi float64) *audit24GModel {
	m := &audit24GModel{n: n, p: p, rate: rate, hi: hi, deadline: start + p, hw: start}
	for i := int64(0); i < n; i++ {
		m.gens = append(m.gens, map[string][2]float64{})
	}
	return m
}

func (m *audit24GModel) retire(k int64) {
	m.gens = m.gens[min(k, m.n):]
	for int64(len(m.gens)) < m.n {
		m.gens = append(m.gens, map[string][2]float64{})
	}
	m.rotations += k
}

// at is the time of a call at clock reading c; lazy promotes.
func (m *audit24GModel) at(c int64, lazy bool) int64 {
	m.hw = max(m.hw, c)
	if lazy && m.hw >= m.deadline {
		over := m.hw - m.deadline
		m.retire(over/m.p + 1)
		m.deadline = m.hw - over%m.p + m.p
	}
	return m.hw
}

func (m *audit24GModel) value(g map[string][2]float64, key string, at int64) float64 {
	e, ok := g[key]
	if !ok {
		return 0
	}
	return math.Max(0, e[0]-m.rate*(float64(at)-e[1]))
}

func (m *audit24GModel) write(key string, d float64, at int64) {
	for _, g := range m.gens {
		g[key] = [2]float64{math.Min(m.hi, m.value(g, key, at)+d), float64(at)}
	}
}

func audit24GClose(got, want float64) bool {
	return got >= want-1e-9 && got <= want+1e-5*math.Max(1, want)
}

// audit24GRun drives a grudge.Rotator (lazy, or ticked when ticker is
// set) and the model with the same random calls, clock steps both ways,
// long idle times and ticks, comparing every answer and Rotations.
func audit24GRun(t *testing.T, seed int64, n uint32, p time.Duration, rate float64, ticked bool) {
	rng := rand.New(rand.NewSource(seed))
	clk := grudgetest.NewFakeClock()
	start := time.UnixMilli(1_700_000_000_000)
	clk.Set(start)
	cfg := grudge.RotatorConfig{
		Sketch:      grudge.Config{CellsPerLevel: 1 << 14, Lo: 0, Hi: 1e6, Clock: clk},
		Generations: n, Period: p,
	}
	if rate > 0 {
		cfg.Sketch.Decay = grudge.Linear(rate * 1000)
	}
	var tk *grudgetest.FakeTicker
	if ticked {
		tk = grudgetest.NewFakeTicker()
		cfg.Ticker = tk
	}
	rot, err := grudge.NewRotator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer rot.Close()
	pm := p.Milliseconds()
	s0 := start.UnixMilli()
	m := newAudit24GModel(int64(n), pm, s0, rate, 1e6)
	keys := []string{"alpha", "beta", "gamma", "delta"}
	for i := 0; i < 300; i++ {
		switch c := rng.Intn(20); {
		case c < 8:
			clk.Advance(time.Duration(rng.Int63n(pm+1)) * time.Millisecond)
		case c < 10 && !ticked:
			clk.Set(time.UnixMilli(m.deadline))
		case c < 12 && !ticked:
			clk.Set(time.UnixMilli(m.deadline - 1))
		case c < 14:
			clk.Advance(-time.Duration(rng.Int63n(3*pm+1)) * time.Millisecond)
		case c < 15:
			clk.Advance(time.Duration(int64(n)+rng.Int63n(3000)) * p)
		case c < 17 && ticked:
			tk.Tick()
			m.at(clk.NowMillis(), false) // Rotate reads the clock
			m.retire(1)
		}
		c := clk.NowMillis()
		key := keys[rng.Intn(len(keys))]
		d := float64(1 + rng.Intn(20))
		var got, want float64
		what := ""
		switch rng.Intn(4) {
		case 0:
			at := m.at(c, !ticked)
			rot.Update([]byte(key), d)
			m.write(key, d, at)
			what = "Update"
			got, want = rot.Query([]byte(key)), m.value(m.gens[0], key, m.at(c, !ticked))
		case 1:
			at := m.at(c, !ticked)
			got, want = rot.Query([]byte(key)), m.value(m.gens[0], key, at)
			what = "Query"
		case 2:
			at := m.at(c, !ticked)
			got = rot.UpdateAndQuery([]byte(key), d)
			m.write(key, d, at)
			want = m.value(m.gens[0], key, at)
			what = "UpdateAndQuery"
		case 3:
			limit := float64(rng.Intn(80))
			at := m.at(c, !ticked)
			before := m.value(m.gens[0], key, at)
			ok := rot.TryUpdate([]byte(key), d, limit)
			if wantOK := before+d <= limit; ok != wantOK && math.Abs(before+d-limit) > 1e-4 {
				t.Fatalf("seed %d step %d: TryUpdate(%s, %v, %v) = %v, want %v (primary %v)", seed, i, key, d, limit, ok, wantOK, before)
			}
			if ok {
				m.write(key, d, at)
			}
			what = "TryUpdate"
			got, want = rot.Query([]byte(key)), m.value(m.gens[0], key, m.at(c, !ticked))
		}
		if !audit24GClose(got, want) {
			t.Fatalf("seed %d step %d: after %s(%s, %v) at clock %d: got %v, want %v", seed, i, what, key, d, c-s0, got, want)
		}
		r := rot.Rotations()
		m.at(c, !ticked) // Rotations is an access at the clock's reading
		if r != m.rotations {
			t.Fatalf("seed %d step %d: Rotations = %d, want %d", seed, i, r, m.rotations)
		}
		if dq := rot.QueryDetailed([]byte(key)); !audit24GClose(dq.Aggregate, m.value(m.gens[0], key, m.at(c, !ticked))) {
			t.Fatalf("seed %d step %d: QueryDetailed.Aggregate = %v, want %v", seed, i, dq.Aggregate, m.value(m.gens[0], key, m.hw))
		}
	}
}

// TestAudit24GrudgeRotatorOracle: the façade's lazy and ticked rotators
// against the exact model, with no decay and with linear decay.
func TestAudit24GrudgeRotatorOracle(t *testing.T) {
	for _, ticked := range []bool{false, true} {
		for _, rate := range []float64{0, 0.1} {
			for _, n := range []uint32{2, 3} {
				for seed := int64(1); seed <= 4; seed++ {
					name := fmt.Sprintf("ticked=%v/rate=%v/N=%d/seed=%d", ticked, rate, n, seed)
					t.Run(name, func(t *testing.T) {
						audit24GRun(t, seed, n, 40*time.Millisecond, rate, ticked)
					})
				}
			}
		}
	}
}

// TestAudit24GrudgeTicksRacingCalls: Rotate (a FakeTicker's ticks) racing
// TryUpdate and Update on colliding keys, two ticks with N = 3: the last
// primary was live throughout, so exactly the limit is admitted and every
// key reads the conserved sum of what was admitted and added.
func TestAudit24GrudgeTicksRacingCalls(t *testing.T) {
	for _, procs := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("procs=%d", procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			for rep := 0; rep < 3; rep++ {
				tk := grudgetest.NewFakeTicker()
				rot, err := grudge.NewRotator(grudge.RotatorConfig{
					Sketch:      grudge.Config{Levels: 2, CellsPerLevel: 1, Lo: 0, Hi: 1e9, Clock: grudgetest.NewFakeClock()},
					Generations: 3, Ticker: tk,
				})
				if err != nil {
					t.Fatal(err)
				}
				const limit = 300
				var admitted, added, done atomic.Int64
				var wg sync.WaitGroup
				for w := 0; w < 6; w++ {
					wg.Add(1)
					go func(w int) {
						defer wg.Done()
						for i := 0; i < 120; i++ {
							k := []byte(fmt.Sprintf("k%d", (w+i)%4))
							if i%4 == 3 {
								rot.Update(k, 2)
								added.Add(2)
							} else if rot.TryUpdate(k, 1, limit+1e6) == false {
								t.Error("TryUpdate under a huge limit denied")
							} else {
								admitted.Add(1)
							}
							done.Add(1)
						}
					}(w)
				}
				for _, s := range []int64{150, 400} {
					for done.Load() < s {
						runtime.Gosched()
					}
					tk.Tick()
				}
				wg.Wait()
				if r := rot.Rotations(); r != 2 {
					t.Fatalf("Rotations = %d, want 2", r)
				}
				want := float64(admitted.Load() + added.Load())
				for i := 0; i < 4; i++ {
					if q := rot.Query([]byte(fmt.Sprintf("k%d", i))); q != want {
						t.Fatalf("rep %d: Query(k%d) = %v, want the conserved sum %v", rep, i, q, want)
					}
				}
				rot.Close()
				rot.Close()
			}
		})
	}
}

// TestAudit24GrudgeTickedTryUpdateExact: TryUpdate(k, 1, 300) on colliding
// keys racing two ticks, N = 3: exactly 300 admitted.
func TestAudit24GrudgeTickedTryUpdateExact(t *testing.T) {
	for _, procs := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("procs=%d", procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			tk := grudgetest.NewFakeTicker()
			rot, err := grudge.NewRotator(grudge.RotatorConfig{
				Sketch:      grudge.Config{Levels: 2, CellsPerLevel: 1, Lo: 0, Hi: 1e9, Clock: grudgetest.NewFakeClock()},
				Generations: 3, Ticker: tk,
			})
			if err != nil {
				t.Fatal(err)
			}
			defer rot.Close()
			const limit = 300
			var admitted, done atomic.Int64
			var wg sync.WaitGroup
			for w := 0; w < 8; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					for i := 0; i < 100; i++ {
						if rot.TryUpdate([]byte(fmt.Sprintf("k%d", (w+i)%5)), 1, limit) {
							admitted.Add(1)
						}
						done.Add(1)
					}
				}(w)
			}
			for _, s := range []int64{100, 250} {
				for done.Load() < s {
					runtime.Gosched()
				}
				tk.Tick()
			}
			wg.Wait()
			if got := admitted.Load(); got != limit {
				t.Fatalf("admitted %d, want exactly %d", got, limit)
			}
		})
	}
}

// TestAudit24GrudgeCloseStopsTicks: after Close a ticked rotator no
// longer rotates (a Tick does nothing), keeps working, and Close is
// idempotent; a lazy rotator's Close is a no-op and it keeps rotating.
func TestAudit24GrudgeCloseStopsTicks(t *testing.T) {
	tk := grudgetest.NewFakeTicker()
	clk := grudgetest.NewFakeClock()
	rot, err := grudge.NewRotator(grudge.RotatorConfig{
		Sketch: grudge.Config{CellsPerLevel: 1024, Lo: 0, Hi: 1e9, Clock: clk}, Generations: 2, Ticker: tk, Period: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	rot.Update([]byte("k"), 3)
	tk.Tick()
	if r := rot.Rotations(); r != 1 {
		t.Fatalf("Rotations = %d after one tick, want 1", r)
	}
	clk.Advance(10 * time.Second) // a ticked rotator ignores the Period
	if q := rot.Query([]byte("k")); q != 3 {
		t.Fatalf("Query = %v after one tick and ten periods of clock, want 3 (ticks drive rotation)", q)
	}
	rot.Close()
	rot.Close()
	if !tk.Stopped() {
		t.Fatal("Close did not stop the Ticker")
	}
	tk.Tick()
	if r := rot.Rotations(); r != 1 {
		t.Fatalf("Rotations = %d after Close and a Tick, want 1", r)
	}
	rot.Update([]byte("k"), 1)
	if q := rot.Query([]byte("k")); q != 4 {
		t.Fatalf("Query = %v after Close, want 4", q)
	}

	lazy, err := grudge.NewRotator(grudge.RotatorConfig{
		Sketch: grudge.Config{CellsPerLevel: 1024, Lo: 0, Hi: 1e9, Clock: clk}, Generations: 2, Period: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	lazy.Update([]byte("k"), 3)
	lazy.Close()
	lazy.Close()
	clk.Advance(2 * time.Second)
	if q := lazy.Query([]byte("k")); q != 0 {
		t.Fatalf("lazy Query = %v two periods after its only write, Close called, want 0", q)
	}
	if r := lazy.Rotations(); r != 2 {
		t.Fatalf("lazy Rotations = %d, want 2", r)
	}
}
