package sketchtest_test

import (
	"math"
	"math/big"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a129Lo and a129Hi are the first and last nanoseconds of the int64
// milliseconds, as Unix ns in a big.Int.
var (
	a129Lo = new(big.Int).Mul(big.NewInt(math.MinInt64), big.NewInt(1e6))
	a129Hi = new(big.Int).Add(new(big.Int).Mul(big.NewInt(math.MaxInt64), big.NewInt(1e6)), big.NewInt(1e6-1))
)

// a129NS returns t as Unix nanoseconds, exactly.
func a129NS(t time.Time) *big.Int {
	n := new(big.Int).Mul(big.NewInt(t.Unix()), big.NewInt(1e9))
	return n.Add(n, big.NewInt(int64(t.Nanosecond())))
}

// a129Clamp returns x within [a129Lo, a129Hi].
func a129Clamp(x *big.Int) *big.Int {
	switch {
	case x.Cmp(a129Lo) < 0:
		return new(big.Int).Set(a129Lo)
	case x.Cmp(a129Hi) > 0:
		return new(big.Int).Set(a129Hi)
	}
	return x
}

// TestAudit129PinOracle: random Advance, Set and SetTime sequences that
// keep returning to both ends of the int64 milliseconds, against an
// exact model in big integers: the reading is the previous one plus d,
// clamped to [MinInt64 ms, MaxInt64 ms + 999,999 ns] (SetTime: t,
// clamped; Set: ms, no fraction). After every move Now() is the model's
// instant, NowMillis() == Now().UnixMilli(), and Now never moved against
// the step (a saturated move stays put or moves with d). Covers the
// carries after a pin, backward moves after saturation, and SetTime at
// maxTime/minTime and one ns beyond.
func TestAudit129PinOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(129, 1))
	maxT := time.UnixMilli(math.MaxInt64).Add(time.Millisecond - 1)
	minT := time.UnixMilli(math.MinInt64)
	durs := func() time.Duration {
		switch rng.IntN(8) {
		case 0:
			return time.Duration(rng.Int64N(2e6) - 1e6) // within ±1 ms
		case 1:
			return time.Duration(rng.Int64N(5) - 2)
		case 2:
			return time.Duration(rng.Int64())
		case 3:
			return -time.Duration(rng.Int64())
		case 4:
			return time.Duration(math.MaxInt64)
		case 5:
			return time.Duration(math.MinInt64)
		case 6:
			return time.Duration(rng.Int64N(3)-1) * time.Millisecond
		default:
			return time.Duration(rng.Int64N(2e9) - 1e9)
		}
	}
	for run := range 200 {
		var c sketchtest.FakeClock
		model := big.NewInt(0)
		for step := range 200 {
			before := c.Now()
			var op string
			var dir int // sign of the move asked for; 0 for Set/SetTime
			switch k := rng.IntN(10); {
			case k < 7:
				d := durs()
				op, dir = "Advance("+d.String()+")", cmpSign(int64(d))
				c.Advance(d)
				model = a129Clamp(new(big.Int).Add(model, big.NewInt(int64(d))))
			case k == 7:
				ms := []int64{math.MaxInt64, math.MinInt64, math.MaxInt64 - 1, math.MinInt64 + 1, 0, rng.Int64()}[rng.IntN(6)]
				op = "Set"
				c.Set(ms)
				model = new(big.Int).Mul(big.NewInt(ms), big.NewInt(1e6))
			default:
				tt := []time.Time{maxT, maxT.Add(1), maxT.Add(-1), minT, minT.Add(-1), minT.Add(1),
					maxT.Add(time.Hour), minT.Add(-time.Hour), time.Unix(0, rng.Int64()), {}}[rng.IntN(10)]
				op = "SetTime(" + tt.String() + ")"
				c.SetTime(tt)
				model = a129Clamp(a129NS(tt))
			}
			now := c.Now()
			if got := a129NS(now); got.Cmp(model) != 0 {
				t.Fatalf("run %d step %d: %s: Now() = %v (%v ns), model %v ns", run, step, op, now, got, model)
			}
			if ms := c.NowMillis(); ms != now.UnixMilli() {
				t.Fatalf("run %d step %d: %s: NowMillis %d != Now().UnixMilli() %d", run, step, op, ms, now.UnixMilli())
			}
			if dir != 0 && now.Compare(before) == -dir {
				t.Fatalf("run %d step %d: %s moved Now against d: %v -> %v", run, step, op, before, now)
			}
		}
	}
}

func cmpSign(x int64) int {
	switch {
	case x > 0:
		return 1
	case x < 0:
		return -1
	}
	return 0
}

// TestAudit129ReadersDuringSaturatedMoves: readers racing with sub-ms
// Advances that saturate at the last nanosecond (and step back from it)
// always see a reading the clock held: within the int64 ms, NowMillis()
// == Now().UnixMilli() of the same snapshot's ms, and, with forward
// moves only, Now never runs back. At GOMAXPROCS 1, 2 and 4.
func TestAudit129ReadersDuringSaturatedMoves(t *testing.T) {
	for _, procs := range []int{1, 2, 4} {
		old := runtime.GOMAXPROCS(procs)
		func() {
			defer runtime.GOMAXPROCS(old)
			var c sketchtest.FakeClock
			c.Set(math.MaxInt64 - 2)
			var stop atomic.Bool
			var wg sync.WaitGroup
			errs := make(chan string, 8)
			for range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					prev := c.Now()
					for !stop.Load() {
						n := c.Now()
						if n.Before(prev) {
							errs <- "Now ran back: " + prev.String() + " -> " + n.String()
							return
						}
						if n.UnixMilli() < math.MaxInt64-2 {
							errs <- "Now below the start: " + n.String()
							return
						}
						prev = n
					}
				}()
			}
			for range 3000 {
				c.Advance(time.Duration(1 + rand.Int64N(400_000)))
			}
			stop.Store(true)
			wg.Wait()
			close(errs)
			for e := range errs {
				t.Fatalf("GOMAXPROCS %d: %s", procs, e)
			}
			want := time.UnixMilli(math.MaxInt64).Add(time.Millisecond - 1)
			if !c.Now().Equal(want) || c.NowMillis() != math.MaxInt64 {
				t.Fatalf("GOMAXPROCS %d: after saturating, Now %v, NowMillis %d", procs, c.Now(), c.NowMillis())
			}
			// Back by 1 ns and forward by 1 ns from the pin.
			c.Advance(-1)
			if !c.Now().Equal(want.Add(-1)) {
				t.Fatalf("GOMAXPROCS %d: Advance(-1) at the pin: Now %v", procs, c.Now())
			}
			c.Advance(2)
			if !c.Now().Equal(want) {
				t.Fatalf("GOMAXPROCS %d: Advance(2) at the pin - 1 ns: Now %v", procs, c.Now())
			}
		}()
	}
}
