package meter_test

// audit23: meter readings under fake clocks that step both ways, stale
// and future At times, concurrent callers, and snapshots taken while the
// clock and the writers move.

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testhook"
	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

const audit23T0 = 1_700_000_000_000

// TestAudit23FixedRateWriteToLaterWriteLosesMass: a Rate (window 1 s)
// counted 1000 events of k at T. Its WriteTo writes the meter header
// (Write 1), the rotator header (Write 2), then the primary's header
// (Write 3, after the primary read its snapshot instant). If, meanwhile,
// the clock moves 1 s and k gets one more event (a Saver under traffic:
// the clock does move during a save), the primary's cells are recorded
// at "age 0" at the instant with 1000/e + 1 in them: the 1000 events
// completed before WriteTo are decayed twice over that second. Restored
// at the original's time (no downtime), k reads 135.7/s; the original
// 368.9/s; the events completed before WriteTo alone are worth 367.9/s.
// meter doc: "a restored meter reads what the never-stopped one would";
// sketch.Sketch.WriteTo: "every update that completed before WriteTo was
// called is fully included (and decayed to T)"; Rate: "The sketch only
// errs upward".
func TestAudit23FixedRateWriteToLaterWriteLosesMass(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(audit23T0)
	opts := []meter.Option{meter.WithClock(clk), meter.WithSize(4, 1024), meter.WithSeed(9)}
	r, err := meter.NewRate(time.Second, opts...)
	if err != nil {
		t.Fatal(err)
	}
	r.ObserveAt(clk.Now(), "k", 1000)
	w := &testhook.Writer{N: 3, Hook: func() {
		clk.Advance(time.Second)
		r.Observe("k")
	}}
	if _, err := r.WriteTo(w); err != nil {
		t.Fatal(err)
	}
	clk2 := sketchtest.NewFakeClock()
	clk2.Set(clk.NowMillis())
	b, _ := meter.NewRate(time.Second, append(opts[1:], meter.WithClock(clk2))...)
	if _, err := b.ReadFrom(bytes.NewReader(w.Buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	truth := 1000 * math.Exp(-1)
	if got := b.PerSecond("k"); got < truth*(1-1e-6) {
		t.Errorf("restored rate %.4f/s, below %.4f/s of the events completed before WriteTo (the never-stopped meter reads %.4f/s)",
			got, truth, r.PerSecond("k"))
	}
}

// TestAudit23NoveltyWriteToLaterWrite: the same interleaving on a
// Novelty does not lose a mark (a write saturates a cell to 1, which
// "age 0" can only keep longer): a key marked 0.5T before the snapshot,
// while another key refreshes one of its cells 0.3T later during the
// save, is still seen up to T after its mark, after the restore.
func TestAudit23NoveltyWriteToLaterWrite(t *testing.T) {
	const T = 10 * time.Second
	clk := sketchtest.NewFakeClock()
	clk.Set(audit23T0)
	opts := []meter.Option{meter.WithClock(clk), meter.WithSize(2, 8), meter.WithSeed(4)}
	n, _ := meter.NewNovelty(T, opts...)
	n.Seen("x")
	mark := clk.NowMillis()
	clk.Advance(T / 2)
	w := &testhook.Writer{N: 3, Hook: func() {
		clk.Advance(3 * T / 10)
		for i := range 6 { // some of x's cells (8 per level)
			n.Seen(fmt.Sprint("y", i))
		}
	}}
	if _, err := n.WriteTo(w); err != nil {
		t.Fatal(err)
	}
	clk2 := sketchtest.NewFakeClock()
	clk2.Set(clk.NowMillis())
	b, _ := meter.NewNovelty(T, append(opts[1:], meter.WithClock(clk2))...)
	if _, err := b.ReadFrom(bytes.NewReader(w.Buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	for clk2.NowMillis() <= mark+T.Milliseconds() {
		if !b.Contains("x") {
			t.Fatalf("x marked %d ms ago (<= T) not seen after the restore", clk2.NowMillis()-mark)
		}
		clk2.Advance(100 * time.Millisecond)
	}
}

// audit23Model is the Timebase as documented: every time passes through
// a high-water mark; a t earlier than it counts as it, a t later than
// the clock's current reading counts as that reading.
type audit23Model struct{ hw int64 }

func (m *audit23Model) now(clock int64) int64 {
	m.hw = max(m.hw, clock)
	return m.hw
}

func (m *audit23Model) at(t, clock int64) int64 {
	if t <= m.hw {
		return m.hw
	}
	return m.now(min(t, clock))
}

// TestAudit23RateOracleSteppingClock: a Rate on a fake clock that steps
// forward and back (by up to a few windows), with Observe, ObserveAt of
// stale, current and future times, and PerSecond / PerSecondAt likewise,
// against an exact model (every event at the time the documented
// Timebase rule gives it, decayed in float64): the estimate is never
// below the model, except by the documented rotation term (a fraction
// exp(-PeriodWindows) of the counts), and with roomy cells it is within
// float32 rounding above it. Three seeds, PeriodWindows 1 and 16.
func TestAudit23RateOracleSteppingClock(t *testing.T) {
	for _, pw := range []float64{1, 16} {
		for seed := range uint64(3) {
			rng := rand.New(rand.NewPCG(seed, 23))
			const window = time.Second
			clk := sketchtest.NewFakeClock()
			clk.Set(audit23T0)
			r, err := meter.NewRate(window, meter.WithClock(clk), meter.WithSize(4, 1<<12), meter.WithSeed(seed), meter.WithPeriodWindows(pw))
			if err != nil {
				t.Fatal(err)
			}
			m := &audit23Model{hw: clk.NowMillis()}
			type ev struct {
				at int64
				n  float64
			}
			keys := []string{"a", "b", "c"}
			evs := map[string][]ev{}
			total := 0.0
			truth := func(k string, at int64) float64 {
				s := 0.0
				for _, e := range evs[k] {
					s += e.n * math.Exp(-float64(at-e.at)/1000)
				}
				return s
			}
			for step := range 3000 {
				switch rng.IntN(4) {
				case 0:
					clk.Advance(time.Duration(rng.IntN(400)) * time.Millisecond)
				case 1:
					clk.Advance(-time.Duration(rng.IntN(3000)) * time.Millisecond)
				}
				k := keys[rng.IntN(len(keys))]
				off := time.Duration(rng.IntN(4000)-2000) * time.Millisecond
				switch rng.IntN(4) {
				case 0:
					r.Observe(k)
					evs[k] = append(evs[k], ev{m.now(clk.NowMillis()), 1})
					total++
				case 1:
					n := float64(rng.IntN(50))
					at := clk.Now().Add(off)
					r.ObserveAt(at, k, n)
					evs[k] = append(evs[k], ev{m.at(at.UnixMilli(), clk.NowMillis()), n})
					total += n
				case 2:
					got := r.PerSecond(k)
					want := truth(k, m.now(clk.NowMillis()))
					slack := total * math.Exp(-pw) // the documented rotation term
					if got < want-slack-1e-9*want {
						t.Fatalf("pw %v seed %d step %d: PerSecond(%s) = %v, below the model %v (slack %v)", pw, seed, step, k, got, want, slack)
					}
					if got > want*(1+1e-5)+1e-30 {
						t.Fatalf("pw %v seed %d step %d: PerSecond(%s) = %v, far above the model %v (no collisions expected)", pw, seed, step, k, got, want)
					}
				case 3:
					at := clk.Now().Add(off)
					got := r.PerSecondAt(at, k)
					want := truth(k, m.at(at.UnixMilli(), clk.NowMillis()))
					slack := total * math.Exp(-pw)
					if got < want-slack-1e-9*want {
						t.Fatalf("pw %v seed %d step %d: PerSecondAt(%s) = %v, below the model %v", pw, seed, step, k, got, want)
					}
				}
			}
		}
	}
}

// TestAudit23NoveltyOracleSteppingClock: a Novelty (T = 1 s, PeriodWindows
// 1 and 16) on a fake clock stepping both ways, with Seen, SeenAt (stale,
// current and future t), Contains and ContainsAt, against the model (a
// mark at the Timebase's time; "seen" iff the last mark is at most T old
// at the reading's time): never a false negative (a key marked within T
// told new or not contained), and with roomy cells no false positive
// past T + 2 ms either.
func TestAudit23NoveltyOracleSteppingClock(t *testing.T) {
	for _, pw := range []float64{1, 16} {
		for seed := range uint64(3) {
			rng := rand.New(rand.NewPCG(seed, 32))
			const T = time.Second
			clk := sketchtest.NewFakeClock()
			clk.Set(audit23T0)
			n, err := meter.NewNovelty(T, meter.WithClock(clk), meter.WithSize(4, 1<<12), meter.WithSeed(seed), meter.WithPeriodWindows(pw))
			if err != nil {
				t.Fatal(err)
			}
			m := &audit23Model{hw: clk.NowMillis()}
			last := map[string]int64{}
			keys := []string{"a", "b", "c", "d"}
			check := func(step int, what, k string, at int64, seen bool) {
				l, ok := last[k]
				age := at - l
				if ok && age <= T.Milliseconds() && !seen {
					t.Fatalf("pw %v seed %d step %d: %s(%s) says new/absent, marked %d ms ago (<= T)", pw, seed, step, what, k, age)
				}
				if (!ok || age > T.Milliseconds()+2) && seen {
					t.Fatalf("pw %v seed %d step %d: %s(%s) says seen, last mark %v (age %d ms)", pw, seed, step, what, k, ok, age)
				}
			}
			for step := range 3000 {
				switch rng.IntN(4) {
				case 0:
					clk.Advance(time.Duration(rng.IntN(500)) * time.Millisecond)
				case 1:
					clk.Advance(-time.Duration(rng.IntN(1500)) * time.Millisecond)
				}
				k := keys[rng.IntN(len(keys))]
				off := time.Duration(rng.IntN(3000)-1500) * time.Millisecond
				switch rng.IntN(4) {
				case 0:
					at := m.now(clk.NowMillis())
					check(step, "Seen", k, at, n.Seen(k))
					last[k] = at
				case 1:
					tt := clk.Now().Add(off)
					at := m.at(tt.UnixMilli(), clk.NowMillis())
					check(step, "SeenAt", k, at, n.SeenAt(tt, k))
					last[k] = at
				case 2:
					check(step, "Contains", k, m.now(clk.NowMillis()), n.Contains(k))
				case 3:
					tt := clk.Now().Add(off)
					check(step, "ContainsAt", k, m.at(tt.UnixMilli(), clk.NowMillis()), n.ContainsAt(tt, k))
				}
			}
		}
	}
}

// TestAudit23NoveltyOnceSteppingClock: of 8 goroutines racing SeenAt on
// a fresh key, while another goroutine steps the clock back and forth
// (within +-200 ms of a base, T = 10 s: every racer is within T of every
// other), exactly one is told new, round after round, at GOMAXPROCS 1, 2
// and 4.
func TestAudit23NoveltyOnceSteppingClock(t *testing.T) {
	for _, procs := range []int{1, 2, 4} {
		func() {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			clk := sketchtest.NewFakeClock()
			clk.Set(audit23T0)
			n, _ := meter.NewNovelty(10*time.Second, meter.WithClock(clk), meter.WithSize(4, 1<<12), meter.WithSeed(2), meter.WithPeriodWindows(1))
			var stop atomic.Bool
			var sw sync.WaitGroup
			sw.Go(func() {
				for i := 0; !stop.Load(); i++ {
					clk.Set(audit23T0 + int64(i%9-4)*50)
					runtime.Gosched()
				}
			})
			for round := range 150 {
				key := fmt.Sprint("r", round)
				var news atomic.Int32
				var wg sync.WaitGroup
				for g := range 8 {
					wg.Go(func() {
						var seen bool
						if g%2 == 0 {
							seen = n.Seen(key)
						} else {
							seen = n.SeenAt(clk.Now().Add(time.Duration(g-4)*30*time.Millisecond), key)
						}
						if !seen {
							news.Add(1)
						}
					})
				}
				wg.Wait()
				if got := news.Load(); got != 1 {
					stop.Store(true)
					sw.Wait()
					t.Fatalf("GOMAXPROCS %d round %d: %d racers told new, want exactly 1", procs, round, got)
				}
			}
			stop.Store(true)
			sw.Wait()
		}()
	}
}

// TestAudit23InflightConservedSteppingClock: Acquire / TryAcquire /
// Release racing on a few keys that share cells (M = 4), while another
// goroutine steps the fake clock both ways (no decay: time must not
// matter), at GOMAXPROCS 1, 2 and 4: a key's TryAcquire holders never
// exceed the max they were admitted under, Count is at least 1 while an
// Acquire holds the key, and after every Guard is released
// (some twice, concurrently) every key's Count is exactly 0.
func TestAudit23InflightConservedSteppingClock(t *testing.T) {
	for _, procs := range []int{1, 2, 4} {
		func() {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			clk := sketchtest.NewFakeClock()
			clk.Set(audit23T0)
			in, err := meter.NewInflight(64, meter.WithClock(clk), meter.WithSize(2, 4), meter.WithSeed(3))
			if err != nil {
				t.Fatal(err)
			}
			const keys, max = 6, 5
			var live [keys]atomic.Int64 // TryAcquire holders (Acquire has no max)
			var stop atomic.Bool
			var sw sync.WaitGroup
			sw.Go(func() {
				for i := 0; !stop.Load(); i++ {
					clk.Set(audit23T0 + int64((i*7919)%20001-10000)*1000)
					runtime.Gosched()
				}
			})
			var wg sync.WaitGroup
			var bad atomic.Value
			for g := range 6 {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(g), uint64(procs)))
					var held []*meter.Guard
					var heldKey []int
					for range 3000 {
						k := rng.IntN(keys)
						key := fmt.Sprint("k", k)
						switch rng.IntN(3) {
						case 0:
							if gd := in.TryAcquire(key, max); gd != nil {
								if v := live[k].Add(1); v > max {
									bad.Store(fmt.Sprintf("key %s: %d in flight under TryAcquire max %d", key, v, max))
								}
								held, heldKey = append(held, gd), append(heldKey, k)
							}
						case 1:
							if len(held) < 8 {
								// A short unconditional Acquire (no
								// max: not counted in live).
								gd := in.Acquire(key)
								if c := in.Count(key); c < 1 {
									bad.Store(fmt.Sprintf("key %s: Count %d while an Acquire holds it", key, c))
								}
								gd.Release()
								gd.Release() // idempotent
							}
						case 2:
							if len(held) > 0 {
								i := rng.IntN(len(held))
								live[heldKey[i]].Add(-1)
								held[i].Release()
								held[i].Release()
								held[i], heldKey[i] = held[len(held)-1], heldKey[len(held)-1]
								held, heldKey = held[:len(held)-1], heldKey[:len(heldKey)-1]
							}
						}
					}
					for i, gd := range held {
						live[heldKey[i]].Add(-1)
						gd.Release()
					}
				})
			}
			wg.Wait()
			stop.Store(true)
			sw.Wait()
			if b := bad.Load(); b != nil {
				t.Fatalf("GOMAXPROCS %d: %v", procs, b)
			}
			for k := range keys {
				if c := in.Count(fmt.Sprint("k", k)); c != 0 {
					t.Errorf("GOMAXPROCS %d: k%d Count %d after every release, want 0", procs, k, c)
				}
			}
		}()
	}
}

// TestAudit23FixedNoveltyTwoNewWhenTimePassesMidSeen: Novelty's doc:
// "Seen is exact under contention: of N goroutines racing Seen on a key
// not seen within T, exactly one is told it is new ... it decides with
// the sketch's TryUpdate (admit, meaning new, iff Min <= theta, adding
// 1-theta) and then saturates the cells to 1 ...; between the two a racer
// reads at least 1-theta > theta, so it is told seen." Between the two
// steps the 1-theta decays: after 0.55 T it is below theta. Caller A's
// Seen is admitted (new) at t1; before its saturating Update (held here
// at the Update's hashing, through the hasher: a preemption there), the
// clock reaches t1 + 0.6 T and caller B's Seen of the same key reads
// (1-theta) e^-0.6 = 0.347 < theta = 0.368: B is told new as well. Two
// racers told new within 0.6 T. With T = 1 ms (allowed: within >= 1 ms)
// a preemption of under a millisecond suffices. A fix: decide and
// saturate in one step, TryUpdate(k, 1, 1+theta) (admit iff Min <=
// theta, the +1 clamped at Hi = 1), then Update(k, 1) only when denied.
func TestAudit23FixedNoveltyTwoNewWhenTimePassesMidSeen(t *testing.T) {
	const T = time.Second
	clk := sketchtest.NewFakeClock()
	clk.Set(audit23T0)
	var n *meter.Novelty
	calls := 0
	var bSeen, bRan bool
	hook := func(key string) {
		if key != "k" {
			return
		}
		if calls++; calls == 1 { // inside A's decision (was: A's Update after it)
			clk.Advance(6 * T / 10)
			bRan, bSeen = true, n.Seen("k") // B
		}
	}
	var err error
	n, err = meter.NewNovelty(T, meter.WithClock(clk), meter.WithSize(2, 1024), meter.WithSeed(7),
		meter.WithHasher(hookFactory(0, hook)))
	if err != nil {
		t.Fatal(err)
	}
	aSeen := n.Seen("k") // A
	if !bRan {
		t.Fatal("the hook did not run: the test no longer reaches the interleaving")
	}
	fresh := 0
	for _, s := range []bool{aSeen, bSeen} {
		if !s {
			fresh++
		}
	}
	if fresh != 1 {
		t.Errorf("%d of 2 callers racing Seen on a fresh key told it is new (A seen=%v, B seen=%v, 0.6 T apart), want exactly 1",
			fresh, aSeen, bSeen)
	}
}

// TestAudit23InflightExactSteppingClock: "N goroutines racing
// TryAcquire(k, 100) without releasing get exactly 100 guards", with
// every key in one cell per level (M = 1: a second key's TryAcquires
// share them) and the fake clock stepping by hours both ways meanwhile,
// at GOMAXPROCS 1, 2 and 4; after every guard is released (twice,
// concurrently) both keys count 0.
func TestAudit23InflightExactSteppingClock(t *testing.T) {
	for _, procs := range []int{1, 2, 4} {
		func() {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			clk := sketchtest.NewFakeClock()
			clk.Set(audit23T0)
			in, _ := meter.NewInflight(0, meter.WithClock(clk), meter.WithSize(2, 1), meter.WithSeed(8))
			var stop atomic.Bool
			var sw sync.WaitGroup
			sw.Go(func() {
				for i := 0; !stop.Load(); i++ {
					clk.Set(audit23T0 + int64(i%5-2)*3_600_000)
					runtime.Gosched()
				}
			})
			var mu sync.Mutex
			var guards []*meter.Guard
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Go(func() {
					key := "a"
					if g%4 == 3 {
						key = "b"
					}
					for range 40 {
						if gd := in.TryAcquire(key, 100); gd != nil {
							mu.Lock()
							guards = append(guards, gd)
							mu.Unlock()
						}
					}
				})
			}
			wg.Wait()
			if len(guards) != 100 {
				t.Errorf("GOMAXPROCS %d: %d guards from TryAcquire(·, 100) over keys sharing every cell, want exactly 100", procs, len(guards))
			}
			var rw sync.WaitGroup
			for range 2 {
				rw.Go(func() {
					for _, gd := range guards {
						gd.Release()
					}
				})
			}
			rw.Wait()
			stop.Store(true)
			sw.Wait()
			for _, k := range []string{"a", "b"} {
				if c := in.Count(k); c != 0 {
					t.Errorf("GOMAXPROCS %d: Count(%s) = %d after every release, want 0", procs, k, c)
				}
			}
		}()
	}
}
