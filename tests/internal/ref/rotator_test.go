package ref_test

import (
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/lfgrudge/grudge/internal/ref"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// rotTestConfig is a small rotator config whose ticker never fires during
// a test (Period one hour) unless the test says otherwise.
func rotTestConfig(clk sketch.Clock, n uint32, p time.Duration) ref.RotatorConfig {
	return ref.RotatorConfig{
		Sketch:      sketch.Config{CellsPerLevel: 1024, Hi: 1e9, Clock: clk},
		Generations: n,
		Period:      p,
	}
}

func rotTestNew(t testing.TB, cfg ref.RotatorConfig) *ref.Rotator {
	t.Helper()
	r, err := ref.NewRotator(cfg)
	if err != nil {
		t.Fatalf("NewRotator(%+v): %v", cfg, err)
	}
	t.Cleanup(r.Close)
	return r
}

func TestRotatorValidates(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	for _, tc := range []struct {
		cfg  ref.RotatorConfig
		want string
	}{
		{rotTestConfig(nil, 1, time.Second), "rotator: Generations must be >= 2; got 1"},
		{rotTestConfig(nil, 2, 0), "rotator: Period must be > 0; got 0s"},
		{rotTestConfig(nil, 2, -time.Second), "rotator: Period must be > 0; got -1s"},
		{ref.RotatorConfig{Sketch: sketch.Config{Lo: 1, Hi: 2}, Period: time.Second}, "sketch: Lo must be <= 0; got 1"},
	} {
		r, err := ref.NewRotator(tc.cfg)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("NewRotator(%+v) = %v, %v; want error %q", tc.cfg, r, err, tc.want)
		}
	}
	r := rotTestNew(t, rotTestConfig(nil, 0, time.Hour))
	if g := r.Config().Generations; g != 2 {
		t.Errorf("Config().Generations = %d; want the default 2", g)
	}
	r.Close()
}

// TestRotatorReadsOldestWritesAll: Query reads the oldest generation;
// writes reach every one; a key is forgotten after N rotations.
func TestRotatorReadsOldestWritesAll(t *testing.T) {
	for _, n := range []uint32{2, 3} {
		t.Run(fmt.Sprintf("gens=%d", n), func(t *testing.T) {
			r := rotTestNew(t, rotTestConfig(sketchtest.NewFakeClock(), n, time.Hour))
			r.UpdateString("k", 4)
			for i := range n {
				if got := r.QueryString("k"); got != 4 {
					t.Fatalf("after %d rotations Query = %v; want 4", i, got)
				}
				r.Rotate()
			}
			if got := r.QueryString("k"); got != 0 {
				t.Fatalf("after %d rotations Query = %v; want 0", n, got)
			}
			// A write after a rotation reaches the fresh generation too.
			r.UpdateString("j", 1)
			if got := r.UpdateAndQueryString("j", 1); got != 2 {
				t.Fatalf("UpdateAndQuery = %v; want 2", got)
			}
			if d := r.QueryDetailed([]byte("j")); d.Score != 2 || len(d.Levels) != 4 {
				t.Fatalf("QueryDetailed = %+v; want score 2 over 4 levels", d)
			}
		})
	}
}

// TestRotatorTicker: with a short real Period the ticker goroutine retires
// generations on its own, and a key written once is eventually forgotten.
func TestRotatorTicker(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	r, err := ref.NewRotator(rotTestConfig(nil, 2, 5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	r.UpdateString("k", 1)
	deadline := time.Now().Add(10 * time.Second)
	for r.QueryString("k") != 0 {
		if time.Now().After(deadline) {
			t.Fatal("key still present after 10 s with a 5 ms period")
		}
		r.UpdateString("other", 1) // operations race the ticker under -race
		time.Sleep(time.Millisecond)
	}
	r.Close()
}

// TestRotatorCloseStopsGoroutine: NewRotator starts exactly one goroutine;
// Close stops it, and a second Close is harmless.
func TestRotatorCloseStopsGoroutine(t *testing.T) {
	// goleak, not NumGoroutine: a goroutine of an earlier test may still
	// be exiting when this one starts (the count went 3 -> 3 -> 2 once).
	ignore := goleak.IgnoreCurrent()
	defer goleak.VerifyNone(t, ignore)
	r, err := ref.NewRotator(rotTestConfig(nil, 2, time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if goleak.Find(ignore) == nil {
		t.Error("NewRotator started no goroutine; want its ticker's")
	}
	r.Close()
	r.Close()
	if err := goleak.Find(ignore); err != nil {
		t.Errorf("after Close: %v", err)
	}
	// Operations keep working after Close.
	r.UpdateString("k", 2)
	if got := r.QueryString("k"); got != 2 {
		t.Errorf("Query after Close = %v; want 2", got)
	}
}

// TestRotatorCloseConcurrent: concurrent Close calls all return once the
// goroutine is gone.
func TestRotatorCloseConcurrent(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	r, err := ref.NewRotator(rotTestConfig(nil, 2, time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(r.Close)
	}
	wg.Wait()
}

// TestRotatorSentinel: 50 goroutines racing TryUpdate(k, 1, 1000) admit
// exactly 1000, and every generation counts them.
func TestRotatorSentinel(t *testing.T) {
	for _, p := range []int{1, 2, 8} {
		t.Run(fmt.Sprintf("procs=%d", p), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(p))
			r := rotTestNew(t, rotTestConfig(sketchtest.NewFakeClock(), 3, time.Hour))
			var admitted atomic.Int64
			var wg sync.WaitGroup
			for range 50 {
				wg.Go(func() {
					for range 100 {
						if r.TryUpdateString("k", 1, 1000) {
							admitted.Add(1)
						}
					}
				})
			}
			wg.Wait()
			if n := admitted.Load(); n != 1000 {
				t.Fatalf("admitted %d; want 1000", n)
			}
			r.Rotate()
			r.Rotate()
			if got := r.QueryString("k"); got != 1000 {
				t.Fatalf("youngest generation holds %v; want 1000", got)
			}
		})
	}
}

// TestRotatorConcurrentRotate: operations of every kind race Rotate calls
// (run under -race).
func TestRotatorConcurrentRotate(t *testing.T) {
	r := rotTestNew(t, rotTestConfig(sketchtest.NewFakeClock(), 2, time.Hour))
	var stop atomic.Bool
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			k := []byte{byte(g)}
			for !stop.Load() {
				r.Update(k, 1)
				r.Query(k)
				r.UpdateAndQuery(k, 1)
				r.TryUpdate(k, 1, 1e9)
				r.QueryDetailed(k)
			}
		})
	}
	for range 50 {
		r.Rotate()
	}
	stop.Store(true)
	wg.Wait()
	if sz := r.Sizes(); sz.Cells != 2*4*1024*24 {
		t.Fatalf("Sizes().Cells = %d; want %d", sz.Cells, 2*4*1024*24)
	}
}

// TestRotatorNonFinitePanics: NaN and ±Inf panic with the "sketch:" prefix
// before the lock is taken, so the rotator stays usable (Rotate would
// deadlock on a leaked read lock).
func TestRotatorNonFinitePanics(t *testing.T) {
	r := rotTestNew(t, rotTestConfig(sketchtest.NewFakeClock(), 2, time.Hour))
	k := []byte("k")
	for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		for name, f := range map[string]func(){
			"Update":               func() { r.Update(k, bad) },
			"UpdateString":         func() { r.UpdateString("k", bad) },
			"UpdateAndQuery":       func() { r.UpdateAndQuery(k, bad) },
			"UpdateAndQueryString": func() { r.UpdateAndQueryString("k", bad) },
			"TryUpdate/delta":      func() { r.TryUpdate(k, bad, 1) },
			"TryUpdate/limit":      func() { r.TryUpdate(k, 1, bad) },
			"TryUpdateString":      func() { r.TryUpdateString("k", 1, bad) },
		} {
			func() {
				defer func() {
					msg, _ := recover().(string)
					if !strings.HasPrefix(msg, "sketch: ") {
						t.Errorf("%s(%v): panic %q; want a \"sketch: \" panic", name, bad, msg)
					}
				}()
				f()
			}()
		}
	}
	r.Rotate()
	if got := r.QueryString("k"); got != 0 {
		t.Fatalf("Query = %v; want 0", got)
	}
}

// TestRotatorScorer: the reference rotator is a drop-in sketch.Scorer.
func TestRotatorScorer(t *testing.T) {
	var s sketch.Scorer = rotTestNew(t, rotTestConfig(sketchtest.NewFakeClock(), 2, time.Hour))
	s.Update([]byte("a"), 1)
	if s.Query([]byte("a")) != 1 {
		t.Fatal("Scorer round trip failed")
	}
}
