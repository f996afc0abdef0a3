package meter_test

// Audit 84 (meter): Rate against an exact per-key oracle under a fake
// clock, with adversarial times: idle gaps of whole Periods plus or minus
// 1 ms, hours to years, the stamp horizon (2^29 ms) plus or minus 1 ms,
// clock steps back, stale and future At times, sub-ms advances, every
// window shape (whole and not whole ms, 1 ms to 1 h), Period 1 to 16
// windows, tiny (colliding) and large sketches.
//
// meter/rate.go: "The sketch only errs upward: collisions (Min of L cells)
// and float32 rounding (up) can raise an estimate, never lower it, except
// the rotation term: a generation becomes the primary after it has counted
// for (Generations-1) x Period ... The exactness above is of those
// whole-millisecond times." So at a read at whole ms q the estimate is at
// least the exact decayed count of the events at or after q - Period
// (those the primary has counted), and, without collisions, at most the
// exact count of all events (plus float32 rounding up).

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

const audit84meterT0 = int64(1_700_000_000_000)

type audit84meterEvent struct {
	ms int64
	n  float64
}

// audit84meterDecayed returns n x exp(-dt/window) where dt is in ms; the
// exponent dt/window is formed exactly (big.Rat) and only exp rounds.
func audit84meterDecayed(n float64, dtMs int64, window time.Duration) float64 {
	x := new(big.Rat).SetFrac(new(big.Int).Mul(big.NewInt(dtMs), big.NewInt(1e6)), big.NewInt(int64(window)))
	f, _ := x.Float64()
	return n * math.Exp(-f)
}

// audit84meterClock is the oracle's view of the meter's time: the
// high-water mark of every time used, and the clock's reading.
type audit84meterClock struct {
	clk *sketchtest.FakeClock
	hw  int64
}

// now returns the whole ms at which a short form acts.
func (c *audit84meterClock) now() int64 {
	c.hw = max(c.hw, c.clk.NowMillis())
	return c.hw
}

// at returns the whole ms at which an At form given t acts: a t after the
// clock counts as the clock, one before the latest time used as it.
func (c *audit84meterClock) at(t time.Time) int64 {
	ms := t.UnixMilli()
	if ms > c.hw {
		ms = min(ms, c.clk.NowMillis())
	}
	c.hw = max(c.hw, ms)
	return c.hw
}

// audit84meterStep moves the clock adversarially relative to window and
// period.
func audit84meterStep(rng *rand.Rand, clk *sketchtest.FakeClock, window, period time.Duration) {
	wms := max(int64(window/time.Millisecond), 1)
	pms := int64(period / time.Millisecond)
	switch rng.IntN(20) {
	case 0, 1, 2, 3, 4, 5:
		clk.Advance(time.Duration(rng.Int64N(wms+1)) * time.Millisecond)
	case 6:
		clk.Advance(time.Millisecond)
	case 7:
		clk.Advance(time.Duration(rng.Int64N(int64(time.Millisecond)))) // sub-ms
	case 8:
		clk.Advance(time.Duration(pms+rng.Int64N(3)-1) * time.Millisecond) // a Period, +-1 ms
	case 9:
		clk.Advance(time.Duration(2*pms+rng.Int64N(3)-1) * time.Millisecond)
	case 10:
		// to 1 ms before / at / after the next multiple of the Period
		// counted from T0 (the meters are built at T0)
		now := clk.NowMillis()
		next := audit84meterT0 + ((now-audit84meterT0)/pms+1)*pms
		clk.Set(next + rng.Int64N(3) - 1)
	case 11:
		clk.Advance(time.Duration(1<<29+rng.Int64N(3)-1) * time.Millisecond) // the stamp horizon
	case 12:
		clk.Advance([]time.Duration{time.Hour, 24 * time.Hour, 50 * 24 * time.Hour, 3 * 365 * 24 * time.Hour}[rng.IntN(4)])
	case 13:
		clk.Advance(-time.Duration(rng.Int64N(3*wms+2)) * time.Millisecond) // back
	case 14:
		clk.Advance(time.Duration(wms*int64(rng.IntN(40))) * time.Millisecond)
	default:
		// no move
	}
}

type audit84meterRateCfg struct {
	window time.Duration
	k      float64 // PeriodWindows
	levels uint32
	cells  uint32
	opts   []meter.Option
}

func (c audit84meterRateCfg) String() string {
	return fmt.Sprintf("w=%v/k=%v/%dx%d/o%d", c.window, c.k, c.levels, c.cells, len(c.opts))
}

func audit84meterRateCfgs() []audit84meterRateCfg {
	var cs []audit84meterRateCfg
	windows := []time.Duration{time.Millisecond, 1500 * time.Microsecond, 7 * time.Millisecond, 999999 * time.Nanosecond * 1000, time.Second + 1, 90 * time.Second, time.Hour}
	ks := []float64{1, 1.5, 2.75, 16}
	sizes := [][2]uint32{{1, 1}, {2, 3}, {4, 1 << 12}}
	i := 0
	for _, w := range windows {
		for _, k := range ks {
			sz := sizes[i%len(sizes)]
			var o []meter.Option
			switch i % 3 {
			case 1:
				o = append(o, meter.WithPrefetch(false))
			case 2:
				o = append(o, meter.WithHasher(sketch.XXH3()))
			}
			cs = append(cs, audit84meterRateCfg{w, k, sz[0], sz[1], o})
			i++
		}
	}
	// long windows: the stamp horizon inside a window, the slow law
	// (lambda below 1.8e-9/s) and the longest Period
	day := 24 * time.Hour
	for _, c := range []struct {
		w time.Duration
		k float64
	}{{30 * day, 1}, {30 * day, 16}, {20 * 365 * day, 1}, {20 * 365 * day, 7}, {(1 << 62) / 16, 16}, {1 << 62, 1}} {
		sz := sizes[i%len(sizes)]
		cs = append(cs, audit84meterRateCfg{c.w, c.k, sz[0], sz[1], nil})
		i++
	}
	return cs
}

// audit84meterPeriod is k windows rounded up to whole ms (the Period rotation
// works in): what "counted for Period" bounds from below.
func audit84meterPeriod(window time.Duration, k float64) time.Duration {
	p := new(big.Float).SetPrec(200).SetInt64(int64(window))
	p.Mul(p, new(big.Float).SetPrec(200).SetFloat64(k))
	n, acc := p.Int64()
	if acc == big.Below {
		n++
	}
	ms := (n + int64(time.Millisecond) - 1) / int64(time.Millisecond)
	return time.Duration(max(ms, 1)) * time.Millisecond
}

// TestAudit84MeterRateOracle: random and adversarial sequences; every read
// is at or above the exact decayed count of the events the primary has
// certainly counted (those within one Period), and in a large sketch (no
// collision among 6 keys in 4 levels of 4096) at most the exact count of
// every event, up to float32 rounding up.
func TestAudit84MeterRateOracle(t *testing.T) {
	keys := []string{"a", "b", "c", "d", "e", "f"}
	ns := []float64{1, 1, 1, 0, 0.1, 3.75, 1000, 1e6, 1e-3, 1e20}
	for ci, c := range audit84meterRateCfgs() {
		t.Run(c.String(), func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			clk.Set(audit84meterT0)
			opts := append([]meter.Option{meter.WithClock(clk), meter.WithSeed(uint64(ci) + 84), meter.WithSize(c.levels, c.cells), meter.WithPeriodWindows(c.k)}, c.opts...)
			r, err := meter.NewRate(c.window, opts...)
			if err != nil {
				t.Fatal(err)
			}
			period := audit84meterPeriod(c.window, c.k)
			pms := int64(period / time.Millisecond)
			oc := &audit84meterClock{clk: clk, hw: audit84meterT0}
			logs := map[string][]audit84meterEvent{}
			rng := rand.New(rand.NewPCG(84, uint64(ci)))
			writes := map[string]int{}
			for step := range testsize.Pick(1500, 150) {
				audit84meterStep(rng, clk, c.window, period)
				k := keys[rng.IntN(len(keys))]
				switch rng.IntN(6) {
				case 0:
					r.Observe(k)
					logs[k] = append(logs[k], audit84meterEvent{oc.now(), 1})
					writes[k]++
				case 1, 2:
					n := ns[rng.IntN(len(ns))]
					tt := clk.Now()
					switch rng.IntN(4) {
					case 0:
						tt = tt.Add(-time.Duration(rng.Int64N(5*min(int64(c.window), 1<<58) + 1))) // stale
					case 1:
						tt = tt.Add(time.Duration(rng.Int64N(5*min(int64(c.window), 1<<58) + 1))) // future
					}
					r.ObserveAt(tt, k, n)
					logs[k] = append(logs[k], audit84meterEvent{oc.at(tt), n})
					writes[k]++
				default:
					var est float64
					var q int64
					if rng.IntN(2) == 0 {
						est = r.PerSecond(k)
						q = oc.now()
					} else {
						tt := clk.Now().Add(time.Duration(rng.Int64N(3*min(int64(c.window), 1<<58))) - time.Duration(min(int64(c.window), 1<<58)))
						est = r.PerSecondAt(tt, k)
						q = oc.at(tt)
					}
					var lo, all float64
					wms := int64(c.window/time.Millisecond) + 1
					for _, e := range logs[k] {
						if q-e.ms > 800*wms {
							continue // below 1e20 x e^-800: 0 in float64
						}
						v := audit84meterDecayed(e.n, q-e.ms, c.window)
						all += v
						if e.ms >= q-pms {
							lo += v
						}
					}
					perSec := 1 / c.window.Seconds()
					lo *= perSec
					all *= perSec
					if est < lo*(1-1e-12)-1e-300 {
						t.Fatalf("step %d: key %q at ms %d: PerSecond = %.17g, below the exact rate of the events within one Period %.17g (all events %.17g)",
							step, k, q-audit84meterT0, est, lo, all)
					}
					if c.cells >= 1<<12 {
						// float32 rounding up: each write and each horizon
						// re-stamp at most 2^-23 of the cell, plus subnormal
						// ulps.
						slack := 1 + float64(writes[k]+64)*math.Ldexp(1, -23)
						if est > all*slack*(1+1e-12)+1e-37 {
							t.Fatalf("step %d: key %q at ms %d: PerSecond = %.17g, above every event's exact rate %.17g x %v",
								step, k, q-audit84meterT0, est, all, slack)
						}
					}
				}
			}
		})
	}
}

// TestAudit84MeterRateReadJustAfterRotation: a key observed 1 ms before a
// rotation deadline and read at the deadline and 1 ms after it (the new
// primary has counted for one Period) still reads at least the event's
// exact decayed rate, for Period = 1 window (PeriodWindows 1) where the
// rotation term is largest, and with events every ms before it.
func TestAudit84MeterRateReadJustAfterRotation(t *testing.T) {
	for _, window := range []time.Duration{time.Millisecond, 3 * time.Millisecond, 1500 * time.Microsecond, 250 * time.Millisecond} {
		for _, k := range []float64{1, 1.25, 2} {
			t.Run(window.String()+"/"+strconv.FormatFloat(k, 'g', -1, 64), func(t *testing.T) {
				clk := sketchtest.NewFakeClock()
				clk.Set(audit84meterT0)
				r, err := meter.NewRate(window, meter.WithClock(clk), meter.WithSeed(3), meter.WithSize(2, 64), meter.WithPeriodWindows(k))
				if err != nil {
					t.Fatal(err)
				}
				pms := int64(audit84meterPeriod(window, k) / time.Millisecond)
				// deadlines are at T0 + j*P; observe at every ms of the
				// first three Periods, then read at each of the next P+2 ms
				var log []audit84meterEvent
				for ms := audit84meterT0; ms < audit84meterT0+3*pms; ms++ {
					clk.Set(ms)
					r.Observe("k")
					log = append(log, audit84meterEvent{ms, 1})
				}
				for ms := audit84meterT0 + 3*pms - 1; ms <= audit84meterT0+4*pms+1; ms++ {
					clk.Set(ms)
					got := r.PerSecond("k")
					var lo float64
					for _, e := range log {
						if e.ms <= ms && e.ms >= ms-pms {
							lo += audit84meterDecayed(e.n, ms-e.ms, window)
						}
					}
					lo /= window.Seconds()
					if got < lo*(1-1e-12) {
						t.Fatalf("ms %d (P = %d ms): PerSecond = %.17g, below the exact rate of the last Period's events %.17g", ms-audit84meterT0, pms, got, lo)
					}
				}
			})
		}
	}
}
