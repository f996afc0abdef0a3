package grudge_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	grudge "github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a87MonoClock is a user's Clock (Now only) whose readings carry a
// monotonic reading: time.Now() taken once, moved by Add (which moves the
// wall and the monotonic reading alike), in a rotating set of Locations.
type a87MonoClock struct {
	base time.Time
	off  atomic.Int64 // ns
	n    atomic.Int64
}

var a87Locs = []*time.Location{time.UTC, time.FixedZone("east", 5*3600+1800), time.FixedZone("west", -11*3600)}

func (c *a87MonoClock) Now() time.Time {
	return c.base.Add(time.Duration(c.off.Load())).In(a87Locs[c.n.Add(1)%3])
}

func (c *a87MonoClock) Advance(d time.Duration) { c.off.Add(int64(d)) }

// TestAudit87RootClockMonotonicReadings: a root Config.Clock whose Now()
// returns times with a monotonic reading (derived from time.Now()) in
// various Locations. Config.Clock: the sketch reads it once per operation,
// counts whole milliseconds, and "a reading earlier than one already seen
// counts as no time passing"; API.md: a time.Time passed to an At form
// "is converted to the sketch's own scale (monotonic reading when present),
// so time.Now(), a fake clock's Now() and a stored wall time mean what
// they say". Linear(1000) takes one unit per ms, so every reading is an
// exact integer: the short forms, the At forms given the clock's Now()
// and the same instant stripped of its monotonic reading all agree; a
// backwards jump of an hour counts as no time, and decay resumes only
// once the clock passes the time already seen.
func TestAudit87RootClockMonotonicReadings(t *testing.T) {
	base := time.Now()
	base = base.Add(-time.Duration(base.Nanosecond() % 1e6)) // a whole ms; Add keeps the monotonic reading
	clk := &a87MonoClock{base: base}
	s, err := grudge.New(grudge.Config{Levels: 3, CellsPerLevel: 1 << 10, Decay: grudge.Linear(1000), Hi: 1e6, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	r, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: grudge.Config{Levels: 3, CellsPerLevel: 1 << 10, Decay: grudge.Linear(1000), Hi: 1e6, Clock: clk},
		Generations: 4, Period: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	k := []byte("k")
	s.Update(k, 5000)
	r.Update(k, 5000)
	check := func(step string, want float64) {
		t.Helper()
		now := clk.Now()
		for name, got := range map[string]float64{
			"sketch Query":          s.Query(k),
			"sketch QueryAt(Now)":   s.Native().QueryAt(now, "k"),
			"sketch QueryAt(wall)":  s.Native().QueryAt(now.Round(0), "k"),
			"rotator Query":         r.Query(k),
			"rotator QueryAt(Now)":  r.Native().QueryAt(now, "k"),
			"rotator QueryAt(wall)": r.Native().QueryAt(now.Round(0), "k"),
		} {
			if got != want {
				t.Fatalf("%s: %s = %v, want %v", step, name, got, want)
			}
		}
	}
	check("start", 5000)
	clk.Advance(250 * time.Millisecond)
	check("+250ms", 4750)
	clk.Advance(-time.Hour)
	check("back 1h", 4750)
	clk.Advance(time.Hour - 50*time.Millisecond)
	check("still behind", 4750)
	clk.Advance(80 * time.Millisecond)
	check("+30ms past the mark", 4720)
	clk.Advance(1500 * time.Microsecond) // 1.5 ms: whole ms only
	check("+1.5ms", 4719)
	clk.Advance(500 * time.Microsecond)
	check("+2ms", 4718)
	if got := r.Rotations(); got != 0 {
		t.Fatalf("Rotations = %d within the first hour", got)
	}
	clk.Advance(time.Hour)
	if got := r.Rotations(); got != 1 {
		t.Fatalf("Rotations = %d an hour on, want 1", got)
	}
}

// TestAudit87RootRotatorQueryDetailedPrimary: a root Rotator's
// QueryDetailed is "the primary generation's per-level view": its
// Aggregate is Query's, LevelScores are decayed to now, and once a key's
// writes before a rotation are gone from the primary, LevelScores show
// only what the primary holds. N = 2, Linear(1000), no collisions.
func TestAudit87RootRotatorQueryDetailedPrimary(t *testing.T) {
	clk := grudgetest.NewFakeClock()
	r, err := grudge.NewRotator(grudge.RotatorConfig{
		Sketch:      grudge.Config{Levels: 4, CellsPerLevel: 1 << 12, Decay: grudge.Linear(1000), Hi: 1e6, Clock: clk},
		Generations: 2, Period: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	k := []byte("k")
	r.Update(k, 3000) // at 0: in the generations born at 0
	clk.Advance(1500 * time.Millisecond)
	r.Update(k, 700) // at 1.5 s: primary (born at 0) and the newborn (born at 1 s)
	check := func(want float64) {
		t.Helper()
		d := r.QueryDetailed(k)
		if d.Aggregate != want || r.Query(k) != want || len(d.LevelScores) != 4 || len(d.CellIndexes) != 4 {
			t.Fatalf("QueryDetailed %+v, Query %v; want aggregate %v over 4 levels", d, r.Query(k), want)
		}
		for l, v := range d.LevelScores {
			if v != want || d.CellIndexes[l] >= 1<<12 {
				t.Fatalf("level %d: cell %d score %v, want %v", l, d.CellIndexes[l], v, want)
			}
		}
	}
	check(3000 - 1500 + 700) // 2200
	clk.Advance(400 * time.Millisecond)
	check(1800)
	clk.Advance(100 * time.Millisecond) // 2 s
	check(700 - 500)                    // the generation built at 1.5 s is now the primary
	clk.Advance(time.Second)            // 3 s: the one built at 2 s, never written
	check(0)
}

// TestAudit87RootSuggestLevelsMonotone: SuggestLevels is "the smallest
// number of levels L (1..8) whose false-positive probability
// (1 - (1 - 1/M)^H)^L ... is at most targetP", so its answer never grows
// when targetP grows or M grows, and never shrinks when H grows; valid
// inputs at the edges (the least subnormal targetP, the float64 just
// below 1, M at MaxUint32, M = 1) answer 1..8 without error; -0 is
// not in (0, 1) and is refused, naming targetP.
func TestAudit87RootSuggestLevelsMonotone(t *testing.T) {
	sl := func(h, m uint32, p float64) uint32 {
		t.Helper()
		l, err := grudge.SuggestLevels(h, m, p)
		if err != nil || l < 1 || l > 8 {
			t.Fatalf("SuggestLevels(%d, %d, %v) = %d, %v; want 1..8, nil", h, m, p, l, err)
		}
		return l
	}
	ps := []float64{5e-324, 1e-12, 1e-3, 0.05, 0.3, 0.9, math.Nextafter(1, 0)}
	hs := []uint32{1, 10, 1000, 1 << 20} // not 2^32-1: with few cells its 512-bit rate takes 100+ MB and 0.2 s a call
	ms := []uint32{1, 16, 100_000, math.MaxUint32}
	for _, h := range hs {
		for _, m := range ms {
			prev := uint32(9)
			for _, p := range ps {
				l := sl(h, m, p)
				if l > prev {
					t.Fatalf("SuggestLevels(%d, %d, %v) = %d, above %d for a smaller targetP", h, m, p, l, prev)
				}
				prev = l
			}
		}
	}
	for _, p := range ps {
		for _, m := range ms {
			prev := uint32(0)
			for _, h := range hs {
				l := sl(h, m, p)
				if l < prev {
					t.Fatalf("SuggestLevels(%d, %d, %v) = %d, below %d for fewer hot keys", h, m, p, l, prev)
				}
				prev = l
			}
		}
		for _, h := range hs {
			prev := uint32(9)
			for _, m := range ms {
				l := sl(h, m, p)
				if l > prev {
					t.Fatalf("SuggestLevels(%d, %d, %v) = %d, above %d for fewer cells", h, m, p, l, prev)
				}
				prev = l
			}
		}
	}
	if l := sl(1, math.MaxUint32, 0.5); l != 1 {
		t.Fatalf("SuggestLevels(1, MaxUint32, 0.5) = %d, want 1 (rate 2^-32)", l)
	}
	if l := sl(3, 1, math.Nextafter(1, 0)); l != 8 {
		t.Fatalf("SuggestLevels(3, 1, 1-ulp) = %d, want 8 (every key collides: rate 1 at every L)", l)
	}
	if l, err := grudge.SuggestLevels(10, 100, math.Copysign(0, -1)); err == nil || !strings.HasPrefix(err.Error(), "grudge: ") || !strings.Contains(err.Error(), "targetP") {
		t.Fatalf("SuggestLevels(10, 100, -0) = %d, %v; want a \"grudge: \" error naming targetP", l, err)
	}
}

// TestAudit87RootSeedsPerGeneration: doc.go "Each Sketch (each
// generation) draws a random hash seed"; RotatorConfig.Sketch "every
// generation; each hashes under its own seed". A recording HasherFactory
// sees distinct seeds for two root sketches of one Config and for every
// generation a Rotator builds (N = 4 up front, one per period after), and
// their 32-bit folds (what Murmur3 keys on) are distinct too.
func TestAudit87RootSeedsPerGeneration(t *testing.T) {
	var mu sync.Mutex
	seen := map[uint64]bool{}
	rec := func(seed uint64) grudge.Hasher {
		mu.Lock()
		seen[seed] = true
		mu.Unlock()
		return grudge.Murmur3()(seed)
	}
	clk := grudgetest.NewFakeClock()
	cfg := grudge.Config{Levels: 2, CellsPerLevel: 64, Hi: 10, Hasher: rec, Clock: clk}
	for range 2 {
		if _, err := grudge.New(cfg); err != nil {
			t.Fatal(err)
		}
	}
	if len(seen) != 2 {
		t.Fatalf("two sketches hashed under %d distinct seeds, want 2", len(seen))
	}
	r, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: cfg, Generations: 4, Period: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		clk.Advance(time.Second)
		r.Update([]byte("k"), 1)
	}
	if n := r.Rotations(); n != 10 {
		t.Fatalf("Rotations = %d, want 10", n)
	}
	if len(seen) < 2+4+10 {
		t.Fatalf("%d distinct seeds for 2 sketches and 14 generations", len(seen))
	}
	folds := map[uint32]bool{}
	for s := range seen {
		folds[uint32(s)^uint32(s>>32)] = true
	}
	if len(folds) != len(seen) {
		t.Fatalf("%d seeds fold to %d 32-bit Murmur3 seeds", len(seen), len(folds))
	}
}

// TestAudit87RootFakeClockExact: grudgetest.FakeClock "reads Unix time,
// starts at the Unix epoch, and keeps sub-millisecond parts as a clock
// holding a time.Time does"; Set puts it at t. Against a time.Time moved
// by the same Advances and Sets (negative, sub-ms, before the epoch),
// Now() is that time exactly and NowMillis() its UnixMilli.
func TestAudit87RootFakeClockExact(t *testing.T) {
	clk := grudgetest.NewFakeClock()
	want := time.Unix(0, 0)
	rng := rand.New(rand.NewPCG(87, 87))
	for i := range 5000 {
		switch rng.IntN(12) {
		case 0:
			want = time.Unix(rng.Int64N(1<<34)-1<<33, rng.Int64N(1e9))
			clk.Set(want)
		case 1:
			d := -time.Duration(rng.Int64N(int64(10 * time.Second)))
			clk.Advance(d)
			want = want.Add(d)
		default:
			d := time.Duration(rng.Int64N(int64(3*time.Millisecond))) - time.Millisecond
			clk.Advance(d)
			want = want.Add(d)
		}
		if got := clk.Now(); !got.Equal(want) || clk.NowMillis() != want.UnixMilli() {
			t.Fatalf("step %d: Now %v (NowMillis %d), want %v (%d)", i, got, clk.NowMillis(), want, want.UnixMilli())
		}
	}
}

// TestAudit87RootConcurrentClockAndRotations: grudgetest.FakeClock is
// "Safe for concurrent use: readers may race with Advance and Set", and
// (migrating.md) Now never goes back while only forward moves run; a lazy
// Rotator's Rotations only grows ("the number of rotations so far"). One
// goroutine advances the clock 1000 times by 300 µs while readers check
// that Now, NowMillis and Rotations never go back, at GOMAXPROCS 1 to 8;
// at the end Rotations is exactly floor(300 ms / Period).
func TestAudit87RootConcurrentClockAndRotations(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		clk := grudgetest.NewFakeClock()
		r, err := grudge.NewRotator(grudge.RotatorConfig{
			Sketch: grudge.Config{Levels: 2, CellsPerLevel: 64, Hi: 10, Clock: clk}, Generations: 3, Period: 7 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		var done atomic.Bool
		var wg sync.WaitGroup
		errs := make(chan string, 4)
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var lastT time.Time
				var lastMs, lastRot int64
				for !done.Load() {
					now, ms, rot := clk.Now(), clk.NowMillis(), r.Rotations()
					r.Update([]byte("k"), 1)
					if now.Before(lastT) || ms < lastMs || rot < lastRot {
						errs <- fmt.Sprintf("went back: Now %v after %v, NowMillis %d after %d, Rotations %d after %d", now, lastT, ms, lastMs, rot, lastRot)
						return
					}
					lastT, lastMs, lastRot = now, ms, rot
				}
			}()
		}
		for range 1000 {
			clk.Advance(300 * time.Microsecond)
		}
		done.Store(true)
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Fatal(e)
		}
		if got := r.Rotations(); got != 300/7 {
			t.Fatalf("Rotations = %d at 300 ms, want %d", got, 300/7)
		}
	})
}

// a87TableHasher hashes the keys of its table to the given 64-bit values.
type a87TableHasher map[string]uint64

func (h a87TableHasher) Hash64(key []byte) uint64 { return h[string(key)] }

// TestAudit87RootPlacementFromHash: Hasher's doc: "Level l of a key uses
// the cell (h1 + l*h2) reduced to [0, M), h1 and h2 the low and high 32
// bits of the hash (h2 forced odd ...)". With a user Hasher giving chosen
// hashes: two keys whose h1 + l*h2 agree (mod 2^32) at level l only share
// that level's cell (QueryDetailed's CellIndexes) and no other; a key
// whose h2 differs only in its low bit shares every cell (and so its
// score under Min); CellIndexes are in [0, M).
func TestAudit87RootPlacementFromHash(t *testing.T) {
	const M = 1 << 20
	mk := func(h1, h2 uint32) uint64 { return uint64(h2)<<32 | uint64(h1) }
	h1, h2 := uint32(0x9e3779b9), uint32(0x7f4a7c15)
	table := a87TableHasher{"base": mk(h1, h2), "evenh2": mk(h1, h2-1)}
	const D = 0x40000001 // odd, and (j-l)*D moves g by a quarter turn or more: another cell
	for l := range uint32(4) {
		// level l agrees: h1' + l*(h2+D) == h1 + l*h2; level j differs by (j-l)*D
		table[fmt.Sprintf("at%d", l)] = mk(h1-l*D, h2+D)
	}
	s, err := grudge.New(grudge.Config{Levels: 4, CellsPerLevel: M, Hi: 100,
		Hasher: func(uint64) grudge.Hasher { return table }})
	if err != nil {
		t.Fatal(err)
	}
	base := s.QueryDetailed([]byte("base")).CellIndexes
	for l := range uint32(4) {
		got := s.QueryDetailed([]byte(fmt.Sprintf("at%d", l))).CellIndexes
		for j := range uint32(4) {
			if (got[j] == base[j]) != (j == l) || got[j] >= M {
				t.Fatalf("key agreeing at level %d: cells %v, base %v", l, got, base)
			}
		}
	}
	if got := s.QueryDetailed([]byte("evenh2")).CellIndexes; fmt.Sprint(got) != fmt.Sprint(base) {
		t.Fatalf("h2 - 1 (even, forced odd to h2): cells %v, base %v", got, base)
	}
	s.Update([]byte("base"), 3)
	if q := s.Query([]byte("evenh2")); q != 3 {
		t.Fatalf("a key sharing every cell reads %v, want 3 (Min over shared cells)", q)
	}
	if q := s.Query([]byte("at1")); q != 0 {
		t.Fatalf("a key sharing one level of four reads %v, want 0", q)
	}
}
