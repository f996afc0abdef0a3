package rotator_test

import (
	"fmt"
	"math"
	"math/rand"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// audit24Model is an exact model of what package rotator's doc promises a
// rotation keeps and forgets, for keys alone in their cells: N
// generations, oldest first; every operation at one time (the clock's
// reading through the high-water mark, or an At form's t, capped at the
// reading and never before the mark); an operation at or past the
// deadline retires k = (now-deadline)/P+1 generations (all of them when
// k >= N), appends fresh ones, and moves the deadline to the first point
// of its grid after now; writes go to every generation, reads to the
// oldest. Decay is linear at rate units per ms (0: none).
type audit24Model struct {
	n, p       int64
	rate       float64
	hi         float64
	gens       []*audit24Gen
	deadline   int64
	hw         int64
	promotions uint64
	periods    uint64
	built      uint64
}

type audit24Gen struct {
	v map[string]float64
	s map[string]int64
}

func newAudit24Gen() *audit24Gen {
	return &audit24Gen{v: map[string]float64{}, s: map[string]int64{}}
}

func newAudit24Model(n, p, start int64, rate, hi float64) *audit24Model {
	m := &audit24Model{n: n, p: p, rate: rate, hi: hi, deadline: start + p, hw: start}
	for i := int64(0); i < n; i++ {
		m.gens = append(m.gens, newAudit24Gen())
	}
	return m
}

// at returns the time of an operation: clock is the clock's reading, t the
// At form's time (math.MinInt64: a short form).
func (m *audit24Model) at(clock, t int64) int64 {
	ms := clock
	if t != math.MinInt64 {
		ms = min(t, clock)
	}
	m.hw = max(m.hw, ms)
	if m.hw >= m.deadline {
		over := m.hw - m.deadline
		k := over/m.p + 1
		drop := min(k, m.n)
		m.gens = m.gens[drop:]
		m.built += uint64(drop)
		for int64(len(m.gens)) < m.n {
			m.gens = append(m.gens, newAudit24Gen())
		}
		m.deadline = m.hw - over%m.p + m.p
		m.promotions++
		m.periods += uint64(k)
	}
	return m.hw
}

func (m *audit24Model) value(g *audit24Gen, key string, at int64) float64 {
	v, ok := g.v[key]
	if !ok {
		return 0
	}
	if m.rate > 0 {
		v = math.Max(0, v-m.rate*float64(at-g.s[key]))
	}
	return v
}

func (m *audit24Model) write(key string, d float64, at int64) {
	for _, g := range m.gens {
		g.v[key] = math.Min(m.hi, m.value(g, key, at)+d)
		g.s[key] = at
	}
}

func (m *audit24Model) query(key string, at int64) float64 { return m.value(m.gens[0], key, at) }

// audit24Run drives a rotator and the model with the same random
// operations under a fake clock that steps forward, back, onto deadlines
// and over long idle times, and compares every answer and Stats.
func audit24Run(t *testing.T, seed int64, n uint32, p time.Duration, rate float64, steps int, limitMs int64) {
	audit24RunCells(t, seed, n, p, rate, steps, limitMs, 1<<14)
}

func audit24RunCells(t *testing.T, seed int64, n uint32, p time.Duration, rate float64, steps int, limitMs int64, cells uint32) {
	rng := rand.New(rand.NewSource(seed))
	clk := sketchtest.NewFakeClock()
	start := int64(1_700_000_000_000)
	clk.Set(start)
	cfg := sketch.Config{CellsPerLevel: cells, Hi: 1e6, Clock: clk}
	if rate > 0 {
		cfg.Decay = decay.Linear(rate * 1000)
	}
	r := newRotator(t, rotator.Config{Sketch: cfg, Generations: n, Period: p, Prefetch: seed%2 == 0})
	pm := p.Milliseconds()
	m := newAudit24Model(int64(n), pm, start, rate, 1e6)
	keys := []string{"alpha", "beta", "gamma", "delta"}
	for i := 0; i < steps; i++ {
		// Move the clock.
		switch c := rng.Intn(20); {
		case c < 8:
			clk.Advance(time.Duration(rng.Int63n(pm+1)) * time.Millisecond)
		case c < 10:
			clk.Set(m.deadline) // exactly on the deadline
		case c < 12:
			clk.Set(m.deadline - 1)
		case c < 14:
			clk.Advance(-time.Duration(rng.Int63n(3*pm+1)) * time.Millisecond)
		case c < 15:
			clk.Advance(time.Duration(rng.Int63n(pm*int64(n)*3)) * time.Millisecond)
		case c < 16:
			// A long idle time, the clock kept within limit of its start.
			idle := time.Duration(int64(n)+rng.Int63n(5000)) * p
			if limitMs < 0 {
				clk.Advance(idle) // may wrap: a wild clock
			} else {
				clk.Set(min(clk.NowMillis()+idle.Milliseconds(), start+limitMs))
			}
		}
		clock := clk.NowMillis()
		key := keys[rng.Intn(len(keys))]
		d := float64(1 + rng.Intn(20))
		// An At form's time: stale, current or in the future.
		tms := int64(math.MinInt64)
		if rng.Intn(3) == 0 {
			tms = clock + rng.Int63n(4*pm+1) - 2*pm
		}
		tt := time.UnixMilli(tms)
		what := ""
		var got, want float64
		switch op := rng.Intn(4); op {
		case 0:
			at := m.at(clock, tms)
			if tms == math.MinInt64 {
				r.UpdateString(key, d)
			} else {
				r.UpdateAt(tt, key, d)
			}
			m.write(key, d, at)
			what = fmt.Sprintf("Update(%s, %v)", key, d)
			at = m.at(clock, math.MinInt64)
			got, want = r.QueryString(key), m.query(key, at)
		case 1:
			at := m.at(clock, tms)
			if tms == math.MinInt64 {
				got = r.QueryString(key)
			} else {
				got = r.QueryAt(tt, key)
			}
			want = m.query(key, at)
			what = fmt.Sprintf("Query(%s)", key)
		case 2:
			at := m.at(clock, tms)
			if tms == math.MinInt64 {
				got = r.UpdateAndQueryString(key, d)
			} else {
				got = r.UpdateAndQueryAt(tt, key, d)
			}
			m.write(key, d, at)
			want = m.query(key, at)
			what = fmt.Sprintf("UpdateAndQuery(%s, %v)", key, d)
		case 3:
			limit := float64(rng.Intn(80))
			at := m.at(clock, tms)
			before := m.query(key, at)
			var ok bool
			if tms == math.MinInt64 {
				ok = r.TryUpdateString(key, d, limit)
			} else {
				ok = r.TryUpdateAt(tt, key, d, limit)
			}
			wantOK := before+d <= limit
			if ok != wantOK && math.Abs(before+d-limit) > 1e-4 {
				t.Fatalf("seed %d step %d: TryUpdate(%s, %v, %v) at %d = %v, want %v (primary holds %v)",
					seed, i, key, d, limit, at-start, ok, wantOK, before)
			}
			if ok {
				m.write(key, d, at)
			}

			what = fmt.Sprintf("TryUpdate(%s, %v, %v)", key, d, limit)
			at = m.at(clock, math.MinInt64)
			got, want = r.QueryString(key), m.query(key, at)
		}
		// Never below the truth (decay rounds up, float32 cells); above it
		// by rounding only.
		if got < want-1e-9 || got > want+1e-5*math.Max(1, want) {
			t.Fatalf("seed %d step %d: after %s at clock %d (hw %d, deadline %d): got %v, want %v",
				seed, i, what, clock-start, m.hw-start, m.deadline-start, got, want)
		}
		st := r.Stats()
		if st.Promotions != m.promotions || st.Periods != m.periods {
			t.Fatalf("seed %d step %d: Stats = %+v, want Promotions %d Periods %d", seed, i, st, m.promotions, m.periods)
		}
		if wantAlloc := uint64(n) + m.built; st.Allocated != wantAlloc {
			t.Fatalf("seed %d step %d: Stats.Allocated = %d, want %d", seed, i, st.Allocated, wantAlloc)
		}
	}
}

// TestAudit24RotationOracleNoDecay: with decay.None, every Query,
// UpdateAndQuery and TryUpdate decision of a key alone equals the model
// of the doc's rotation exactly, and Stats counts promotions and periods
// as the doc says, under a clock stepping both ways, landing on deadlines
// and idling for thousands of periods.
func TestAudit24RotationOracleNoDecay(t *testing.T) {
	testsize.Serial(t)
	for _, n := range []uint32{2, 3, 5} {
		for seed := int64(1); seed <= 6; seed++ {
			t.Run(fmt.Sprintf("N=%d/seed=%d", n, seed), func(t *testing.T) {
				audit24Run(t, seed, n, 50*time.Millisecond, 0, 400, 1<<62)
			})
		}
	}
}

// TestAudit24RotationOracleLinear is the same oracle with linear decay (1
// unit per ms), so times matter: a generation written at another time
// than the primary, or a read at another time than the write, shows.
func TestAudit24RotationOracleLinear(t *testing.T) {
	testsize.Serial(t)
	for _, n := range []uint32{2, 3, 4} {
		for seed := int64(1); seed <= 6; seed++ {
			t.Run(fmt.Sprintf("N=%d/seed=%d", n, seed), func(t *testing.T) {
				audit24Run(t, seed, n, 50*time.Millisecond, 0.1, 400, 1<<62)
			})
		}
	}
}

// TestAudit24RotationOracleLongPeriods: periods of 30 days, so that a
// generation outlives 2^31 and 2^32 ms of idle time (the cells' stamps
// wrap) while staying live, and idle times of up to centuries.
func TestAudit24RotationOracleLongPeriods(t *testing.T) {
	for _, n := range []uint32{2, 3} {
		for seed := int64(1); seed <= 4; seed++ {
			t.Run(fmt.Sprintf("N=%d/seed=%d", n, seed), func(t *testing.T) {
				audit24RunCells(t, seed, n, 30*24*time.Hour, 0, 200, audit24Years200, 256)
			})
			t.Run(fmt.Sprintf("linear/N=%d/seed=%d", n, seed), func(t *testing.T) {
				audit24RunCells(t, seed, n, 30*24*time.Hour, 1e-8, 200, audit24Years200, 256)
			})
		}
	}
}

// audit24Years200 is 200 years in ms: within what a time.Duration spans.
const audit24Years200 = 200 * 365 * 24 * 3600 * 1000
