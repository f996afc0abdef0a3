package grudge_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	grudge "github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
	"github.com/lfgrudge/grudge/internal/ref"
	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/sketch"
)

// a76UserClock is a user's Clock with Now only (no NowMillis): the root
// package reads it as Now().UnixMilli() (docs/migrating.md, "Clock").
type a76UserClock struct{ c *grudgetest.FakeClock }

func (u a76UserClock) Now() time.Time { return u.c.Now() }

// a76RefClock gives the reference the same time scale from the same fake
// clock, through its own (independent) high-water mark.
type a76RefClock struct{ c *grudgetest.FakeClock }

func (r a76RefClock) NowMillis() int64 { return r.c.Now().UnixMilli() }

// a76Toward is a user's Decay: toward 0 by rate per millisecond, stopping
// at 0 (a power-of-two rate keeps dyadic scores exact in float32).
type a76Toward struct{ rate float64 }

func (l a76Toward) Apply(score float64, dt int64) float64 {
	if dt <= 0 {
		return score
	}
	m := l.rate * float64(dt)
	switch {
	case score > 0:
		return math.Max(0, score-m)
	case score < 0:
		return math.Min(0, score+m)
	}
	return score
}

// a76Move is one clock move of the adversarial schedule: small steps
// forward, steps backwards, and idle times around 2^31 and 2^32 ms, days
// and years.
func a76Move(rng *rand.Rand) time.Duration {
	ms := time.Millisecond
	switch rng.IntN(20) {
	case 0:
		return -time.Duration(1+rng.IntN(20000)) * ms // backwards
	case 1:
		return -time.Duration(1+rng.IntN(3)) * ms
	case 2:
		big := []int64{1<<31 - 1, 1 << 31, 1<<31 + 1, 1<<32 - 1, 1 << 32, 1<<32 + 1, 1<<33 + 7,
			400 * 86400e3, 3 * 365 * 86400e3, 6*86400e3 + 1, 13 * 86400e3}
		return time.Duration(big[rng.IntN(len(big))]) * ms
	case 3, 4, 5:
		return 0
	default:
		return time.Duration(rng.IntN(300)) * ms
	}
}

// TestAudit76ExactIntegerDifferential: with laws that keep integers
// integral (None, and Linear(1000): one unit per millisecond) and integer
// deltas well inside float32's exact range, the float32 cells hold
// exactly what the float64 reference holds, so every reading and every
// TryUpdate decision, at the exact limit too, must be the reference's,
// whatever the clock does: steps backwards (time stands still for both:
// migrating.md "Clock", internal/ref shares the semantics), idle times
// of 2^31, 2^32, 2^33 ms, days and years ("Idle time": any idle time
// decays as grudge's int64 timestamps do), negative deltas and both
// clamps. Both a grudgetest.FakeClock and a user Clock with Now only.
func TestAudit76ExactIntegerDifferential(t *testing.T) {
	testsize.Serial(t)
	laws := []struct {
		name string
		d    grudge.Decay
	}{{"none", grudge.None}, {"lin1000", grudge.Linear(1000)}, {"lin3000", grudge.Linear(3000)},
		{"user1", a76Toward{1}}, {"user1/1024", a76Toward{1.0 / 1024}}}
	aggs := []struct {
		name string
		a    grudge.Aggregator
	}{{"min", grudge.Min}, {"max", grudge.Max}, {"nil", nil}}
	bounds := [][2]float64{{0, 50}, {-20, 20}, {-1000, 0}, {0, 1 << 24}, {-16000, 16000}}
	seed := uint64(7600)
	for _, law := range laws {
		for _, ag := range aggs {
			for _, b := range bounds {
				if l, ok := law.d.(a76Toward); ok && l.rate < 1 && b[1]-b[0] > 32000 {
					continue // dyadic scores exact in float32 only up to 2^14
				}
				for _, user := range []bool{false, true} {
					for _, hasher := range []grudge.HasherFactory{nil, grudge.SipHash()} {
						seed++
						name := fmt.Sprintf("%s/%s/%v/user=%v/sip=%v", law.name, ag.name, b, user, hasher != nil)
						a76Diff(t, name, seed, grudge.Config{Levels: 3, CellsPerLevel: 7, Decay: law.d,
							Lo: b[0], Hi: b[1], Aggregator: ag.a, Hasher: hasher}, user, true)
					}
				}
			}
		}
	}
}

// TestAudit76ExpNeverBelowReference: Exponential decay under the same
// adversarial clock schedule: the root sketch may read above the float64
// reference by float32 round-up, never below it (migrating.md, "float32
// scores": "the estimate is never below the true score"), and a TryUpdate
// it admits the reference admits too ("never admit more").
func TestAudit76ExpNeverBelowReference(t *testing.T) {
	seed := uint64(7700)
	for _, lambda := range []float64{0.5, 1e-6, 3e-9} {
		for _, b := range [][2]float64{{0, 1000}, {0, 1e6}} {
			for _, user := range []bool{false, true} {
				seed++
				name := fmt.Sprintf("exp%v/%v/user=%v", lambda, b, user)
				a76Diff(t, name, seed, grudge.Config{Levels: 4, CellsPerLevel: 5, Decay: grudge.Exponential(lambda),
					Lo: b[0], Hi: b[1]}, user, false)
			}
		}
	}
}

func a76Diff(t *testing.T, name string, seed uint64, cfg grudge.Config, user, exact bool) {
	t.Helper()
	clk := grudgetest.NewFakeClock()
	clk.Set(time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC))
	if seed%3 == 0 {
		clk.Set(time.Date(1950, 1, 1, 0, 0, 0, 0, time.UTC)) // before the epoch: negative ms
	}
	if user {
		cfg.Clock = a76UserClock{clk}
	} else {
		cfg.Clock = clk
	}
	s, err := grudge.New(cfg)
	if err != nil {
		t.Fatalf("%s: New: %v", name, err)
	}
	rc := s.Native().Config()
	rc.Clock = a76RefClock{clk}
	r, err := ref.New(rc)
	if err != nil {
		t.Fatalf("%s: ref.New: %v", name, err)
	}
	rng := rand.New(rand.NewPCG(seed, 76))
	var trace []string
	fail := func(format string, args ...any) {
		t.Helper()
		n := len(trace)
		if n > 12 {
			trace = trace[n-12:]
		}
		t.Fatalf("%s: "+format+"\nlast steps:\n  %v", append([]any{name}, append(args, trace)...)...)
	}
	agree := func(g, w float64) bool {
		if exact {
			return g == w
		}
		// never below; above by float32 round-up (a few ulps per write,
		// relative), plus an absolute slack for values near 0.
		return g >= w-1e-9*math.Abs(w) && g <= w+2e-5*math.Max(1, math.Abs(w))
	}
	span := cfg.Hi - cfg.Lo
	maxD := 8
	if span > 1000 {
		maxD = 3000
	}
	if span > 1e5 {
		maxD = 2_000_000
	}
	for i := 0; i < 2500; i++ {
		if d := a76Move(rng); d != 0 {
			clk.Advance(d)
			trace = append(trace, fmt.Sprintf("advance %v", d))
		}
		key := []byte(fmt.Sprintf("k%d", rng.IntN(6)))
		d := float64(rng.IntN(maxD + 1))
		if cfg.Lo < 0 && rng.IntN(2) == 0 {
			d = -d
		}
		switch op := rng.IntN(5); op {
		case 0:
			s.Update(key, d)
			r.Update(key, d)
			trace = append(trace, fmt.Sprintf("Update(%s, %v)", key, d))
		case 1:
			g, w := s.Query(key), r.Query(key)
			trace = append(trace, fmt.Sprintf("Query(%s) = %v / ref %v", key, g, w))
			if !agree(g, w) {
				fail("op %d: Query(%s) = %v, reference %v", i, key, g, w)
			}
		case 2:
			g, w := s.UpdateAndQuery(key, d), r.UpdateAndQuery(key, d)
			trace = append(trace, fmt.Sprintf("UpdateAndQuery(%s, %v) = %v / ref %v", key, d, g, w))
			if !agree(g, w) {
				fail("op %d: UpdateAndQuery(%s, %v) = %v, reference %v", i, key, d, g, w)
			}
		case 3:
			cur := r.Query(key)
			limit := cur + d + float64(rng.IntN(3)-1)
			if rng.IntN(4) == 0 {
				limit = cfg.Hi + float64(rng.IntN(3)) // at or above Hi
			}
			g, w := s.TryUpdate(key, d, limit), r.TryUpdate(key, d, limit)
			trace = append(trace, fmt.Sprintf("TryUpdate(%s, %v, %v) = %v / ref %v (ref agg %v)", key, d, limit, g, w, cur))
			if exact && g != w || !exact && g && !w {
				fail("op %d: TryUpdate(%s, %v, %v) = %v, reference %v (reference aggregate %v)", i, key, d, limit, g, w, cur)
			}
			if !exact && g != w {
				// the root denied near the limit, the reference admitted:
				if w && math.Abs(cur+d-limit) > 1e-4*math.Max(1, math.Abs(limit)) {
					fail("op %d: TryUpdate(%s, %v, %v) denied far from the limit (reference aggregate %v)", i, key, d, limit, cur)
				}
				s.Update(key, d) // the reference admitted: add d to the root too
			}
		case 4:
			g, w := s.QueryDetailed(key), r.QueryDetailed(key)
			trace = append(trace, fmt.Sprintf("QueryDetailed(%s) = %v / ref %v", key, g.Aggregate, w.Score))
			if !agree(g.Aggregate, w.Score) || len(g.LevelScores) != len(w.Levels) {
				fail("op %d: QueryDetailed(%s) = %v, reference %v", i, key, g.Aggregate, w.Score)
			}
			for l, lv := range w.Levels {
				if g.CellIndexes[l] != lv.Index || !agree(g.LevelScores[l], lv.Score) {
					fail("op %d: QueryDetailed(%s) level %d: cell %d score %v, reference cell %d score %v", i, key, l, g.CellIndexes[l], g.LevelScores[l], lv.Index, lv.Score)
				}
			}
		}
	}
}

var _ sketch.Clock = a76RefClock{}

// a76HWClock reads the fake clock through one high-water mark shared by
// every sketch it is given to.
type a76HWClock struct {
	c  *grudgetest.FakeClock
	hw atomic.Int64
	ok atomic.Bool
}

func (h *a76HWClock) NowMillis() int64 {
	now := h.c.Now().UnixMilli()
	for {
		old := h.hw.Load()
		if h.ok.Load() && old >= now {
			return old
		}
		if h.hw.CompareAndSwap(old, now) {
			h.ok.Store(true)
			return now
		}
	}
}

// TestAudit76LazyRotatorDifferential drives a lazy root Rotator (Ticker
// nil) and the mutex reference rotator (internal/ref, grudge's design,
// rotated by hand at every boundary t0 + k*Period the clock's high-water
// mark passes) through the same operations under the adversarial clock:
// steps backwards, idle times over 2^31 / 2^32 ms, jumps over many
// periods, Periods above 2^32 ms. migrating.md, "Rotation on access":
// "An idle rotator does not rotate until it is used, which changes
// nothing observable: the first access sees exactly the generations it
// would have seen. A clock jump over k periods retires k generations at
// once, and Rotations() counts k". Exact laws and integer deltas: every
// reading, decision and Rotations() count must be the reference's.
func TestAudit76LazyRotatorDifferential(t *testing.T) {
	testsize.Serial(t)
	periods := []time.Duration{7 * time.Millisecond, 250 * time.Millisecond, 3 * time.Second,
		50 * 24 * time.Hour, 1<<32*time.Millisecond + time.Millisecond}
	seed := uint64(7800)
	for _, p := range periods {
		for _, gens := range []uint32{0, 2, 3, 5} {
			for _, law := range []grudge.Decay{grudge.None(), grudge.Linear(1000)} {
				for _, user := range []bool{false, true} {
					seed++
					name := fmt.Sprintf("P=%v/G=%d/%T/user=%v", p, gens, law, user)
					a76RotDiff(t, name, seed, p, gens, law, user, false)
				}
			}
		}
	}
}

// TestAudit76TickerRotatorDifferential is the same with a
// grudgetest.FakeTicker: one rotation per Tick, none from the clock
// (migrating.md: "Ticker set: rotation follows its ticks, as in grudge").
func TestAudit76TickerRotatorDifferential(t *testing.T) {
	seed := uint64(7900)
	for _, gens := range []uint32{2, 4} {
		for _, law := range []grudge.Decay{grudge.None(), grudge.Linear(1000)} {
			for _, p := range []time.Duration{0, 5 * time.Millisecond} {
				seed++
				a76RotDiff(t, fmt.Sprintf("ticker/G=%d/%T/P=%v", gens, law, p), seed, p, gens, law, false, true)
			}
		}
	}
}

func a76RotDiff(t *testing.T, name string, seed uint64, period time.Duration, gens uint32, law grudge.Decay, user, ticker bool) {
	t.Helper()
	clk := grudgetest.NewFakeClock()
	clk.Set(time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC))
	cfg := grudge.RotatorConfig{
		Sketch: grudge.Config{Levels: 3, CellsPerLevel: 64, Decay: law, Lo: -30, Hi: 40,
			Hasher: func(uint64) grudge.Hasher { return a76SpreadHasher{} }},
		Generations: gens,
		Period:      period,
	}
	if user {
		cfg.Sketch.Clock = a76UserClock{clk}
	} else {
		cfg.Sketch.Clock = clk
	}
	var tk *grudgetest.FakeTicker
	if ticker {
		tk = grudgetest.NewFakeTicker()
		cfg.Ticker = tk
	}
	root, err := grudge.NewRotator(cfg)
	if err != nil {
		t.Fatalf("%s: NewRotator: %v", name, err)
	}
	defer root.Close()
	t0 := clk.Now().UnixMilli()
	nc := root.Native().Config()
	sc := nc.Sketch
	// one high-water mark for every reference generation: the
	// documented semantics ("every reading here goes through one
	// high-water mark"); the reference rotator's generations each keep
	// their own, which after a backwards step disagree.
	sc.Clock = &a76HWClock{c: clk}
	refPeriod := nc.Period
	if refPeriod <= 0 {
		refPeriod = time.Hour
	}
	rr, err := ref.NewRotator(ref.RotatorConfig{Sketch: sc, Generations: nc.Generations, Period: refPeriod, Manual: true})
	if err != nil {
		t.Fatalf("%s: ref.NewRotator: %v", name, err)
	}
	defer rr.Close()
	pMs := int64((period + time.Millisecond - 1) / time.Millisecond)
	hw := t0
	var rotations int64
	sync := func() {
		if ticker {
			return
		}
		if now := clk.Now().UnixMilli(); now > hw {
			hw = now
		}
		want := (hw - t0) / pMs
		for ; rotations < want && rotations-want < 0; rotations++ {
			if want-rotations > int64(nc.Generations)+1 {
				// every generation is retired either way: rotate the
				// reference N+1 times and count the rest.
				for range int(nc.Generations) + 1 {
					rr.Rotate()
				}
				rotations = want
				break
			}
			rr.Rotate()
		}
	}
	rng := rand.New(rand.NewPCG(seed, 76))
	var trace []string
	fail := func(format string, args ...any) {
		t.Helper()
		n := len(trace)
		if n > 400 {
			trace = trace[n-400:]
		}
		t.Fatalf("%s: "+format+"\nlast steps:\n  %v", append([]any{name}, append(args, trace)...)...)
	}
	for i := 0; i < 1500; i++ {
		switch rng.IntN(6) {
		case 0:
			d := a76Move(rng)
			if rng.IntN(2) == 0 && pMs > 0 && pMs < 1<<40 {
				// land on, just before or just after a period boundary
				next := t0 + ((hw-t0)/pMs+int64(rng.IntN(3)))*pMs + int64(rng.IntN(3)-1)
				d = time.Duration(next-clk.Now().UnixMilli()) * time.Millisecond
			}
			clk.Advance(d)
			trace = append(trace, fmt.Sprintf("advance %v (now t0%+d ms)", d, clk.Now().UnixMilli()-t0))
		case 1:
			if ticker {
				tk.Tick()
				rr.Rotate()
				rotations++
				trace = append(trace, "tick")
			}
		}
		sync()
		key := []byte(fmt.Sprintf("k%d", rng.IntN(5)))
		d := float64(rng.IntN(9) - 3)
		switch rng.IntN(6) {
		case 0, 1:
			root.Update(key, d)
			rr.Update(key, d)
			trace = append(trace, fmt.Sprintf("Update(%s, %v)", key, d))
		case 2:
			g, w := root.Query(key), rr.Query(key)
			trace = append(trace, fmt.Sprintf("Query(%s) = %v / ref %v", key, g, w))
			if g != w {
				fail("op %d: Query(%s) = %v, reference %v (rotations %d)", i, key, g, w, rotations)
			}
		case 3:
			g, w := root.UpdateAndQuery(key, d), rr.UpdateAndQuery(key, d)
			trace = append(trace, fmt.Sprintf("UpdateAndQuery(%s, %v) = %v / ref %v", key, d, g, w))
			if g != w {
				fail("op %d: UpdateAndQuery(%s, %v) = %v, reference %v", i, key, d, g, w)
			}
		case 4:
			cur := rr.Query(key)
			limit := cur + d + float64(rng.IntN(3)-1)
			g, w := root.TryUpdate(key, d, limit), rr.TryUpdate(key, d, limit)
			trace = append(trace, fmt.Sprintf("TryUpdate(%s, %v, %v) = %v / ref %v", key, d, limit, g, w))
			if g != w {
				fail("op %d: TryUpdate(%s, %v, %v) = %v, reference %v (reference aggregate %v)", i, key, d, limit, g, w, cur)
			}
		case 5:
			g, w := root.QueryDetailed(key), rr.QueryDetailed(key)
			if g.Aggregate != w.Score {
				fail("op %d: QueryDetailed(%s) = %v, reference %v", i, key, g.Aggregate, w.Score)
			}
			if rng.IntN(4) == 0 {
				if got := root.Rotations(); got != rotations {
					fail("op %d: Rotations() = %d, want %d", i, got, rotations)
				}
			}
		}
	}
}

// a76SpreadHasher places keys "k0".."k9" in distinct cells at every level,
// whatever the seed (h1 = digit<<28, h2 = 2^20+1): with negative scores
// and Min, one shared cell would otherwise pull a key down, and the two
// rotators hash later generations under seeds that need not match.
type a76SpreadHasher struct{}

func (a76SpreadHasher) Hash64(key []byte) uint64 {
	i := uint64(9) // "" (Rotations' own access)
	if len(key) > 0 {
		i = uint64(key[len(key)-1] - '0')
	}
	return (1<<20+1)<<32 | i<<28
}
