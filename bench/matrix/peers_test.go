package matrix

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

func TestAtomicAdd(t *testing.T) {
	a := NewAtomicAdd(4, 1000)
	k := []byte("some key")
	a.Update(k, 3)
	if got := a.Query(k); got != 3 {
		t.Fatalf("Query after Update(3) = %v", got)
	}
	// The key's cells are where sketch.Index puts them, under the default
	// hasher (XXH3, seed 0).
	h := sketch.XXH3()(0).Sum64(k)
	for l := range uint32(4) {
		if v := a.cells[int(l)*1000+int(core.Index(h, l, 1000))].Load(); v != 3 {
			t.Fatalf("level %d cell holds %d; want 3", l, v)
		}
	}
	if got := a.UpdateAndQuery(k, 2); got != 5 {
		t.Fatalf("UpdateAndQuery = %v; want 5", got)
	}
	if !a.TryUpdate(k, 1, 6) || a.TryUpdate(k, 1, 6) || a.Query(k) != 6 {
		t.Fatalf("TryUpdate against limit 6: score %v", a.Query(k))
	}
	// Min over the rows: bump one row of another key only.
	k2 := []byte("another key")
	h2 := sketch.XXH3()(0).Sum64(k2)
	a.cells[core.Index(h2, 0, 1000)].Add(100)
	if got := a.Query(k2); got != 0 {
		t.Fatalf("Query of a key with one bumped row = %v; want 0 (min)", got)
	}
	if sz := a.Sizes(); sz.Cells != 4*1000*8 || sz.Total <= sz.Cells {
		t.Fatalf("Sizes = %+v", sz)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 1000 {
				a.Update(k2, 1)
			}
		})
	}
	wg.Wait()
	if got := a.Query(k2); got != 4000 {
		t.Fatalf("4 x 1000 concurrent Updates: %v", got)
	}
}

// fakeTime is a settable clock for RateMap.
type fakeTime struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeTime) now() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.t }
func (f *fakeTime) add(d time.Duration) {
	f.mu.Lock()
	f.t = f.t.Add(d)
	f.mu.Unlock()
}

func TestRateMap(t *testing.T) {
	ft := &fakeTime{t: time.Unix(1000, 0)}
	r := NewRateMap(1, 5, false, ft.now)
	k := []byte("client")
	for i := range 5 {
		if !r.TryUpdate(k, 1, 0) {
			t.Fatalf("TryUpdate %d denied with tokens left", i)
		}
	}
	if r.TryUpdate(k, 1, 0) {
		t.Fatal("TryUpdate admitted with an empty bucket")
	}
	if q := r.Query(k); q != 0 {
		t.Fatalf("Query of an empty bucket = %v", q)
	}
	ft.add(2 * time.Second) // refills 2 tokens
	if q := r.UpdateAndQuery(k, 1); q != 1 {
		t.Fatalf("UpdateAndQuery after a 2 s refill = %v; want 1", q)
	}
	r.Update(k, 1)
	if q := r.Query(k); q != 0 {
		t.Fatalf("Query = %v; want 0", q)
	}

	// Drained buckets: Fill empties a new key's bucket; one token a second
	// comes back.
	d := NewRateMap(1, 1, true, ft.now)
	d.Fill(k, denyFill)
	if d.TryUpdate(k, 1, denyLimit) {
		t.Fatal("drained bucket admitted")
	}
	ft.add(time.Second)
	if !d.TryUpdate(k, 1, denyLimit) || d.TryUpdate(k, 1, denyLimit) {
		t.Fatal("a drained bucket should admit exactly one call per second")
	}

	// The map grows by one limiter per distinct key and keeps a copy of
	// the key, not the caller's buffer.
	buf := []byte("key-0")
	for i := range 10 {
		buf[4] = byte('0' + i)
		r.Update(buf, 1)
	}
	n := 0
	r.m.Range(func(k, _ any) bool { n++; return true })
	if n != 11 {
		t.Fatalf("map holds %d keys; want 11", n)
	}
	if _, ok := r.m.Load("key-3"); !ok {
		t.Fatal("key-3 not stored under its own copy")
	}
}

func TestBuildAll(t *testing.T) {
	o := DefaultOptions()
	o.Cells = 1000
	for _, clk := range AllClocks {
		for _, im := range AllImpls {
			if !runsUnder(im, clk) {
				continue
			}
			for _, wn := range []string{WorkUpdate, WorkTryUpdateDenied} {
				w, _ := workloadByName(wn)
				inst, err := build(&o, im, clk, w)
				if err != nil {
					t.Fatalf("%s/%s: %v", clk, im, err)
				}
				k := []byte("k")
				if f, ok := inst.target.(filler); ok {
					f.Fill(k, w.fill)
				} else {
					inst.target.Update(k, w.fill)
				}
				admitted := inst.target.TryUpdate(k, 1, w.limit)
				if wn == WorkTryUpdateDenied && admitted {
					t.Errorf("%s/%s: a filled key was admitted on the abuse path", clk, im)
				}
				inst.close()
			}
		}
	}
	// The abuse path's buckets stay empty for 100 s.
	w, _ := workloadByName(WorkTryUpdateDenied)
	ft := &fakeTime{t: time.Unix(1000, 0)}
	inst, _ := build(&o, ImplRateMap, ClockDefault, w)
	rm := inst.target.(*RateMap)
	rm.now = ft.now
	rm.Fill([]byte("k"), denyFill)
	ft.add(99 * time.Second)
	if rm.TryUpdate([]byte("k"), 1, denyLimit) {
		t.Fatal("ratemap abuse bucket admitted within 99 s of its fill")
	}
	ft.add(2 * time.Second)
	if !rm.TryUpdate([]byte("k"), 1, denyLimit) {
		t.Fatal("ratemap abuse bucket still empty 101 s after its fill")
	}
	if _, err := build(&o, "nosuch", ClockDefault, workload{}); err == nil {
		t.Fatal("unknown implementation: no error")
	}
	a, at := (SharedClock{}).NowMillis(), sharedTime()
	time.Sleep(5 * time.Millisecond)
	b, bt := (SharedClock{}).NowMillis(), sharedTime()
	if b < a+4 || bt.Sub(at) < 4*time.Millisecond {
		t.Fatalf("shared clock: %d ms then %d ms, %v then %v, across a 5ms sleep", a, b, at, bt)
	}
}

// TestUpdateSaturatedWritesNothing: the update-saturated workload pins
// every cell of a key at Hi, and on the lock-free sketch its Updates then
// write nothing within a millisecond (every level skipped, counted by the
// engine's Skip hook), while the first Update of each later millisecond
// writes the new stamp and keeps the key at Hi.
func TestUpdateSaturatedWritesNothing(t *testing.T) {
	o := DefaultOptions()
	o.Cells = 1000
	w, err := workloadByName(WorkUpdateSaturated)
	if err != nil {
		t.Fatal(err)
	}
	clk := sketchtest.NewFakeClock()
	inst, err := buildOn(&o, ImplLockfree, clk, time.Now, w)
	if err != nil {
		t.Fatal(err)
	}
	s := inst.target.(*sketch.Sketch)
	var skips atomic.Int32
	core.SetHooks(core.SketchOf(s), core.Hooks{Skip: func(uint32) { skips.Add(1) }})
	k := []byte("k")
	s.Update(k, w.fill)
	for ms := range 3 {
		skips.Store(0)
		for range 10 {
			do(inst.target, &w, k, new(int))
		}
		want := int32(10 * o.Levels)
		if ms > 0 {
			want -= int32(o.Levels) // the first Update of the millisecond re-stamps
		}
		if got := skips.Load(); got != want {
			t.Errorf("millisecond %d: %d levels skipped, want %d", ms, got, want)
		}
		if q := s.Query(k); q < sketchHi {
			t.Errorf("millisecond %d: Query = %v, want the key pinned at Hi = %v", ms, q, float64(sketchHi))
		}
		clk.Advance(time.Millisecond)
	}
}
