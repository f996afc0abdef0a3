package rotator_test

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a99Factory is a HasherFactory that behaves badly on its bad-th call
// (1-based): it returns nil, or panics, and it blocks on hold first when
// hold is not nil. Every other call returns XXH3's hasher for the seed.
type a99Factory struct {
	calls atomic.Int64
	bad   int64
	panic bool
	hold  chan struct{}
}

func (f *a99Factory) build(seed uint64) sketch.Hasher {
	if f.calls.Add(1) == f.bad {
		if f.hold != nil {
			<-f.hold
		}
		if f.panic {
			panic("a99: factory failed")
		}
		return nil
	}
	return sketch.XXH3()(seed)
}

func a99HRot(t *testing.T, clk sketch.Clock, f *a99Factory) *rotator.Rotator {
	t.Helper()
	r, err := rotator.New(rotator.Config{
		Sketch:      sketch.Config{Levels: 2, CellsPerLevel: 256, Hi: 1e9, Decay: decay.None(), Seed: 99, Clock: clk, Hasher: f.build},
		Generations: 2, Period: 10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func a99Panic(f func()) (msg string) {
	defer func() {
		if e := recover(); e != nil {
			msg = fmt.Sprint(e)
		}
	}()
	f()
	return ""
}

// TestAudit99RotHasherNilOnPromotionPanicsThenRecovers: sketch/hash.go:
// "a rotator's promotion, which draws a new seed during an operation,
// panics on one" (a nil Hasher). The factory returns nil for the first
// promotion's seed only (its third call: New built two). The operation
// past the deadline panics naming the Hasher, before any write, counts
// no promotion and leaves the set as it was; a snapshot then neither
// waits for a build nor fails; the claim was given back (rotate.go), so
// the next operation promotes normally and the rotator reads as if the
// failed operation had never run.
func TestAudit99RotHasherNilOnPromotionPanicsThenRecovers(t *testing.T) {
	for _, op := range []string{"Update", "Query", "TryUpdate", "UpdateAndQuery"} {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_765_000_000_000)
		f := &a99Factory{bad: 3}
		r := a99HRot(t, clk, f)
		r.UpdateString("k", 2)
		clk.Advance(10 * time.Millisecond)
		msg := a99Panic(func() {
			switch op {
			case "Update":
				r.UpdateString("k", 5)
			case "Query":
				r.QueryString("k")
			case "TryUpdate":
				r.TryUpdateString("k", 5, 100)
			case "UpdateAndQuery":
				r.UpdateAndQueryString("k", 5)
			}
		})
		if !strings.Contains(msg, "Hasher") {
			t.Fatalf("%s past the deadline with a nil Hasher for the new seed: panic %q, want one naming the Hasher", op, msg)
		}
		if st := r.Stats(); st.Promotions != 0 || st.Periods != 0 || st.Allocated != 2 {
			t.Fatalf("%s: after the failed build Stats %+v, want no promotion and 2 sketches", op, st)
		}
		var b bytes.Buffer
		if _, err := r.WriteTo(&b); err != nil {
			t.Fatalf("%s: WriteTo after the failed build: %v", op, err)
		}
		if got := r.QueryString("k"); got != 2 {
			t.Fatalf("%s: Query after the failed build = %v, want 2 (the write before the deadline, nothing of the failed call)", op, got)
		}
		if st := r.Stats(); st.Promotions != 1 || st.Periods != 1 || st.Allocated != 3 {
			t.Fatalf("%s: Stats %+v after the next operation, want one promotion of one period and 3 sketches (the failed build not counted)", op, st)
		}
		clk.Advance(10 * time.Millisecond)
		if got := r.QueryString("k"); got != 0 {
			t.Fatalf("%s: Query %v at N x Period, want 0", op, got)
		}
	}
}

// TestAudit99RotHasherPanickingBuildWaiterTakesClaim: docs/design.md,
// "Operations during a promotion": "If the claimer's build panicked and
// gave the claim back, a waiter takes the claim." The claimer's factory
// call blocks, then panics; meanwhile other goroutines write past the
// deadline. Whatever the interleaving, the claimer's call panics, every
// other write lands in the published set (the new primary reads them
// all, the newborn too one Period later), and exactly one promotion
// counts.
func TestAudit99RotHasherPanickingBuildWaiterTakesClaim(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		for round := range 4 {
			clk := sketchtest.NewFakeClock()
			clk.Set(1_765_000_000_000)
			f := &a99Factory{bad: 3, panic: true, hold: make(chan struct{})}
			r := a99HRot(t, clk, f)
			clk.Advance(10 * time.Millisecond)
			var msg atomic.Value
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { // the claimer: the first build call blocks, then panics
				defer wg.Done()
				msg.Store(a99Panic(func() { r.UpdateString("claimer", 1) }))
			}()
			for f.calls.Load() < 3 {
				clk.NowMillis()   // spin until the claimer is inside its build
				runtime.Gosched() // a call-free spin loop can go unpreempted for ever under qemu-user
			}
			const writers = 4
			var started atomic.Int64
			for range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					started.Add(1)
					r.UpdateString("w", 1)
				}()
			}
			if round%2 == 1 {
				for started.Load() < writers {
					clk.NowMillis()
					runtime.Gosched() // a call-free spin loop can go unpreempted for ever under qemu-user
				}
			}
			close(f.hold)
			wg.Wait()
			if m, _ := msg.Load().(string); !strings.Contains(m, "a99: factory failed") {
				t.Fatalf("round %d: the claimer's call: panic %q, want the factory's", round, m)
			}
			if got := r.QueryString("w"); got != writers {
				t.Fatalf("round %d: the primary reads %v of %d writes past the deadline", round, got, writers)
			}
			if got := r.QueryString("claimer"); got != 0 {
				t.Fatalf("round %d: the panicked call's write reads %v, want 0", round, got)
			}
			if st := r.Stats(); st.Promotions != 1 || st.Periods != 1 {
				t.Fatalf("round %d: Stats %+v, want one promotion", round, st)
			}
			clk.Advance(10 * time.Millisecond) // the newborn becomes the primary
			if got := r.QueryString("w"); got != writers {
				t.Fatalf("round %d: the newborn, now primary, reads %v of %d writes", round, got, writers)
			}
		}
	})
}
