package meter_test

import (
	"bytes"
	"fmt"
	"math"
	"math/big"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

const a53Prec = 160

// a53Exp returns e^x (x <= 0) to about 120 bits: x halved until below
// 2^-12, a Taylor series, then squared back. Below -700, 0 (a term under
// 1e-304 of its event, far below float32's rounding).
func a53Exp(x float64) *big.Float {
	if x < -700 {
		return new(big.Float).SetPrec(a53Prec)
	}
	y := new(big.Float).SetPrec(a53Prec).SetFloat64(x)
	k := 0
	for math.Abs(x) > 1.0/4096 {
		x /= 2
		k++
	}
	y.SetMantExp(y, -k) // exact: a power of two
	sum := new(big.Float).SetPrec(a53Prec).SetInt64(1)
	term := new(big.Float).SetPrec(a53Prec).SetInt64(1)
	for i := 1; i <= 16; i++ {
		term.Mul(term, y)
		term.Quo(term, new(big.Float).SetPrec(a53Prec).SetInt64(int64(i)))
		sum.Add(sum, term)
	}
	for range k {
		sum.Mul(sum, sum)
	}
	return sum
}

type a53Event struct {
	ms int64
	n  float64
}

// a53RateModel: the events of each key, and the rotator's generations as
// birth times (the exact lazy-rotation model: promotion on the first
// access at or past the deadline, min(k, N) newborns born at that access,
// deadline kept on the grid), driven by the clock's high-water mark.
type a53RateModel struct {
	n             int
	p, deadline   int64
	hw            int64
	births        []int64
	events        map[string][]a53Event
	windowMs      float64
	promotions    int
	peakPerSecond map[string]float64
}

func (m *a53RateModel) access(now int64) {
	m.hw = max(m.hw, now)
	if m.hw < m.deadline {
		return
	}
	over := m.hw - m.deadline
	k := over/m.p + 1
	r := int(min(k, int64(m.n)))
	m.births = m.births[r:]
	for range r {
		m.births = append(m.births, m.hw)
	}
	m.deadline = m.hw - over%m.p + m.p
	m.promotions++
}

// truths returns, per second, the decayed sum of key's events at or after
// since (the primary's own history: what it holds) and of all of them.
func (m *a53RateModel) truths(key string, since int64) (own, all *big.Float) {
	own = new(big.Float).SetPrec(a53Prec)
	all = new(big.Float).SetPrec(a53Prec)
	for _, e := range m.events[key] {
		x := a53Exp(-float64(m.hw-e.ms) / m.windowMs)
		x.Mul(x, new(big.Float).SetPrec(a53Prec).SetFloat64(e.n))
		all.Add(all, x)
		if e.ms >= since {
			own.Add(own, x)
		}
	}
	perSec := new(big.Float).SetPrec(a53Prec).SetFloat64(1000 / m.windowMs)
	own.Mul(own, perSec)
	all.Mul(all, perSec)
	return own, all
}

// TestAudit53RateBigOracleAcrossJumps: Rate against an exact oracle
// (math/big sums of e^(-age/window) per event) under clock steps of -Period,
// -5 ms, 0, 1 ms, Period-1, Period, Period+1, N x Period +-1, 2^24, 2^29,
// 2^31 and 2^32 ms, for windows of 1 ms, 1 s, 2^24 ms and 2^31 ms and
// PeriodWindows 1, 2.5 and 16, with batches of 1 to 997 events of three
// keys, and a save and restore (WriteTo / ReadFrom into a Rate of another
// seed) every 15 steps, after a downtime of 0, 1 ms, a Period, 2^31 ms or
// 2^32 ms, or on a clock Period/2 + 1 ms or 2^29 ms behind (no downtime:
// the history moves onto the new clock's axis). After every step, for
// every key, PerSecond is:
//   - at least the decayed sum of the events since the primary's birth in
//     the exact model of lazy rotation (1e-9 relative slack for the
//     float64 rate, the cells round up): "The sketch only errs upward";
//   - at least the sum of all events less the documented rotation term,
//     e^(-(N-1) x PeriodWindows) of the key's peak rate so far;
//   - at most the primary's own sum plus 2e-5 relative (so the model of
//     lazy rotation is exact: births, grid, k periods per jump), and
//   - at most the sum of all events plus 2e-5 relative (float32 round-ups
//     and the 2^-40 bias: no collision among three keys in 4 x 1024).
func TestAudit53RateBigOracleAcrossJumps(t *testing.T) {
	testsize.Serial(t)
	keys := []string{"x", "y", "z"}
	for _, wms := range []int64{1, 1000, 1 << 24, 1 << 31} {
		for _, pw := range []float64{1, 2.5, 16} {
			if float64(wms)*pw*1e6 > 1<<62 {
				continue
			}
			name := fmt.Sprintf("window=%dms/pw=%v", wms, pw)
			clk := sketchtest.NewFakeClock()
			clk.Set(a53T0)
			W := time.Duration(wms) * time.Millisecond
			r, err := meter.NewRate(W, meter.WithClock(clk), meter.WithSize(4, 1024), meter.WithSeed(uint64(wms)), meter.WithPeriodWindows(pw))
			if err != nil {
				t.Fatal(err)
			}
			p := int64(math.Ceil(float64(wms) * pw))
			m := &a53RateModel{n: 2, p: p, deadline: a53T0 + p, hw: a53T0, births: []int64{a53T0, a53T0},
				events: map[string][]a53Event{}, windowMs: float64(wms), peakPerSecond: map[string]float64{}}
			steps := []int64{-p, -5, 0, 1, p - 1, p, p + 1, 2*p - 1, 2 * p, 2*p + 1, 1 << 24, 1 << 29, 1 << 31, 1 << 32}
			x := uint64(wms)*31 + uint64(pw*10)
			for i := range 120 {
				x = x*6364136223846793005 + 1442695040888963407
				step := steps[int(x>>33)%len(steps)]
				if step < 0 && i%3 != 0 {
					step = -step / 2 // fewer backward steps, still some
				}
				clk.Set(clk.NowMillis() + step)
				key := keys[int(x>>45)%len(keys)]
				nev := float64(int(x>>50)%997 + 1)
				r.ObserveAt(clk.Now(), key, nev)
				m.access(clk.NowMillis())
				m.events[key] = append(m.events[key], a53Event{m.hw, nev})
				for _, k := range keys {
					got := r.PerSecond(k)
					m.access(clk.NowMillis())
					own, all := m.truths(k, m.births[0])
					o, _ := own.Float64()
					a, _ := all.Float64()
					m.peakPerSecond[k] = max(m.peakPerSecond[k], a)
					term := math.Exp(-pw) * m.peakPerSecond[k] // N = 2
					if got < o*(1-1e-9) {
						t.Fatalf("%s step %d (%+d ms): PerSecond(%q) = %v, below %v, the exact decayed rate of the events since the primary's birth",
							name, i, step, k, got, o)
					}
					if got < a-term*(1+1e-9)-1e-300 {
						t.Fatalf("%s step %d (%+d ms): PerSecond(%q) = %v, below the exact %v less the rotation term %v",
							name, i, step, k, got, a, term)
					}
					if got > o*(1+2e-5)+1e-300 {
						t.Fatalf("%s step %d (%+d ms): PerSecond(%q) = %v, above %v, the exact rate of the events since the primary's birth (the model of lazy rotation disagrees)",
							name, i, step, k, got, o)
					}
					if got > a*(1+2e-5)+1e-300 {
						t.Fatalf("%s step %d (%+d ms): PerSecond(%q) = %v, above the exact %v by more than float32 rounding",
							name, i, step, k, got, a)
					}
				}
				if i%15 == 14 { // save, and restore into a Rate of another seed
					var b bytes.Buffer
					if _, err := r.WriteTo(&b); err != nil {
						t.Fatal(err)
					}
					inst := max(m.hw, clk.NowMillis())
					down := []int64{0, 1, p, 1 << 31, 1 << 32, -p/2 - 1, -(1 << 29)}[(i/15)%7]
					rt := inst + down
					nc := sketchtest.NewFakeClock()
					nc.Set(rt)
					nr, err := meter.NewRate(W, meter.WithClock(nc), meter.WithSize(4, 1024), meter.WithSeed(uint64(i)), meter.WithPeriodWindows(pw))
					if err != nil {
						t.Fatal(err)
					}
					if _, err := nr.ReadFrom(&b); err != nil {
						t.Fatal(err)
					}
					r, clk = nr, nc
					if rt < inst {
						// A restoring clock behind the snapshot: no
						// downtime, so the whole history moves onto the
						// new clock's time axis.
						d := rt - inst
						for k, evs := range m.events {
							for j := range evs {
								evs[j].ms += d
							}
							m.events[k] = evs
						}
						for j := range m.births {
							m.births[j] += d
						}
						m.deadline += d
					}
					m.hw = rt
				}
			}
			if m.promotions == 0 {
				t.Errorf("%s: no promotion exercised", name)
			}
		}
	}
}

// TestAudit53NoveltyAcrossJumpsAndRestores: Novelty against the exact
// rule "seen iff marked within T" under the same kind of clock steps
// (backward, 1 ms, T-1, T, T+1, Period-1, Period, Period+1, 2 x Period,
// 2^24, 2^29, 2^31, 2^32 ms) for T of 1 s, 2^24 ms, 2^31 ms and 2^32 ms
// and PeriodWindows 1, 1.5 and 16, with a save and a restore (into a
// Novelty of another seed, MarshalBinary-free: WriteTo / ReadFrom) every
// 10 steps after a downtime of 0, 1 ms, T/2 or a Period. After every step
// Seen of one of six keys answers true when its last mark is less than T
// old and false when more (at exactly T either: "a mark may last a hair
// longer": float32 rounds the decayed mark up, which for T = 2^31 ms
// kept a mark 1 ms past T; allowed up to T x 2^-20), and Contains of
// every key the same: "no false negatives
// within T", "rotation adds no false negative", ReadFrom: "A key marked
// within T of the snapshot's instant is seen until T after its mark, the
// downtime counted". Six keys in 4 x 1024 cells: no false positive
// either.
func TestAudit53NoveltyAcrossJumpsAndRestores(t *testing.T) {
	testsize.Serial(t)
	keys := []string{"a", "b", "c", "d", "e", "f"}
	for _, tms := range []int64{1000, 1 << 24, 1 << 31, 1 << 32} {
		for _, pw := range []float64{1, 1.5, 16} {
			name := fmt.Sprintf("T=%dms/pw=%v", tms, pw)
			T := time.Duration(tms) * time.Millisecond
			p := int64(math.Ceil(float64(tms) * pw))
			clk := sketchtest.NewFakeClock()
			clk.Set(a53T0)
			mk := func(c *sketchtest.FakeClock, seed uint64) *meter.Novelty {
				n, err := meter.NewNovelty(T, meter.WithClock(c), meter.WithSize(4, 1024), meter.WithSeed(seed), meter.WithPeriodWindows(pw))
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
			nv := mk(clk, 53)
			hw := int64(a53T0)
			last := map[string]int64{}
			steps := []int64{-p, -5, 1, tms - 1, tms, tms + 1, p - 1, p, p + 1, 2 * p, 1 << 24, 1 << 29, 1 << 31, 1 << 32}
			x := uint64(tms) + uint64(pw*100)
			check := func(i int, k string, got bool, what string) {
				lt, ok := last[k]
				switch {
				case ok && hw-lt < tms && !got:
					t.Fatalf("%s step %d: %s(%q) = unseen %d ms after its mark (T = %d ms): a false negative", name, i, what, k, hw-lt, tms)
				case (!ok || hw-lt > tms+tms>>20+1) && got:
					t.Fatalf("%s step %d: %s(%q) = seen, last mark %v (ok=%v) %d ms ago (T = %d ms)", name, i, what, k, lt, ok, hw-lt, tms)
				}
			}
			for i := range 160 {
				x = x*6364136223846793005 + 1442695040888963407
				step := steps[int(x>>33)%len(steps)]
				clk.Set(clk.NowMillis() + step)
				hw = max(hw, clk.NowMillis())
				k := keys[int(x>>45)%len(keys)]
				check(i, k, nv.Seen(k), "Seen")
				last[k] = hw
				for _, q := range keys {
					check(i, q, nv.Contains(q), "Contains")
				}
				if i%10 == 9 {
					var b bytes.Buffer
					if _, err := nv.WriteTo(&b); err != nil {
						t.Fatal(err)
					}
					down := []int64{0, 1, tms / 2, p}[(i/10)%4]
					hw += down
					nc := sketchtest.NewFakeClock()
					nc.Set(hw)
					nn := mk(nc, uint64(i))
					if _, err := nn.ReadFrom(&b); err != nil {
						t.Fatal(err)
					}
					nv, clk = nn, nc
					for _, q := range keys {
						check(i, q, nv.Contains(q), "Contains after restore")
					}
				}
			}
		}
	}
}
