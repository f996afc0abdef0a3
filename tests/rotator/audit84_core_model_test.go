package rotator_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// audit84coreIdx hashes "k<i>" to cell i of every level whatever the seed
// (M=256), so the model below has no collisions to account for.
type audit84coreIdx struct{}

func (audit84coreIdx) Sum64(key []byte) uint64 { return audit84coreIdx{}.Sum64String(string(key)) }
func (audit84coreIdx) Sum64String(key string) uint64 {
	i, err := strconv.Atoi(key[1:])
	if err != nil {
		panic(err)
	}
	return uint64(i) << 24
}

// audit84coreModel is the documented rotator: N generations, read the
// oldest, write all, the oldest retired at each deadline (creation + j
// Periods), k periods skipped at once retiring min(k, N); time through a
// high-water mark, an explicit time capped at the clock.
type audit84coreModel struct {
	n, p, deadline, hw int64
	lo, hi             float64
	gens               []map[string]float64
	periods            int64
}

func (m *audit84coreModel) settle(now int64) {
	for now >= m.deadline {
		k := (now-m.deadline)/m.p + 1
		drop := min(k, m.n)
		m.gens = m.gens[drop:]
		for int64(len(m.gens)) < m.n {
			m.gens = append(m.gens, map[string]float64{})
		}
		m.deadline += k * m.p
		m.periods += k
	}
}

func (m *audit84coreModel) time(t, clock int64) int64 {
	t = min(t, clock)
	m.hw = max(m.hw, t)
	return m.hw
}

func (m *audit84coreModel) add(k string, d float64) {
	for _, g := range m.gens {
		g[k] = math.Min(m.hi, math.Max(m.lo, g[k]+d))
	}
}

// TestAudit84CoreRotatorModel: Generations 2..8, Periods of 1 ms, 2.9 ms
// (3), 1 s; short forms and At forms of every kind of time, TryUpdate across
// rotations, long idle (thousands of periods at once) and backwards clock
// steps, against the documented model, exactly (no decay, integer deltas).
func TestAudit84CoreRotatorModel(t *testing.T) {
	for n := uint32(2); n <= 8; n++ {
		for _, p := range []time.Duration{time.Millisecond, 2900 * time.Microsecond, time.Second} {
			t.Run(fmt.Sprintf("N%d/%v", n, p), func(t *testing.T) {
				audit84coreRunModel(t, n, p, uint64(n)*7+uint64(p))
			})
		}
	}
}

func audit84coreRunModel(t *testing.T, n uint32, p time.Duration, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 84))
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	r, err := rotator.New(rotator.Config{
		Sketch: sketch.Config{Levels: 2, CellsPerLevel: 256, Lo: -1000, Hi: 1000, Clock: clk,
			Hasher: func(uint64) sketch.Hasher { return audit84coreIdx{} }},
		Generations: n, Period: p,
	})
	if err != nil {
		t.Fatal(err)
	}
	pm := (int64(p) + int64(time.Millisecond) - 1) / int64(time.Millisecond)
	m := &audit84coreModel{n: int64(n), p: pm, deadline: 1_000_000 + pm, hw: 1_000_000, lo: -1000, hi: 1000}
	for range n {
		m.gens = append(m.gens, map[string]float64{})
	}
	for i := range 1500 {
		switch x := rng.IntN(100); {
		case x < 50:
			clk.Advance(time.Duration(rng.Int64N(2*pm)) * time.Millisecond)
		case x < 60:
			clk.Advance(-time.Duration(rng.Int64N(5*pm)) * time.Millisecond)
		case x < 62:
			clk.Advance(time.Duration(rng.Int64N(5000*pm)) * time.Millisecond)
		}
		now := clk.NowMillis()
		k := "k" + strconv.Itoa(rng.IntN(6))
		d := float64(rng.IntN(30) - 8)
		lim := float64(rng.IntN(200) - 20)
		tms := now
		var tt time.Time
		switch rng.IntN(4) {
		case 0:
			tt = clk.Now()
		case 1:
			tms = now - rng.Int64N(3*pm+1)
			tt = time.UnixMilli(tms)
		case 2:
			tms = now + rng.Int64N(3*pm+1)
			tt = time.UnixMilli(tms)
		case 3:
			tt = time.Time{}
			tms = math.MinInt64
		}
		op := rng.IntN(8)
		var eff int64
		if op < 4 {
			eff = m.time(now, now)
		} else {
			eff = m.time(tms, now)
		}
		m.settle(eff)
		var got, want any
		switch op {
		case 0, 4:
			if op == 0 {
				r.UpdateString(k, d)
			} else {
				r.UpdateAt(tt, k, d)
			}
			m.add(k, d)
		case 1, 5:
			if op == 1 {
				got = r.QueryString(k)
			} else {
				got = r.QueryAt(tt, k)
			}
			want = m.gens[0][k]
		case 2, 6:
			if op == 2 {
				got = r.UpdateAndQueryString(k, d)
			} else {
				got = r.UpdateAndQueryAt(tt, k, d)
			}
			m.add(k, d)
			want = m.gens[0][k]
		case 3, 7:
			if op == 3 {
				got = r.TryUpdateString(k, d, lim)
			} else {
				got = r.TryUpdateAt(tt, k, d, lim)
			}
			ok := m.gens[0][k]+d <= lim
			if ok {
				m.add(k, d)
			}
			want = ok
		}
		if got != want {
			t.Fatalf("step %d op %d %s d=%v lim=%v t=%d clock=%d eff=%d: got %v, want %v", i, op, k, d, lim, tms, now, eff, got, want)
		}
		if st := r.Stats(); int64(st.Periods) != m.periods {
			t.Fatalf("step %d: Stats.Periods = %d, model %d", i, st.Periods, m.periods)
		}
	}
}

// TestAudit84CoreRotatorWindow: a write made in period m (counted from
// New) is read until the start of period m+N and not after: "A generation
// becomes primary after N-1 periods of writes ... and retires one period
// later"; "a write is gone from every generation at most N x Period after
// it was made".
func TestAudit84CoreRotatorWindow(t *testing.T) {
	for n := uint32(2); n <= 8; n++ {
		for _, off := range []int64{0, 999} {
			clk := sketchtest.NewFakeClock()
			r, err := rotator.New(rotator.Config{Sketch: sketch.Config{Levels: 2, CellsPerLevel: 64, Hi: 100, Clock: clk},
				Generations: n, Period: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			clk.Set(2000 + off) // period 2
			r.UpdateString("a", 1)
			end := int64(2+n) * 1000
			clk.Set(end - 1)
			if got := r.QueryString("a"); got != 1 {
				t.Fatalf("N=%d off=%d: read %v 1 ms before period %d; want 1", n, off, got, 2+n)
			}
			clk.Set(end + 5)
			if got := r.QueryAt(time.UnixMilli(end), "a"); got != 0 {
				t.Fatalf("N=%d off=%d: read %v at period %d; want 0", n, off, got, 2+n)
			}
		}
	}
}

// TestAudit84CoreRotatorHugePeriod: a Period near the largest Duration does
// not overflow the deadline: nothing rotates, scores stay.
func TestAudit84CoreRotatorHugePeriod(t *testing.T) {
	for _, p := range []time.Duration{math.MaxInt64, 1 << 62, 100 * 365 * 24 * time.Hour} {
		clk := sketchtest.NewFakeClock()
		clk.Set(math.MaxInt64 / 4)
		r, err := rotator.New(rotator.Config{Sketch: sketch.Config{Levels: 2, CellsPerLevel: 64, Hi: 100, Clock: clk},
			Generations: 4, Period: p})
		if err != nil {
			t.Fatalf("Period %v: %v", p, err)
		}
		r.UpdateString("a", 5)
		clk.Advance(50 * 365 * 24 * time.Hour)
		if got := r.QueryString("a"); got != 5 {
			t.Fatalf("Period %v: read %v after 50 years; want 5", p, got)
		}
		if st := r.Stats(); st.Periods != 0 {
			t.Fatalf("Period %v: %d periods after 50 years", p, st.Periods)
		}
	}
	for _, p := range []time.Duration{0, -time.Millisecond, time.Nanosecond, 999 * time.Microsecond} {
		if p == 0 {
			continue // 0 may mean a default; not checked here
		}
		_, err := rotator.New(rotator.Config{Sketch: sketch.Config{Hi: 1}, Period: p})
		if err == nil {
			t.Fatalf("Period %v accepted; want an error (at least 1 ms)", p)
		}
		var ce *sketch.ConfigError
		if !errors.As(err, &ce) || ce.Field != "Period" {
			t.Fatalf("Period %v: error %v; want a *ConfigError naming Period", p, err)
		}
	}
}

// TestAudit84CoreFixedRotatorFarFutureAt: "an At time ahead of the clock counts
// as the clock's reading" (sketch's package doc; the rotator: "The time
// drives decay and rotation alike"). With the clock 3 periods past the
// write, a time.Time beyond about 292 million years ahead must read as at
// the clock: the write forgotten. It reads as at the last time used.
func TestAudit84CoreFixedRotatorFarFutureAt(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	r, err := rotator.New(rotator.Config{Sketch: sketch.Config{Levels: 2, CellsPerLevel: 64, Hi: 100, Clock: clk},
		Generations: 2, Period: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r.UpdateString("a", 5)
	clk.Advance(3 * time.Second)
	if got := r.QueryAt(time.Unix(1<<62, 0), "a"); got != 0 {
		t.Errorf("QueryAt(far future) = %v with the clock 3 periods on; want 0 (read at the clock's reading)", got)
	}
	if got := r.QueryAt(clk.Now().Add(1000*time.Hour), "a"); got != 0 {
		t.Errorf("QueryAt(1000 h ahead) = %v; want 0", got)
	}
}
