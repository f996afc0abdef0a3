package grudge_test

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
	"github.com/lfgrudge/grudge/internal/testsize"
)

// grudge.None has two spellings, a value (Decay: grudge.None, as grudge
// declares it) and a call (grudge.None(), as API.md spells it), so None is
// a function value, and a function value cannot be compared: config.go and
// docs/migrating.md document that comparing it as a Decay panics and that
// grudge.None() is the comparable spelling. Audit 30 found the panic
// (TestAudit30FindingNoneNotComparable); this pins the documented
// behaviour both ways: every other law and grudge.None() compare, and the
// value spelling panics rather than answering a wrong equality.
func TestAudit30NoneComparableAsDocumented(t *testing.T) {
	laws := map[string]grudge.Decay{"Linear": grudge.Linear(1), "Exp": grudge.Exponential(1), "None()": grudge.None()}
	for name, l := range laws {
		if l != l { // comparable, no panic
			t.Fatalf("%s != itself", name)
		}
	}
	if grudge.None() != grudge.None() {
		t.Fatal("grudge.None() != grudge.None()")
	}
	var d grudge.Decay = grudge.None
	var p any
	func() {
		defer func() { p = recover() }()
		_ = d == grudge.Decay(grudge.None)
	}()
	if p == nil {
		t.Error("comparing the value spelling grudge.None as a Decay did not panic: update config.go's None doc and docs/migrating.md, which say it does")
	}
	// Either spelling decays as the identity inside a sketch.
	for _, law := range []grudge.Decay{grudge.None, grudge.None()} {
		clk := grudgetest.NewFakeClock()
		s, err := grudge.New(grudge.Config{Decay: law, Hi: 100, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		s.Update([]byte("k"), 7)
		clk.Advance(1000 * time.Hour)
		if got := s.Query([]byte("k")); got != 7 {
			t.Fatalf("None decayed: 7 read %v after 1000 h", got)
		}
	}
}

// Lazy rotation boundaries are on the grid of the rotator's creation time,
// as a ticker started at NewRotator would tick, not on multiples of Period
// since the Unix epoch.
func TestAudit30LazyRotationGridFromCreation(t *testing.T) {
	clk := grudgetest.NewFakeClock()
	t0 := time.UnixMilli(1_000_500) // 1000.5 s: not a multiple of 10 s
	clk.Set(t0)
	r, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: grudge.Config{Hi: 10, Clock: clk}, Period: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	clk.Set(t0.Add(10*time.Second - time.Millisecond))
	if n := r.Rotations(); n != 0 {
		t.Errorf("1 ms before the first Period after creation: Rotations = %d, want 0", n)
	}
	clk.Set(t0.Add(10 * time.Second))
	if n := r.Rotations(); n != 1 {
		t.Errorf("a Period after creation: Rotations = %d, want 1", n)
	}
	clk.Set(t0.Add(35 * time.Second))
	if n := r.Rotations(); n != 3 {
		t.Errorf("3.5 Periods after creation: Rotations = %d, want 3", n)
	}
	clk.Set(t0.Add(40*time.Second - time.Millisecond))
	if n := r.Rotations(); n != 3 {
		t.Errorf("just under 4 Periods: Rotations = %d, want 3", n)
	}
	clk.Set(t0.Add(40 * time.Second))
	if n := r.Rotations(); n != 4 {
		t.Errorf("4 Periods: Rotations = %d, want 4", n)
	}
}

func audit30FPR(l, m, h uint32) float64 {
	return math.Pow(1-math.Pow(1-1/float64(m), float64(h)), float64(l))
}

// SuggestLevels: the smallest L in 1..8 with the stated false-positive
// probability at most targetP (8 when none reaches it); degenerate inputs
// give 0 and SuggestLevels's error names the argument.
func TestAudit30SuggestLevels(t *testing.T) {
	testsize.Serial(t)
	for _, h := range []uint32{1, 2, 10, 100, 1000, 10_000, 100_000, 1_000_000, math.MaxUint32} {
		for _, m := range []uint32{1, 2, 10, 1000, 100_000, 1 << 20, math.MaxUint32} {
			for _, p := range []float64{1e-300, 1e-12, 1e-6, 1e-3, 0.01, 0.1, 0.5, 0.9, 0.999999, math.Nextafter(1, 0), 5e-324} {
				l := suggested(grudge.SuggestLevels(h, m, p))
				lc, err := grudge.SuggestLevels(h, m, p)
				if err != nil || lc != l {
					t.Fatalf("Checked(%d,%d,%v) = %d, %v; SuggestLevels %d", h, m, p, lc, err, l)
				}
				if l < 1 || l > 8 {
					t.Fatalf("SuggestLevels(%d,%d,%v) = %d outside 1..8", h, m, p, l)
				}
				f := audit30FPR(l, m, h)
				if l < 8 && f > p*(1+1e-9) {
					t.Errorf("SuggestLevels(%d,%d,%v) = %d: FPR %v above target", h, m, p, l, f)
				}
				if l > 1 {
					if g := audit30FPR(l-1, m, h); g <= p*(1-1e-9) {
						t.Errorf("SuggestLevels(%d,%d,%v) = %d, but %d levels already reach FPR %v", h, m, p, l, l-1, g)
					}
				}
			}
		}
	}
	bad := []struct {
		h, m uint32
		p    float64
		arg  string
	}{
		{0, 100, 0.01, "hotKeys"},
		{10, 0, 0.01, "cellsPerLevel"},
		{10, 100, 0, "targetP"},
		{10, 100, 1, "targetP"},
		{10, 100, -0.5, "targetP"},
		{10, 100, 2, "targetP"},
		{10, 100, math.NaN(), "targetP"},
		{10, 100, math.Inf(1), "targetP"},
		{10, 100, math.Inf(-1), "targetP"},
		{10, 100, math.Copysign(0, -1), "targetP"},
	}
	for _, b := range bad {
		if l := suggested(grudge.SuggestLevels(b.h, b.m, b.p)); l != 0 {
			t.Errorf("SuggestLevels(%d,%d,%v) = %d, want 0", b.h, b.m, b.p, l)
		}
		l, err := grudge.SuggestLevels(b.h, b.m, b.p)
		if err == nil || l != 0 {
			t.Errorf("SuggestLevels(%d,%d,%v) = %d, %v; want 0 and an error", b.h, b.m, b.p, l, err)
			continue
		}
		if !strings.HasPrefix(err.Error(), "grudge: ") || !strings.Contains(err.Error(), b.arg) {
			t.Errorf("SuggestLevels(%d,%d,%v) error %q: want prefix \"grudge: \" naming %s", b.h, b.m, b.p, err, b.arg)
		}
	}
}

// A Decay of one's own is called with the whole milliseconds elapsed, per
// cell, and is refused with Hi = +Inf when it does not drain.
type audit30RecDecay struct {
	mu  *sync.Mutex
	dts *[]int64
}

func (d audit30RecDecay) Apply(s float64, dt int64) float64 {
	if dt > 0 {
		d.mu.Lock()
		*d.dts = append(*d.dts, dt)
		d.mu.Unlock()
	}
	return s // identity
}

type audit30Halver struct{}

// Apply halves the score every second (exact composition over whole seconds
// is not needed for the checks here: dt sums).
func (audit30Halver) Apply(s float64, dt int64) float64 {
	if dt <= 0 {
		return s
	}
	return s * math.Exp2(-float64(dt)/1000)
}

func TestAudit30CustomDecay(t *testing.T) {
	var mu sync.Mutex
	var dts []int64
	rec := audit30RecDecay{&mu, &dts}
	if _, err := grudge.New(grudge.Config{Hi: math.Inf(1), Decay: rec}); err == nil {
		t.Errorf("Hi=+Inf with a non-draining custom Decay accepted")
	} else {
		audit30Field(t, "custom identity with Hi=+Inf", err, "Hi")
	}
	clk := grudgetest.NewFakeClock()
	s, err := grudge.New(grudge.Config{Levels: 3, Hi: 100, Decay: rec, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	k := []byte("k")
	s.Update(k, 1)
	mu.Lock()
	dts = nil
	mu.Unlock()
	clk.Advance(1234*time.Millisecond + 999*time.Microsecond)
	s.Query(k)
	mu.Lock()
	got := append([]int64(nil), dts...)
	mu.Unlock()
	sum := int64(0)
	for _, d := range got {
		sum += d
	}
	if len(got) == 0 || sum%1234 != 0 {
		t.Errorf("custom Decay saw dts %v, want 1234 per cell", got)
	}
	// Halver: a real decaying law works and drains.
	s2, err := grudge.New(grudge.Config{Hi: math.Inf(1), Decay: audit30Halver{}, Clock: clk})
	if err != nil {
		t.Fatalf("draining custom Decay with Hi=+Inf refused: %v", err)
	}
	s2.Update(k, 1024)
	clk.Advance(3 * time.Second)
	if q := s2.Query(k); math.Abs(q-128) > 1e-3 {
		t.Errorf("halver after 3 s: %v, want 128", q)
	}
}

// Rotator QueryDetailed agrees with Query and the aggregator at each
// rotation step; UpdateAndQuery returns the primary's updated score.
func TestAudit30RotatorQueryDetailed(t *testing.T) {
	clk := grudgetest.NewFakeClock()
	tk := grudgetest.NewFakeTicker()
	r, err := grudge.NewRotator(grudge.RotatorConfig{
		Sketch:      grudge.Config{Levels: 3, CellsPerLevel: 5, Hi: 50, Aggregator: grudge.Mean, Decay: grudge.Linear(0.5), Clock: clk},
		Generations: 3, Ticker: tk,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i := range 60 {
		k := []byte(fmt.Sprintf("k%d", i%9))
		v := r.UpdateAndQuery(k, float64(i%5))
		if q := r.Query(k); q != v {
			t.Fatalf("step %d: UpdateAndQuery %v, Query %v", i, v, q)
		}
		d := r.QueryDetailed(k)
		if d.Aggregate != v || grudge.Mean(d.LevelScores) != d.Aggregate {
			t.Fatalf("step %d: Aggregate %v, Query %v, Mean(levels %v) = %v", i, d.Aggregate, v, d.LevelScores, grudge.Mean(d.LevelScores))
		}
		for _, ix := range d.CellIndexes {
			if ix >= 5 {
				t.Fatalf("index %d >= 5", ix)
			}
		}
		if i%7 == 0 {
			tk.Tick()
		}
		if i%5 == 0 {
			clk.Advance(300 * time.Millisecond)
		}
	}
}

// A sketch created with the clock far in the past or the future works:
// writes, decay over years, and backwards steps.
func TestAudit30ClockFarTimes(t *testing.T) {
	testsize.Serial(t)
	for _, start := range []time.Time{
		time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Unix(-1, 0),
	} {
		clk := grudgetest.NewFakeClock()
		clk.Set(start)
		s, err := grudge.New(grudge.Config{Hi: 1e6, Decay: grudge.Linear(1), Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		k := []byte("k")
		s.Update(k, 1000)
		clk.Advance(100 * time.Second)
		if q := s.Query(k); q != 900 {
			t.Errorf("start %v: after 100 s %v, want 900", start, q)
		}
		clk.Advance(30 * 24 * time.Hour)
		if q := s.Query(k); q != 0 {
			t.Errorf("start %v: after 30 days %v, want 0", start, q)
		}
		s.Update(k, 500)
		clk.Advance(-time.Hour)
		if q := s.Query(k); q != 500 {
			t.Errorf("start %v: after a backwards hour %v, want 500", start, q)
		}
	}
}
