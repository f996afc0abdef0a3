package meter_test

// Audit 84 (meter): Novelty against an exact oracle (per key, the whole ms
// of its last mark) under a fake clock with adversarial times.
//
// meter/novelty.go: "the key counts as seen while the Min of its cells is
// above the threshold theta = exp(-1), which the key's own mark stays
// above for exactly T' of the clock's whole milliseconds. Times count in
// whole milliseconds ..., so two times less than T apart are less than
// T'+1 whole milliseconds apart, at most T': errors are one-sided, as a
// Bloom filter's: no false negatives within T" and "rotation adds no false
// negative". So a key marked at whole ms m is seen (Seen returns true,
// Contains true) at every whole ms q with q - m <= T'/1ms, whatever the
// collisions, rotations, idle gaps and clock steps; the high-water rule
// (a time before one already used counts as that time) decides m and q.

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

func audit84meterWholeMs(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

type audit84meterNovCfg struct {
	within time.Duration
	k      float64
	levels uint32
	cells  uint32
	opts   []meter.Option
}

func (c audit84meterNovCfg) String() string {
	return fmt.Sprintf("T=%v/k=%v/%dx%d/o%d", c.within, c.k, c.levels, c.cells, len(c.opts))
}

func audit84meterNovCfgs() []audit84meterNovCfg {
	var cs []audit84meterNovCfg
	ws := []time.Duration{time.Millisecond, 1500 * time.Microsecond, 2*time.Millisecond + 1, 7 * time.Millisecond, 999999 * time.Microsecond, time.Minute, 24 * time.Hour, 400 * 24 * time.Hour}
	ks := []float64{1, 1.01, 2.5, 16}
	sizes := [][2]uint32{{1, 1}, {2, 2}, {3, 5}, {4, 1 << 12}}
	i := 0
	for _, w := range ws {
		for _, k := range ks {
			sz := sizes[i%len(sizes)]
			var o []meter.Option
			switch i % 3 {
			case 1:
				o = append(o, meter.WithPrefetch(false))
			case 2:
				o = append(o, meter.WithHasher(sketch.XXH3()))
			}
			cs = append(cs, audit84meterNovCfg{w, k, sz[0], sz[1], o})
			i++
		}
	}
	day := 24 * time.Hour
	for _, c := range []struct {
		w time.Duration
		k float64
	}{{30 * day, 1}, {60 * day, 1.5}, {100 * 365 * day, 1}, {(1 << 62) / 16, 16}, {1 << 62, 1}, {1<<62 - 1, 1}} {
		sz := sizes[i%len(sizes)]
		cs = append(cs, audit84meterNovCfg{c.w, c.k, sz[0], sz[1], nil})
		i++
	}
	return cs
}

// TestAudit84MeterNoveltyNoFalseNegative: random and adversarial sequences
// of Seen, SeenAt (stale and future times), Contains and ContainsAt over
// 8 keys; a key whose last mark is at most T' whole ms old is always seen.
// In a large sketch (no collision), a key never marked, or marked more
// than T'+1 ms ago (T' up to a day: no horizon re-stamp can lengthen a
// mark by 1 ms there), is new ("a hair longer" is float32 rounding).
func TestAudit84MeterNoveltyNoFalseNegative(t *testing.T) {
	keys := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	for ci, c := range audit84meterNovCfgs() {
		t.Run(c.String(), func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			clk.Set(audit84meterT0)
			opts := append([]meter.Option{meter.WithClock(clk), meter.WithSeed(uint64(ci) * 7), meter.WithSize(c.levels, c.cells), meter.WithPeriodWindows(c.k)}, c.opts...)
			n, err := meter.NewNovelty(c.within, opts...)
			if err != nil {
				t.Fatal(err)
			}
			tp := audit84meterWholeMs(c.within)
			period := audit84meterPeriod(c.within, c.k)
			oc := &audit84meterClock{clk: clk, hw: audit84meterT0}
			last := map[string]int64{}
			rng := rand.New(rand.NewPCG(84, 1000+uint64(ci)))
			check := func(step int, op, k string, q int64, got bool) {
				m, ok := last[k]
				if ok && q-m <= tp && !got {
					t.Fatalf("step %d: %s(%q) at ms %d: not seen, but marked at ms %d (%d ms ago, T' = %d ms, Period %v)",
						step, op, k, q-audit84meterT0, m-audit84meterT0, q-m, tp, period)
				}
				exact := c.cells >= 1<<12 && tp <= 24*3600*1000
				if exact && got && (!ok || q-m > tp+1) {
					t.Fatalf("step %d: %s(%q) at ms %d: seen, but last marked %v (%d ms ago, T' = %d ms), no collision",
						step, op, k, q-audit84meterT0, ok, q-m, tp)
				}
			}
			for step := range testsize.Pick(2000, 200) {
				// the Novelty's window plays the Rate's window for the steps
				if rng.IntN(3) == 0 {
					// around T' of some key's mark
					if m, ok := last[keys[rng.IntN(len(keys))]]; ok && m+tp-1 > clk.NowMillis() {
						clk.Set(m + tp + rng.Int64N(3) - 1)
					} else {
						audit84meterStep(rng, clk, time.Duration(tp)*time.Millisecond, period)
					}
				} else {
					audit84meterStep(rng, clk, time.Duration(tp)*time.Millisecond, period)
				}
				k := keys[rng.IntN(len(keys))]
				switch rng.IntN(5) {
				case 0:
					got := n.Seen(k)
					q := oc.now()
					check(step, "Seen", k, q, got)
					last[k] = q
				case 1:
					tt := clk.Now()
					if rng.IntN(2) == 0 {
						tt = tt.Add(time.Duration(rng.Int64N(3*min(int64(c.within), 1<<58))) - time.Duration(min(int64(c.within), 1<<58)))
					}
					got := n.SeenAt(tt, k)
					q := oc.at(tt)
					check(step, "SeenAt", k, q, got)
					last[k] = q
				case 2:
					got := n.Contains(k)
					check(step, "Contains", k, oc.now(), got)
				default:
					tt := clk.Now()
					if rng.IntN(2) == 0 {
						tt = tt.Add(time.Duration(rng.Int64N(3*min(int64(c.within), 1<<58))) - time.Duration(min(int64(c.within), 1<<58)))
					}
					got := n.ContainsAt(tt, k)
					check(step, "ContainsAt", k, oc.at(tt), got)
				}
			}
		})
	}
}

// TestAudit84MeterNoveltyMarkBeforeRotationReadAfter: a key marked 1 ms
// before a rotation deadline (and at the deadline, and just after) is seen
// at every ms up to T' after the mark, across the rotation and the next
// one, for Period = T' (PeriodWindows 1), the tightest the doc allows.
func TestAudit84MeterNoveltyMarkBeforeRotationReadAfter(t *testing.T) {
	for _, within := range []time.Duration{time.Millisecond, 2 * time.Millisecond, 1500 * time.Microsecond, 5 * time.Millisecond, 40 * time.Millisecond} {
		for _, k := range []float64{1, 1.2, 2} {
			tp := audit84meterWholeMs(within)
			pms := int64(audit84meterPeriod(within, k) / time.Millisecond)
			for off := int64(-2); off <= 1; off++ {
				name := fmt.Sprintf("T=%v/k=%v/off=%d", within, k, off)
				clk := sketchtest.NewFakeClock()
				clk.Set(audit84meterT0)
				n, err := meter.NewNovelty(within, meter.WithClock(clk), meter.WithSeed(11), meter.WithSize(2, 64), meter.WithPeriodWindows(k))
				if err != nil {
					t.Fatal(err)
				}
				// a few rotations with traffic, then the mark near one
				for ms := audit84meterT0; ms < audit84meterT0+3*pms; ms++ {
					clk.Set(ms)
					n.Seen("other")
				}
				mark := audit84meterT0 + 3*pms + off
				clk.Set(mark)
				n.Seen("k")
				for q := mark; q <= mark+tp; q++ {
					clk.Set(q)
					if !n.Contains("k") {
						t.Fatalf("%s: marked at ms %d (deadline %d), not seen at ms %d (T' = %d)", name, mark-audit84meterT0, 3*pms, q-audit84meterT0, tp)
					}
				}
				// a fresh meter, the same history, Seen at the last ms
				clk2 := sketchtest.NewFakeClock()
				clk2.Set(audit84meterT0)
				n2, _ := meter.NewNovelty(within, meter.WithClock(clk2), meter.WithSeed(11), meter.WithSize(2, 64), meter.WithPeriodWindows(k))
				for ms := audit84meterT0; ms < audit84meterT0+3*pms; ms++ {
					clk2.Set(ms)
					n2.Seen("other")
				}
				clk2.Set(mark)
				n2.Seen("k")
				clk2.Set(mark + tp)
				if !n2.Seen("k") {
					t.Fatalf("%s: Seen at T' = %d ms after the mark says new", name, tp)
				}
			}
		}
	}
}

// TestAudit84MeterNoveltyRacersAcrossDeadline: 8 goroutines race Seen on
// 16 fresh keys each round while the clock sits at a rotation deadline
// (every key new: exactly one racer per key is told new), in a tiny
// colliding meter (2x4) and a large one (4x4096); the large one must give exactly
// one "new" per key and round, the tiny one at most one.
func TestAudit84MeterNoveltyRacersAcrossDeadline(t *testing.T) {
	for _, cells := range []uint32{4, 1 << 12} {
		clk := sketchtest.NewFakeClock()
		clk.Set(audit84meterT0)
		const within = 4 * time.Millisecond
		levels := uint32(2)
		if cells > 4 {
			levels = 4 // no key's every cell shared with another of its round
		}
		n, err := meter.NewNovelty(within, meter.WithClock(clk), meter.WithSeed(5), meter.WithSize(levels, cells), meter.WithPeriodWindows(1))
		if err != nil {
			t.Fatal(err)
		}
		for round := range 40 {
			// a deadline is at T0 + j*4 ms; rounds are 5 ms apart (fresh)
			clk.Set(audit84meterT0 + int64(round)*20)
			keys := make([]string, 16)
			for i := range keys {
				keys[i] = fmt.Sprintf("r%d-k%d", round, i)
			}
			news := make([]int, len(keys))
			var mu sync.Mutex
			var wg sync.WaitGroup
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i, k := range keys {
						if !n.Seen(k) {
							mu.Lock()
							news[i]++
							mu.Unlock()
						}
					}
				}()
			}
			wg.Wait()
			for i, c := range news {
				if c > 1 || (cells > 4 && c != 1) {
					t.Fatalf("M=%d round %d key %d: %d racers told new", cells, round, i, c)
				}
			}
		}
	}
}
