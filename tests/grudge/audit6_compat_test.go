package grudge_test

import (
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
)

// audit6Clock is a user's own grudge.Clock (Now only), with monotonic
// readings, as a real-time wrapper would have.
type audit6Clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *audit6Clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *audit6Clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func newAudit6Clock() *audit6Clock { return &audit6Clock{t: time.Now()} } // carries a monotonic reading

// TestAudit6Defaults: the zero Config is refused (Lo and Hi must bracket 0
// with Lo < Hi) with ErrInvalidConfig; Levels 0 means 4, CellsPerLevel 0
// means 100,000, Decay nil means None, Aggregator nil means Min.
func TestAudit6Defaults(t *testing.T) {
	if _, err := grudge.New(grudge.Config{}); !errors.Is(err, grudge.ErrInvalidConfig) {
		t.Fatalf("New(Config{}) = %v, want ErrInvalidConfig", err)
	}
	var ce *grudge.ConfigError
	if _, err := grudge.New(grudge.Config{Lo: 1, Hi: 2}); !errors.As(err, &ce) {
		t.Fatalf("Lo > 0: %v, want *ConfigError", err)
	}
	clk := grudgetest.NewFakeClock()
	s, err := grudge.New(grudge.Config{Hi: 1e6, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	k := []byte("k")
	s.Update(k, 7)
	r := s.QueryDetailed(k)
	if len(r.LevelScores) != 4 || len(r.CellIndexes) != 4 {
		t.Fatalf("default levels: %d scores, %d indexes; want 4", len(r.LevelScores), len(r.CellIndexes))
	}
	for _, ix := range r.CellIndexes {
		if ix >= 100_000 {
			t.Fatalf("index %d outside default M=100000", ix)
		}
	}
	// M=100,000 exactly: over many keys some index should reach above 99,000
	// (with M != 100k defaults, e.g. 2^17, some would exceed 99,999).
	maxIx := uint32(0)
	for i := 0; i < 3000; i++ {
		for _, ix := range s.QueryDetailed([]byte{byte(i), byte(i >> 8), 'x'}).CellIndexes {
			if ix >= 100_000 {
				t.Fatalf("index %d outside default M", ix)
			}
			maxIx = max(maxIx, ix)
		}
	}
	if maxIx < 99_000 {
		t.Fatalf("max index over 12000 draws %d: M looks smaller than 100000", maxIx)
	}
	clk.Advance(1000 * 24 * time.Hour)
	if q := s.Query(k); q != 7 {
		t.Fatalf("nil Decay must be None: after 1000 days Query = %v, want 7", q)
	}
	// nil Aggregator is Min: the aggregate equals the least level score.
	for i := 0; i < 200; i++ {
		s.Update([]byte{byte(i), 'y'}, float64(i%9))
	}
	for i := 0; i < 200; i++ {
		r := s.QueryDetailed([]byte{byte(i), 'y'})
		m := math.Inf(1)
		for _, v := range r.LevelScores {
			m = math.Min(m, v)
		}
		if r.Aggregate != m {
			t.Fatalf("nil Aggregator: aggregate %v, min of levels %v", r.Aggregate, m)
		}
	}
}

// TestAudit6QueryAfterIdle: Query after idle time returns the decayed score
// (Linear moves toward 0 by rate/s and stops at 0; Exponential multiplies
// by exp(-lambda*s), never below the truth), on a user's own Clock; a
// backwards clock is no time passing.
func TestAudit6QueryAfterIdle(t *testing.T) {
	clk := newAudit6Clock()
	lin, err := grudge.New(grudge.Config{Hi: 100, Decay: grudge.Linear(2), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	exp, err := grudge.New(grudge.Config{Hi: 100, Decay: grudge.Exponential(math.Ln2), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	k := []byte("idle")
	if got := lin.UpdateAndQuery(k, 10); got != 10 {
		t.Fatalf("UpdateAndQuery = %v", got)
	}
	exp.Update(k, 8)
	clk.add(3 * time.Second)
	if q := lin.Query(k); q != 4 {
		t.Fatalf("Linear(2) after 3 s: %v, want 4", q)
	}
	if q := exp.Query(k); q < 1 || math.Abs(q-1) > 1e-6 {
		t.Fatalf("Exponential(ln2) 8 after 3 s: %v, want 1 (not below)", q)
	}
	clk.add(-2 * time.Second)
	if q := lin.Query(k); q != 4 {
		t.Fatalf("backwards clock: %v, want 4", q)
	}
	clk.add(2*time.Second + 10*time.Second)
	if q := lin.Query(k); q != 0 {
		t.Fatalf("Linear long idle: %v, want 0", q)
	}
	clk.add(365 * 24 * time.Hour)
	if q := exp.Query(k); q < 0 || q > 1e-30 {
		t.Fatalf("Exponential after a year: %v", q)
	}
}

// TestAudit6MethodShapes: TryUpdate(key, delta, limit) decides aggregate +
// delta <= limit; QueryDetailed's Aggregate is what Query returns; a limit
// above Hi is accepted and scores stay clamped at Hi.
func TestAudit6MethodShapes(t *testing.T) {
	clk := grudgetest.NewFakeClock()
	s, err := grudge.New(grudge.Config{Levels: 3, CellsPerLevel: 1000, Hi: 10, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	k := []byte("shape")
	if !s.TryUpdate(k, 3, 5) || s.TryUpdate(k, 3, 5) || !s.TryUpdate(k, 2, 5) {
		t.Fatal("TryUpdate(key, delta, limit) does not decide aggregate+delta <= limit")
	}
	if q := s.Query(k); q != 5 {
		t.Fatalf("Query = %v, want 5", q)
	}
	if !s.TryUpdate(k, 20, 1e9) {
		t.Fatal("limit above Hi refused")
	}
	r := s.QueryDetailed(k)
	if r.Aggregate != 10 || s.Query(k) != 10 || len(r.LevelScores) != 3 {
		t.Fatalf("clamp at Hi: %+v, Query %v", r, s.Query(k))
	}
}

// TestAudit6LazyRotator: without a Ticker, rotation happens every Period,
// lazily; a write lives at most Generations x Period and is read until then
// (every generation saw it); Rotations counts elapsed periods.
func TestAudit6LazyRotator(t *testing.T) {
	clk := grudgetest.NewFakeClock()
	clk.Set(time.UnixMilli(1_700_000_000_000))
	rot, err := grudge.NewRotator(grudge.RotatorConfig{
		Sketch:      grudge.Config{Hi: 100, Clock: clk},
		Generations: 3,
		Period:      10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer rot.Close()
	k := []byte("r")
	rot.Update(k, 5)
	for i, tc := range []struct {
		adv  time.Duration
		want float64
		rots int64
	}{
		{9999 * time.Millisecond, 5, 0},
		{1 * time.Millisecond, 5, 1},
		{10 * time.Second, 5, 2},
		{9999 * time.Millisecond, 5, 2},
		{1 * time.Millisecond, 0, 3},
	} {
		clk.Advance(tc.adv)
		if q, n := rot.Query(k), rot.Rotations(); q != tc.want || n != tc.rots {
			t.Fatalf("step %d: Query %v Rotations %d; want %v, %d", i, q, n, tc.want, tc.rots)
		}
	}
	// TryUpdate reads the primary, writes all.
	if !rot.TryUpdate(k, 4, 4) || rot.TryUpdate(k, 1, 4) {
		t.Fatal("rotator TryUpdate(key, delta, limit)")
	}
	clk.Advance(25 * time.Second)
	if q, n := rot.Query(k), rot.Rotations(); q != 4 || n != 5 {
		t.Fatalf("after 2.5 periods: Query %v Rotations %d; want 4, 5", q, n)
	}
	clk.Advance(5 * time.Second)
	if q := rot.Query(k); q != 0 {
		t.Fatalf("after N x Period: %v, want 0", q)
	}
	rot.Close()
	rot.Close()
}

// TestAudit6TickerRotator: with a Ticker, rotation follows its ticks, not
// the clock; Close stops the ticker (idempotent) and operations keep working.
func TestAudit6TickerRotator(t *testing.T) {
	clk := grudgetest.NewFakeClock()
	ft := grudgetest.NewFakeTicker()
	rot, err := grudge.NewRotator(grudge.RotatorConfig{
		Sketch: grudge.Config{Hi: 100, Clock: clk},
		Ticker: ft, // Period optional with a Ticker
	})
	if err != nil {
		t.Fatal(err)
	}
	k := []byte("t")
	rot.Update(k, 3)
	clk.Advance(1000 * time.Hour)
	if q, n := rot.Query(k), rot.Rotations(); q != 3 || n != 0 {
		t.Fatalf("no tick: Query %v Rotations %d", q, n)
	}
	ft.Tick()
	if q, n := rot.Query(k), rot.Rotations(); q != 3 || n != 1 {
		t.Fatalf("one tick (N=2 default): Query %v Rotations %d; want 3, 1", q, n)
	}
	ft.Tick()
	if q, n := rot.Query(k), rot.Rotations(); q != 0 || n != 2 {
		t.Fatalf("two ticks: Query %v Rotations %d; want 0, 2", q, n)
	}
	rot.Close()
	rot.Close()
	if !ft.Stopped() {
		t.Fatal("Close did not stop the Ticker")
	}
	rot.Update(k, 2)
	if q := rot.UpdateAndQuery(k, 1); q != 3 {
		t.Fatalf("after Close: %v", q)
	}
}

// TestAudit6SuggestLevelsOrder: grudge's argument order (hotKeys,
// cellsPerLevel, targetP).
func TestAudit6SuggestLevelsOrder(t *testing.T) {
	// H=1000, M=100000: p1 = 1-(1-1e-5)^1000 ~ 0.00995 <= 0.01 -> L=1.
	if got := suggested(grudge.SuggestLevels(1000, 100_000, 0.01)); got != 1 {
		t.Fatalf("SuggestLevels(1000, 100000, 0.01) = %d, want 1", got)
	}
	// p1 ~ 0.00995; p1^2 ~ 9.9e-5 <= 1e-4 -> L=2.
	if got := suggested(grudge.SuggestLevels(1000, 100_000, 1e-4)); got != 2 {
		t.Fatalf("SuggestLevels(1000, 100000, 1e-4) = %d, want 2", got)
	}
	if got := suggested(grudge.SuggestLevels(0, 100_000, 0.01)); got != 0 {
		t.Fatalf("degenerate: %d", got)
	}
	if _, err := grudge.SuggestLevels(10, 0, 0.01); err == nil {
		t.Fatal("SuggestLevels accepted M=0")
	}
}
