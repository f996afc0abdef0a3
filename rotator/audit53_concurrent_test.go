package rotator_test

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit53ConcurrentSnapshotsAcrossHugeJumps: a rotator (N = 2, Period
// 2^33 ms, no decay) takes 12 snapshots while 3 writers add 1 to their
// keys and a jumper moves the clock by 2^24, 2^29, 2^31 and 2^32 ms
// (and back 3 ms) across its first deadline, at GOMAXPROCS 1, 2, 4 and 8
// under -race. Each WriteTo either succeeds or fails with the sketch's
// "take the snapshot again" error (a cell written more than 2^24 ms after
// a generation's instant); each snapshot restores (UnmarshalBinary) into
// a fresh rotator whose clock reads the final time (past the deadline,
// before the next), where every key reads at least the adds completed
// before WriteTo began and at most those completed when it returned
// (docs/snapshots.md: "every update completed before WriteTo was called
// is fully included"; each cell between its values at the start and the
// end of the encode). Writes made during an encode that crossed the
// deadline are the findings' business, not checked here beyond the upper
// bound.
func TestAudit53ConcurrentSnapshotsAcrossHugeJumps(t *testing.T) {
	const P = int64(1) << 33
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		clk := sketchtest.NewFakeClock()
		clk.Set(a53T0)
		r := a53New(t, clk, 2, time.Duration(P)*time.Millisecond, 53)
		clk.Set(a53T0 + P - 1<<32)
		jumps := []int64{1 << 24, 1 << 29, -3, 1 << 31, 1<<31 - 1<<29, 1 << 29, 1 << 32}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for _, j := range jumps {
				time.Sleep(300 * time.Microsecond)
				clk.Set(clk.NowMillis() + j)
			}
		}()
		var counts [3]atomic.Int64
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				k := fmt.Sprintf("w%d", w)
				for {
					select {
					case <-stop:
						return
					default:
					}
					r.UpdateString(k, 1)
					counts[w].Add(1)
				}
			}()
		}
		type snap struct {
			lo, hi [3]int64
			data   []byte
		}
		var snaps []snap
		refused := 0
		for range 12 {
			var s snap
			for w := range 3 {
				s.lo[w] = counts[w].Load()
			}
			var b bytes.Buffer
			_, err := r.WriteTo(&b)
			for w := range 3 {
				// +1: a writer's add may be done and not yet counted.
				s.hi[w] = counts[w].Load() + 1
			}
			if err != nil {
				if !strings.Contains(err.Error(), "take the snapshot again") {
					t.Fatalf("WriteTo: %v", err)
				}
				refused++
			} else {
				s.data = b.Bytes()
				snaps = append(snaps, s)
			}
			time.Sleep(150 * time.Microsecond)
		}
		<-done
		close(stop)
		wg.Wait()
		end := clk.NowMillis()
		if end < a53T0+P || end >= a53T0+2*P {
			t.Fatalf("the clock ended at +%d ms, not between the first two deadlines", end-a53T0)
		}
		for i, s := range snaps {
			rc := sketchtest.NewFakeClock()
			rc.Set(end)
			nr := a53New(t, rc, 2, time.Duration(P)*time.Millisecond, 53)
			if err := nr.UnmarshalBinary(s.data); err != nil {
				t.Fatalf("snapshot %d: %v", i, err)
			}
			for w := range 3 {
				got := nr.QueryString(fmt.Sprintf("w%d", w))
				if got < float64(s.lo[w]) || got > float64(s.hi[w]) {
					t.Errorf("snapshot %d: restored w%d = %v, want in [%d, %d]", i, w, got, s.lo[w], s.hi[w])
				}
			}
		}
		t.Logf("%d snapshots restored, %d refused with the clock-jump error", len(snaps), refused)
	})
}

// TestAudit53StatsConcurrentJumps: 4 goroutines Update and Query a
// rotator (N = 3, Period 5 ms) while a fifth moves the clock by 4, 5, 6,
// 15, 16 ms, 2^24, 2^29, 2^31 and 2^32 ms and back 1 h, at GOMAXPROCS 1,
// 2, 4 and 8 under -race. After a last access at the final reading,
// Stats.Periods is exactly the whole Periods between New and the
// clock's high-water mark ("a clock jump of k periods counts k in one
// promotion", "Exactly one promotion per deadline crossed"); Promotions
// is at most the clock's moves (one per deadline crossed, each crossing
// needs a move) and at least 1; Allocated is N + the generations built,
// between N + Promotions and N + min(Periods, N x Promotions).
func TestAudit53StatsConcurrentJumps(t *testing.T) {
	const pms, n = 5, 3
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		clk := sketchtest.NewFakeClock()
		clk.Set(a53T0)
		r := a53New(t, clk, n, pms*time.Millisecond, 9)
		steps := []int64{4, 5, 6, 15, 16, 1 << 24, -3_600_000, 1 << 29, 1 << 31, 1 << 32}
		done := make(chan struct{})
		moves := 0
		hw := int64(a53T0)
		go func() {
			defer close(done)
			for i := range 60 {
				time.Sleep(30 * time.Microsecond)
				clk.Set(clk.NowMillis() + steps[i%len(steps)])
				hw = max(hw, clk.NowMillis())
				moves++
			}
		}()
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				k := fmt.Sprintf("k%d", w)
				for {
					select {
					case <-done:
						return
					default:
					}
					r.UpdateString(k, 1)
					r.QueryString(k)
				}
			}()
		}
		wg.Wait()
		<-done
		r.QueryString("last")
		st := r.Stats()
		want := uint64((hw - a53T0) / pms)
		if st.Periods != want {
			t.Errorf("Stats.Periods = %d; want %d, the whole Periods up to the high-water mark", st.Periods, want)
		}
		if st.Promotions < 1 || st.Promotions > uint64(moves) {
			t.Errorf("Stats.Promotions = %d with %d clock moves", st.Promotions, moves)
		}
		if st.Allocated < n+st.Promotions || st.Allocated > n+min(st.Periods, n*st.Promotions) {
			t.Errorf("Stats.Allocated = %d; want in [%d, %d]", st.Allocated, n+st.Promotions, n+min(st.Periods, n*st.Promotions))
		}
	})
}
