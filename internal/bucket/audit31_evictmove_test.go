package bucket

import (
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit31EvictionHeldAcrossLongMove: both of a new key's lines full
// of live entries of 28 keys (loads 1..28 tokens, Linear(1000, 60): one
// token a ms, slack 4 ms); the new key's TryUpdate evicts (floor, then
// the victim's slot emptied) and is held before its entry's CAS
// (beforeCAS). While it is held, every key reads at least its true load
// (the victim through the floor), and the clock moves by a gap with the
// victim's line moved to it (a long move: seals). Then the writer
// resumes (its header check fails; it decides again). After: every key
// reads at least its true load and at most it plus one token (no
// phantom), and the new key reads its own token. Promises: doc.go
// "One-sided ... whatever evictions"; the eviction order of c761bf5
// ("raise the floor (header CAS), CAS the victim's slot to an empty,
// then CAS the new entry into it").
func TestAudit31EvictionHeldAcrossLongMove(t *testing.T) {
	for _, gap := range []int64{0, 1, 3, 6, 15, 27, 40, 5000} {
		t.Run(fmt.Sprintf("gap%d", gap), func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			clk.Set(1_000_000)
			e := newTest(t, 2, Linear(1000, 60), clk)
			load := map[string]float64{}
			seen := map[uint16]bool{}
			for i := 0; len(load) < 2*SlotsPerLine; i++ {
				k := fmt.Sprintf("f%d", i)
				_, _, fp := e.Locate(k)
				if seen[fp] {
					continue
				}
				seen[fp] = true
				n := float64(len(load) + 1)
				e.Update(k, n)
				load[k] = n
			}
			var nk string
			for i := 0; ; i++ {
				nk = fmt.Sprintf("new%d", i)
				if _, _, fp := e.Locate(nk); !seen[fp] {
					break
				}
			}
			if e.Query(nk) != 0 {
				t.Fatalf("new key reads %v before its write", e.Query(nk))
			}
			check := func(when string, elapsed float64, extra float64) {
				for k, n := range load {
					want := math.Max(n-elapsed, 0)
					if got := e.Query(k); got < want-1e-9 || got > want+extra+1e-9 {
						t.Errorf("%s: %s reads %v, true load %v (allowed over-count %v)", when, k, got, want, extra)
					}
				}
			}
			paused, resume := make(chan struct{}), make(chan struct{})
			var once sync.Once
			e.setHooks(&testHooks{beforeCAS: func() {
				once.Do(func() { close(paused); <-resume })
			}})
			var ok bool
			var wg sync.WaitGroup
			wg.Go(func() { ok = e.TryUpdate(nk, 1, 30) })
			<-paused
			// The victim is out of its slot, its stamp in the floor: every
			// key still reads at least its load (floors over-count: up to
			// the victim's load, 1 token, for the others of its line).
			check("held after the eviction", 0, 1)
			empty, floors := 0, 0
			for i := range 2 {
				st := StateOf(e, i)
				if st.Floor != 0 {
					floors++
				}
				for _, f := range st.FP {
					if f == 0 {
						empty++
					}
				}
			}
			if empty != 1 || floors != 1 {
				t.Fatalf("held: %d empty slots and %d floors, want the victim's slot emptied and its floor raised (1, 1)", empty, floors)
			}
			clk.Advance(time.Duration(gap) * time.Millisecond)
			t1 := NowMs(e)
			for i := range e.lines {
				e.moveLine(&e.lines[i], t1)
			}
			check("held after the move", float64(gap), 1)
			close(resume)
			wg.Wait()
			e.setHooks(nil)
			if !ok {
				t.Errorf("new key's TryUpdate(1, 30) denied (it inherits at most a floor of 1)")
			}
			check("after", float64(gap), 2)
			if q := e.Query(nk); q < 1-1e-9 || q > 2+1e-9 {
				t.Errorf("new key reads %v after its write of 1 (a floor of at most 1 may add)", q)
			}
		})
	}
}
