package sketch_test

import (
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/conv"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// audit15 mutation-testing gaps in the lock-free engine (internal/core,
// internal/atom). Each test states the contract it checks.

// TestAudit15MutRefundKeepsIncrementAfterNegativeDelta: Sketch.Refund
// subtracts the increment from a cell written since (same millisecond)
// only "provided no clamp can have cut an add meanwhile (its score is
// below Hi, and no negative delta has ever been applied to the sketch)";
// otherwise "any other cell (... negative deltas are in use) keeps the
// increment", and a Refund never takes "another key's mass". A (x, y)
// reserves 50; B (x, v) adds 80 (x reaches Hi = 100: 30 of B's add is
// cut) and then -0.5 (x = 99.5, below Hi again). Subtracting A's 50 from
// x would leave 49.5 there, below B's true score 79.5 (B's other cell
// holds exactly 79.5). Both a small negative delta (-0.5, the flag must
// be set by any negative delta) and a larger one are checked.
func TestAudit15MutRefundKeepsIncrementAfterNegativeDelta(t *testing.T) {
	for _, neg := range []float64{-0.5, -3} {
		t.Run(fmt.Sprint(neg), func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			clk.Set(1_000_000)
			cfg := sketch.Config{Levels: 2, CellsPerLevel: 4, Hi: 100, Clock: clk}
			a, b, _ := conflictKeys(t, cfg)
			s := mustNewSketch(t, cfg)
			e := core.SketchOf(s)
			rc, ok := e.TryReserveAt(clk.Now(), a, 50, 1000) // x = 50, y = 50
			if !ok {
				t.Fatal("reservation denied")
			}
			s.Update(b, 80)  // x = 100 (Hi: 30 cut), v = 80
			s.Update(b, neg) // x = 100+neg, v = 80+neg: B's truth
			x := s.QueryDetailed(b).Levels[0].Score
			e.Refund(&rc)
			truth := 80 + neg
			if q := s.Query(b); q < truth {
				t.Errorf("after Refund, Query(B) = %v < B's true score %v: the roll-back took B's mass", q, truth)
			}
			if got := s.QueryDetailed(b).Levels[0].Score; got != x {
				t.Errorf("shared cell x = %v after Refund, was %v: with negative deltas in use a cell written since must keep the increment", got, x)
			}
		})
	}
}

// TestAudit15MutRefundRestoreRoundsUp: Refund gives a cell that still
// holds the very word the call stored "its previous value back (decayed
// to the same time)", and no read is ever below the truth ("scores are
// narrowed to float32 rounding up"). Under exponential decay the previous
// value decayed to the call's time is generally not a float32: the word
// put back must hold it rounded up, so Query right after the Refund is at
// least the key's true score then (the float64 mutex reference, which
// decays the same float32 score, is the oracle), for every one of a set
// of call times.
func TestAudit15MutRefundRestoreRoundsUp(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	cfg := sketch.Config{Levels: 2, CellsPerLevel: 64, Hi: 1e9, Decay: decay.Exponential(0.37), Clock: clk}
	for i := range 40 {
		clk.Set(1_000_000)
		s := mustNewSketch(t, cfg)
		r := mustNewReference(t, cfg)
		e := core.SketchOf(s)
		key := fmt.Sprintf("k%d", i)
		first := 1 + float64(i)*0.731
		s.UpdateString(key, first)
		r.UpdateString(key, first)
		clk.Set(1_000_000 + int64(1+i*37))
		rc, ok := e.TryReserveStringAt(clk.Now(), key, 3, 1e6)
		if !ok {
			t.Fatal("reservation denied")
		}
		if !e.Refund(&rc) {
			t.Fatalf("Refund of untouched cells reported incomplete")
		}
		truth := r.QueryString(key)
		if q := s.QueryString(key); q < truth {
			t.Errorf("call %d: after Refund Query = %v < true score %v (the restored word rounded below the decayed previous value)", i, q, truth)
		}
	}
}

// audit15Keys finds keys a, c that share both cells (x, y) and a key b
// sharing only x, with a and c on different TryUpdate stripes.
func audit15Keys(t *testing.T, cfg sketch.Config, s *sketch.Sketch) (a, c, b []byte) {
	t.Helper()
	_, norm, err := conv.Normalize(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := norm.Hasher(norm.Seed)
	cells := func(k []byte) (uint32, uint32) {
		hash := h.Sum64(k)
		return core.Index(hash, 0, norm.CellsPerLevel), core.Index(hash, 1, norm.CellsPerLevel)
	}
	e := core.SketchOf(s)
	var keys [][]byte
	for i := range 400 {
		keys = append(keys, fmt.Appendf(nil, "skew-%d", i))
	}
	for _, ka := range keys {
		x, y := cells(ka)
		for _, kc := range keys {
			cx, cy := cells(kc)
			if string(kc) == string(ka) || cx != x || cy != y || core.StripeOf(e, kc) == core.StripeOf(e, ka) {
				continue
			}
			for _, kb := range keys {
				if bx, by := cells(kb); bx == x && by != y {
					return ka, kc, kb
				}
			}
		}
	}
	t.Fatal("no keys with the wanted collision pattern")
	return nil, nil, nil
}

// TestAudit15MutNoOpLevelIsValidated: "Admitted TryUpdates are
// linearizable among themselves ...: each decides on values that all L
// cells held at one instant." A's add leaves level 0 as it is (x pinned
// at Hi), so its commit writes only y; C, a key with the same two cells on
// another stripe, is admitted while A decides (run from inside A's
// aggregator, the one user callback between A's loads and its commit),
// and its negative add lowers x and is cut at Lo in y. Run one after the
// other, A then C leaves (90, 0) and C then A leaves (100, 10); a commit
// of A that does not check that x still holds the word it decided on
// leaves (90, 10), which no order of the two gives.
func TestAudit15MutNoOpLevelIsValidated(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	var s *sketch.Sketch
	var arm atomic.Bool
	var a, c []byte
	var cOK bool
	cfg := sketch.Config{Levels: 2, CellsPerLevel: 4, Hi: 100, Clock: clk,
		AggregateFunc: func(v []float64) float64 {
			if arm.CompareAndSwap(true, false) {
				cOK = s.TryUpdate(c, -10, 1000)
			}
			return min(v[0], v[1])
		}}
	s = mustNewSketch(t, cfg)
	var b []byte
	a, c, b = audit15Keys(t, cfg, s)
	s.Update(b, 100) // x = 100 (Hi), y = 0 (Lo)
	arm.Store(true)
	aOK := s.TryUpdate(a, 10, 1000)
	if arm.Load() || !cOK || !aOK {
		t.Fatalf("setup: C ran %v, C admitted %v, A admitted %v; want both admitted", !arm.Load(), cOK, aOK)
	}
	lv := s.QueryDetailed(a).Levels
	x, y := lv[0].Score, lv[1].Score
	if !(x == 90 && y == 0) && !(x == 100 && y == 10) {
		t.Errorf("cells (x, y) = (%v, %v) after A (+10) and C (-10) were both admitted: no serial order gives it (A, C: (90, 0); C, A: (100, 10))", x, y)
	}
}

// TestAudit15MutIdlePastHorizonLargeSketch: the package promises the
// estimate is never below the truth "whatever the ... clock jumps", and
// handles idle times past the 2^31 ms stamp horizon. A sketch with more
// cells than one sweep chunk (2 x 20000 cells) is left idle for 2^31 ms +
// 1 s after K got 100; then K gets 5 (100 has long drained under
// Linear(1): K's truth is 5) and a few other writes follow. Every cell,
// swept in the first chunk or in a later one, must read K's fresh 5: an
// operation past the horizon may not use an age it cannot trust (a cell
// whose stamp is 2^31 ms old reads as zero elapsed and keeps its stamp,
// and a later sweep chunk would then decay the fresh add as if it were
// 2^31 ms old).
func TestAudit15MutIdlePastHorizonLargeSketch(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	cfg := sketch.Config{Levels: 2, CellsPerLevel: 20000, Hi: 1e9, Decay: decay.Linear(1), Clock: clk}
	s := mustNewSketch(t, cfg)
	keys := []string{"idle-a", "idle-b", "idle-c", "idle-d"}
	for _, k := range keys {
		s.UpdateString(k, 100)
	}
	clk.Set(clk.NowMillis() + 1<<31 + 1000)
	for _, k := range keys {
		s.UpdateString(k, 5)
	}
	for i := range 8 {
		s.UpdateString(fmt.Sprintf("other-%d", i), 1)
		clk.Set(clk.NowMillis() + 1)
	}
	for _, k := range keys {
		// 5 added 8 ms ago under Linear(1): 4.992 left.
		if q := s.QueryString(k); q < 4.99 {
			lv := s.QueryDetailed([]byte(k)).Levels
			t.Errorf("Query(%s) = %v < its true score 4.992 after an idle time past the horizon (levels %v, %v)", k, q, lv[0].Score, lv[1].Score)
		}
	}
}

// TestAudit15MutStaleOperationAtHorizonEdge: an operation that read its
// time, then was overtaken by a clock jump and a re-base of every cell to
// the new time, must not read the re-based stamps with a 32-bit age that
// wrapped (over-decay: below the truth, which the package rules out
// "whatever the ... clock jumps"). The in-tree test jumps 3 x 2^30 ms;
// the edge is a jump of exactly 2^31 + 1 ms, where the re-based stamp is
// 2^31 - 1 ms "before" the stale time as int32 arithmetic sees it (and
// 2^31, 2^31 + 2 ms either side).
func TestAudit15MutStaleOperationAtHorizonEdge(t *testing.T) {
	const lambda = 1e-7 // per second: 0.81 of a score is left after 2^31 ms
	truth := func(v float64, d time.Duration) float64 { return v * math.Exp(-lambda*d.Seconds()) }
	for _, jms := range []int64{1<<31 - 1, 1 << 31, 1<<31 + 1, 1<<31 + 2} {
		jump := time.Duration(jms) * time.Millisecond
		for _, op := range []string{"Query", "Update"} {
			t.Run(fmt.Sprintf("%s/%d", op, jms), func(t *testing.T) {
				clk := sketchtest.NewFakeClock()
				s := mustNewSketch(t, sketch.Config{Levels: 2, CellsPerLevel: 64, Hi: 1e6, Decay: decay.Exponential(lambda), Clock: clk})
				k := []byte("k")
				s.Update(k, 100)
				clk.Advance(time.Second)
				reached, release := make(chan struct{}), make(chan struct{})
				var once atomic.Bool
				core.SetHooks(core.SketchOf(s), core.Hooks{Load: func(uint32) {
					if once.CompareAndSwap(false, true) {
						close(reached)
						<-release
					}
				}})
				got := make(chan float64, 1)
				go func() {
					if op == "Query" {
						got <- s.Query(k)
					} else {
						s.Update(k, 1)
						got <- 0
					}
				}()
				select {
				case <-reached:
				case <-time.After(10 * time.Second):
					t.Fatal("the operation never reached its loads")
				}
				clk.Advance(jump)
				s.Update([]byte("other"), 1) // re-bases every cell to now if past the window
				close(release)
				v := <-got
				want := truth(100, time.Second+jump)
				if op == "Update" {
					want++
					v = s.Query(k)
				}
				if v < want*(1-1e-6) {
					t.Fatalf("%s after a %d ms jump: %v < the key's true %v (over-decayed by a wrapped age)", op, jms, v, want)
				}
			})
		}
	}
}

// a15GateLaw is exponential decay (per second lambda) that holds the
// first evaluation on a score equal to marker aged at least 2^29 ms (the
// horizon sweep re-basing that cell) until release is closed.
type a15GateLaw struct {
	lambda, marker   float64
	reached, release chan struct{}
	once             *atomic.Bool
}

func (g a15GateLaw) Apply(score float64, dt int64) float64 {
	if dt <= 0 {
		return score
	}
	if score == g.marker && dt >= 1<<29 && g.once.CompareAndSwap(false, true) {
		close(g.reached)
		<-g.release
	}
	return score * math.Exp(-g.lambda*float64(dt)/1000)
}

// a15SignalClock is a FakeClock that closes read the first time it is
// read once armed.
type a15SignalClock struct {
	*sketchtest.FakeClock
	armed atomic.Bool
	read  chan struct{}
}

func (c *a15SignalClock) NowMillis() int64 {
	if c.armed.CompareAndSwap(true, false) {
		close(c.read)
	}
	return c.FakeClock.NowMillis()
}

// TestAudit15MutStaleOperationDuringUrgentSweep: the stale-operation rule
// of the horizon (internal/core/horizon.go: an operation whose time is
// 2^31 ms or more behind a re-base must not read the re-based stamps)
// must hold while the urgent sweep is still running, not only once it
// is done. Query(k) reads its time t and is held before its loads; the
// clock jumps 2^31 + 1 ms and an Update past the window starts
// re-basing every cell, stamping k's cell at t + 2^31 + 1 (an int32 age
// of 2^31 - 1 from t), and is held (by the decay law) on a later cell.
// The held Query then goes on: it must see that its time is stale (it
// reads the clock again, and then waits for the sweep) rather than decay
// k's re-based cell by a wrapped age (below the truth).
func TestAudit15MutStaleOperationDuringUrgentSweep(t *testing.T) {
	const lambda = 1e-7
	const jump = 1<<31 + 1
	clk := &a15SignalClock{FakeClock: sketchtest.NewFakeClock(), read: make(chan struct{})}
	law := a15GateLaw{lambda: lambda, marker: 77, reached: make(chan struct{}), release: make(chan struct{}), once: new(atomic.Bool)}
	cfg := sketch.Config{Levels: 1, CellsPerLevel: 64, Hi: 1e6, Decay: law, Clock: clk}
	_, norm, err := conv.Normalize(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := norm.Hasher(norm.Seed)
	idx := func(k string) uint32 { return core.Index(h.Sum64([]byte(k)), 0, norm.CellsPerLevel) }
	// k's cell is re-based before the gate key's (the sweep goes in cell
	// order); "other" shares neither.
	var k, g string
	for i := 0; k == "" && i < 1000; i++ {
		for j := 0; j < 1000; j++ {
			ki, gj := fmt.Sprintf("k%d", i), fmt.Sprintf("g%d", j)
			if idx(ki) < idx(gj) && idx(ki) != idx("other") && idx(gj) != idx("other") {
				k, g = ki, gj
				break
			}
		}
	}
	s := mustNewSketch(t, cfg)
	s.UpdateString(k, 100)
	s.UpdateString(g, 77)
	clk.Advance(time.Second)
	reached, release := make(chan struct{}), make(chan struct{})
	var once atomic.Bool
	core.SetHooks(core.SketchOf(s), core.Hooks{Load: func(uint32) {
		if once.CompareAndSwap(false, true) {
			close(reached)
			<-release
		}
	}})
	got := make(chan float64, 1)
	go func() { got <- s.QueryString(k) }()
	<-reached
	clk.Advance(jump * time.Millisecond)
	swept := make(chan struct{})
	go func() { s.UpdateString("other", 1); close(swept) }()
	select {
	case <-law.reached:
	case <-time.After(10 * time.Second):
		t.Fatal("the sweep never evaluated the gate key's cell")
	}
	clk.armed.Store(true)
	close(release)
	// Either the Query saw its time is stale (it reads the clock again)
	// or it answered from the cells the sweep has re-based so far.
	var v float64
	answered := false
	select {
	case <-clk.read:
	case v = <-got:
		answered = true
	}
	close(law.release)
	<-swept
	if !answered {
		v = <-got
	}
	want := 100 * math.Exp(-lambda*(1+float64(jump)/1000))
	if v < want*(1-1e-6) {
		t.Fatalf("Query held across an urgent re-base (jump %d ms) = %v < the key's true %v (over-decayed by a wrapped age)", int64(jump), v, want)
	}
}

// TestAudit15MutMergeOtherFarAhead: Merge reads other "at the same
// instant of other's own time scale"; when other's clock is ahead, "they
// are read at an earlier point of its scale (cells written after it count
// as age 0)". Here other's clock is 2^31 ms + 1000 s ahead of s's, so
// that instant is before every stamp of other by more than the 2^31 ms
// an age can span: k's 100, written on other at its now, must merge as
// 100 (age 0), not decayed by a wrapped 32-bit age.
func TestAudit15MutMergeOtherFarAhead(t *testing.T) {
	const lambda = 1e-7 // per second: 0.81 of a score is left after 2^31 ms
	clkS, clkO := sketchtest.NewFakeClock(), sketchtest.NewFakeClock()
	clkS.Set(1_000_000)
	clkO.Set(1_000_000 + 1<<31 + 1_000_000)
	mk := func(c sketch.Clock) *sketch.Sketch {
		return mustNewSketch(t, sketch.Config{Levels: 2, CellsPerLevel: 64, Hi: 1e6, Decay: decay.Exponential(lambda), Clock: c})
	}
	s, o := mk(clkS), mk(clkO)
	k := []byte("k")
	o.Update(k, 100)
	if err := s.Merge(o); err != nil {
		t.Fatal(err)
	}
	if q := s.Query(k); q < 100 {
		t.Errorf("Query(k) after merging a sketch whose clock is 2^31 ms + 1000 s ahead = %v < 100 (other's cell, written after the common instant, is age 0)", q)
	}
}

// TestAudit15MutSnapshotOldCellAgesOnLoad: a snapshot restores "every
// score aged by the time since it was taken", and every later read decays
// it by the law. A cell already 2^29 ms + 1000 s old when the snapshot is
// taken (below the sweep's due time, so still under its original stamp)
// is loaded, and the loaded sketch is then read 2^31 ms + 1000 s after
// that cell's write, past the 32-bit age window (sweeps run on the way):
// the key's estimate must be its decayed truth (not below, and not the
// undecayed score an age the horizon lost would give).
func TestAudit15MutSnapshotOldCellAgesOnLoad(t *testing.T) {
	const lambda = 1e-6 // per second: e^-2.15 of a score is left after 2^31 ms
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	cfg := sketch.Config{Levels: 2, CellsPerLevel: 64, Hi: 1e6, Decay: decay.Exponential(lambda), Clock: clk}
	a := mustNewSketch(t, cfg)
	k := []byte("k")
	a.Update(k, 1000)
	age := int64(1<<29 + 1_000_000)
	clk.Set(clk.NowMillis() + age)
	data, err := a.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	b := mustNewSketch(t, cfg)
	if err := b.UnmarshalBinary(data); err != nil {
		t.Fatal(err)
	}
	// Walk to 2^31 ms + 1000 s after the write, with operations on the
	// way (each helps any sweep that is due).
	for age < 1<<31+1_000_000 {
		step := min(int64(1<<27), 1<<31+1_000_000-age)
		clk.Set(clk.NowMillis() + step)
		age += step
		b.Update([]byte("other"), 1)
	}
	truth := 1000 * math.Exp(-lambda*float64(age)/1000)
	if q := b.Query(k); q < truth*(1-1e-6) || q > truth*1.001 {
		t.Errorf("Query(k) %d ms after its write (%d ms of it before the snapshot) = %v, want its decayed truth %v", age, 1<<29+1_000_000, q, truth)
	}
}

// TestAudit15MutSnapshotForgedAncientInstant: a checksummed snapshot whose
// instant is forged to the far end of int64 (decades, centuries back)
// restores every score "aged by the time since it was taken": under
// Linear(1) a score of 100 aged that long is 0. Cells aged a few ms at
// the snapshot add that age to a downtime near MaxInt64, which must not
// wrap.
func TestAudit15MutSnapshotForgedAncientInstant(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	cfg := sketch.Config{Levels: 2, CellsPerLevel: 64, Hi: 1e6, Decay: decay.Linear(1), Clock: clk}
	a := mustNewSketch(t, cfg)
	k := []byte("k")
	a.Update(k, 100)
	clk.Advance(5 * time.Millisecond) // the cell is 5 ms old in the snapshot
	data, err := a.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range []int64{math.MinInt64, math.MinInt64 + 1, -(1 << 62)} {
		d := append([]byte(nil), data...)
		for i := range 8 {
			d[72+i] = byte(uint64(at) >> (8 * i))
		}
		crc := core.CRC32C(d[:len(d)-4])
		for i := range 4 {
			d[len(d)-4+i] = byte(crc >> (8 * i))
		}
		b := mustNewSketch(t, cfg)
		if err := b.UnmarshalBinary(d); err != nil {
			t.Fatalf("instant %d: %v", at, err)
		}
		if q := b.Query(k); q != 0 {
			t.Errorf("snapshot taken at instant %d (ms since 1970): Query(k) = %v after loading, want 0 (100 drains in 100 s)", at, q)
		}
	}
}

// TestAudit15MutEarlierTimeCountsAsLater: the Timebase's ordering rule
// ("a reading or a t earlier than one already used counts as that later
// time (zero elapsed, never growth)"): UpdateAt with a t 5 s before the
// latest time the sketch has used adds at that latest time, so a Query
// right then reads the whole delta, not the delta drained for 5 s
// (Linear(1): 10 would read 5).
func TestAudit15MutEarlierTimeCountsAsLater(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	s := mustNewSketch(t, sketch.Config{Levels: 2, CellsPerLevel: 64, Hi: 1e6, Decay: decay.Linear(1), Clock: clk})
	clk.Advance(time.Minute)   // k's cells hold 0 stamped at the sketch's creation
	s.UpdateString("other", 1) // the sketch has used 1_060_000
	s.UpdateAt(clk.Now().Add(-5*time.Second), "k", 10)
	if q := s.QueryString("k"); q < 10 {
		t.Errorf("Query(k) right after UpdateAt(now - 5 s, k, 10) = %v, want 10 (an earlier t counts as the latest time used)", q)
	}
	if ok := s.TryUpdateAt(clk.Now().Add(-5*time.Second), "k", 0, 9.5); ok {
		t.Errorf("TryUpdateAt(now - 5 s, k, 0, 9.5) admitted: k reads 10 at the latest time used")
	}
}

// TestAudit15MutRefundExactWithNegativeDeltas: Refund gives "a cell that
// still holds the very word the call stored ... its previous value back"
// whatever else the sketch has seen; negative deltas only stop the
// subtraction from cells written since. A sketch that has taken a
// negative delta (on another key) refunds an untouched reservation in
// full.
func TestAudit15MutRefundExactWithNegativeDeltas(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	s := mustNewSketch(t, sketch.Config{Levels: 2, CellsPerLevel: 64, Lo: -100, Hi: 100, Clock: clk})
	e := core.SketchOf(s)
	s.UpdateString("z", -1)
	s.UpdateString("k", 2)
	rc, ok := e.TryReserveStringAt(clk.Now(), "k", 5, 100)
	if !ok {
		t.Fatal("reservation denied")
	}
	if !e.Refund(&rc) {
		t.Errorf("Refund of a reservation whose cells still hold the words it stored reported incomplete")
	}
	if q := s.QueryString("k"); q != 2 {
		t.Errorf("Query(k) after the Refund = %v, want 2", q)
	}
}

// TestAudit15MutStaleTryUpdate: the stale-operation rule for TryUpdate
// (the in-tree TestStaleOperation covers Query and Update). A TryUpdate
// reads its time, and is held before its loads while the clock jumps
// 3 x 2^30 ms and another operation re-bases every cell to the new
// time. k's truth then is 100 decayed for the whole interval, about 72.5;
// TryUpdate(k, 1, 70) must deny (72.5 + 1 > 70). Decaying the re-based
// stamp by the wrapped age from the stale time reads about 65 and admits.
func TestAudit15MutStaleTryUpdate(t *testing.T) {
	const lambda = 1e-7
	jump := time.Duration(3<<30) * time.Millisecond
	clk := sketchtest.NewFakeClock()
	s := mustNewSketch(t, sketch.Config{Levels: 2, CellsPerLevel: 64, Hi: 1e6, Decay: decay.Exponential(lambda), Clock: clk})
	k := []byte("k")
	s.Update(k, 100)
	clk.Advance(time.Second)
	reached, release := make(chan struct{}), make(chan struct{})
	var once atomic.Bool
	core.SetHooks(core.SketchOf(s), core.Hooks{Load: func(uint32) {
		if once.CompareAndSwap(false, true) {
			close(reached)
			<-release
		}
	}})
	got := make(chan bool, 1)
	go func() { got <- s.TryUpdate(k, 1, 70) }()
	select {
	case <-reached:
	case <-time.After(10 * time.Second):
		t.Fatal("the TryUpdate never reached its loads")
	}
	clk.Advance(jump)
	s.Update([]byte("other"), 1) // past the window: re-bases every cell to now
	close(release)
	truth := 100 * math.Exp(-lambda*(time.Second+jump).Seconds())
	if <-got {
		t.Errorf("TryUpdate(k, 1, 70) admitted across a re-base, with k's truth %v (+1 > 70): decided on an over-decayed stale age", truth)
	}
	if q := s.Query(k); q < truth*(1-1e-6) {
		t.Errorf("Query(k) = %v < its truth %v", q, truth)
	}
}

// TestAudit15MutReservedTimeOfLaterStamp: Sketch.Reserved returns the
// key's estimate right after the admitted call "and the time it holds
// at": what a Query at that instant would have read. A reservation that
// read its time T1 and was overtaken, before its loads, by an Update of
// k at T1 + 5 s stores its increment on words stamped T1 + 5 s: the 75 it
// reports holds at T1 + 5 s (at T1 k read at most 50 + 10 = 60), so the
// time must be T1 + 5 s, or a caller decaying 75 from T1 reads k low.
func TestAudit15MutReservedTimeOfLaterStamp(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	s := mustNewSketch(t, sketch.Config{Levels: 2, CellsPerLevel: 64, Hi: 1e6, Decay: decay.Linear(1), Clock: clk})
	e := core.SketchOf(s)
	k := []byte("k")
	s.Update(k, 50)
	reached, release := make(chan struct{}), make(chan struct{})
	var once atomic.Bool
	core.SetHooks(e, core.Hooks{Load: func(uint32) {
		if once.CompareAndSwap(false, true) {
			close(reached)
			<-release
		}
	}})
	type res struct {
		rc core.Receipt
		ok bool
	}
	got := make(chan res, 1)
	go func() { rc, ok := e.TryReserveAt(clk.Now(), k, 10, 1000); got <- res{rc, ok} }()
	select {
	case <-reached:
	case <-time.After(10 * time.Second):
		t.Fatal("the reservation never reached its loads")
	}
	clk.Advance(5 * time.Second)
	s.Update(k, 20) // 45 + 20 = 65, stamped T1 + 5 s
	close(release)
	r := <-got
	if !r.ok {
		t.Fatal("reservation denied")
	}
	ms, v := e.Reserved(&r.rc)
	if v != 75 || ms != clk.NowMillis() {
		t.Errorf("Reserved = (%d ms, %v), want (%d ms, 75): 75 holds at the later writer's time, not at the call's", ms, v, clk.NowMillis())
	}
}

// TestAudit15MutRefundAfterMergedNegative: as
// TestAudit15MutRefundKeepsIncrementAfterNegativeDelta, with the negative
// mass arriving through Merge (a replica's -0.5 for B, under decay.None,
// adds as a + b): a merge that lowers a cell is a negative delta applied
// to the sketch, so a later Refund must keep the increment in a cell
// written since rather than subtract it (B's truth after the merge is
// 79.5; subtracting A's 50 from x = 99.5 would leave B at 49.5).
func TestAudit15MutRefundAfterMergedNegative(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	cfg := sketch.Config{Levels: 2, CellsPerLevel: 4, Lo: -100, Hi: 100, Clock: clk}
	a, b, _ := conflictKeys(t, cfg)
	s, o := mustNewSketch(t, cfg), mustNewSketch(t, cfg)
	e := core.SketchOf(s)
	rc, ok := e.TryReserveAt(clk.Now(), a, 50, 1000) // x = 50, y = 50
	if !ok {
		t.Fatal("reservation denied")
	}
	s.Update(b, 80)   // x = 100 (Hi: 30 cut), v = 80
	o.Update(b, -0.5) // the replica's share of B
	if err := s.Merge(o); err != nil {
		t.Fatal(err)
	}
	e.Refund(&rc)
	if q := s.Query(b); q < 79.5 {
		t.Errorf("after Refund, Query(B) = %v < B's true score 79.5: the roll-back took B's mass", q)
	}
}
